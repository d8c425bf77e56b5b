"""Renderings of a DiffReport: terminal tables, plain text, Markdown (a review comment), JSON."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from traceview.analyses.core.names import display_names
from traceview.analyses.diff import (
    Change,
    DiffReport,
    Explain,
    Failure,
    KernelChange,
    SideView,
    describe_steps,
)
from traceview.render import units
from traceview.render.document import Document, Lines, Section
from traceview.render.tables import Table

SCHEMA_VERSION = 1
# Numbers first, the kernel name last (it is what folds on a narrow terminal).
_KERNEL_HEADERS: tuple[str, ...] = (
    "#", "Count", "Time before", "Time after", "Δ time", "Δ %", "Mean before", "Mean after",
)  # fmt: skip
# Columns left out, in this order, when the terminal is too narrow for all of them.
_NARROW_DROP = ("Mean before", "Mean after", "Time before", "Count")
_MODES = {
    "median": "per-step medians",
    "steps": "totals",
    "total": "whole-trace totals",
}


def summary_lines(report: DiffReport) -> list[str]:
    """Header: the two sides, how they are compared, warnings and notes."""
    lines = [_side_line("base", report.base), _side_line("new", report.new)]
    lines.append(f"compare  {_compare(report)}")
    lines += headline_lines(report)
    lines += explain_lines(report.explain, report.options.group_by == "name")
    for which, side in (("base", report.base), ("new", report.new)):
        lines += [f"warning  {which}: {w}" for w in side.trace.warnings]
    lines += [f"note     {n}" for n in report.notes]
    return lines


_GROUPS = {"name": "kernel", "short": "kernel", "category": "category", "op": "op",
           "fused-op": "op"}  # fmt: skip


def headline_lines(report: DiffReport) -> list[str]:
    """The change in kernel and step time, and the largest moves (new and vanished too)."""
    h = report.headline
    if h is None:
        return []
    group = _GROUPS.get(str(report.options.group_by), "kernel")
    moves = ", ".join(
        f"{_shown(k)} {_signed(k.delta_us, _time)}"
        + ("" if k.status == "changed" else f" ({k.status})")
        for k in h.moves
    )
    text = f"headline kernel time {_pct(h.kernel_time_pct)}%, step time {_pct(h.step_time_pct)}%"
    return [text + (f"; largest moves by {group}: {moves}" if moves else "")]


EXPLAIN_LEAD = 3  # the parts the explain line names


def explain_lines(e: Explain | None, by_name: bool = False) -> list[str]:
    """The median steps' times, the change, and the largest parts (kernel names short when
    ``by_name``)."""
    if e is None:
        return []
    lead_parts = [p for p in e.parts[:EXPLAIN_LEAD] if p.delta_ns]
    shown = display_names([p.group for p in lead_parts]) if by_name else {}
    lead = ", ".join(
        f"{shown.get(p.group, p.group)} ({p.kind}) {_signed(p.delta_ns / 1000, _time)}"
        for p in lead_parts
    )
    return [
        f"explain  median step {_time(e.base_ns / 1000)} (step {e.base_step}) → "
        f"{_time(e.new_ns / 1000)} (step {e.new_step}): "
        f"{_signed(e.total_ns / 1000, _time) if e.total_ns else '0'}"
        + (f"; largest parts: {lead}" if lead else "; every part 0")
    ]


def explain_table(e: Explain, verbose: bool = False, by_name: bool = True, top: int = 0) -> Table:
    """The waterfall: each part's Δ and the running total, largest |Δ| first; the last
    running total is the change in median step time. Kernel names shortened as in the
    kernel tables (``by_name``: the groups are kernel names) unless ``verbose``; past ``top``
    parts (0: all), the rest as one row, so the running total still ends at the change."""
    groups = [p.group for p in e.parts if p.kind in ("slower", "faster", "new", "gone")]
    shown = display_names(groups) if by_name and not verbose else {}
    rows, running = [], 0
    kept = e.parts[:top] if top else e.parts
    for rank, p in enumerate(kept, 1):
        running += p.delta_ns
        rows.append(
            (str(rank), _signed(p.delta_ns / 1000, _time), _signed(running / 1000, _time),
             p.kind, shown.get(p.group, p.group))
        )  # fmt: skip
    rest = e.parts[len(kept) :]
    if rest:
        delta = sum(p.delta_ns for p in rest)
        running += delta
        rows.append(
            ("", _signed(delta / 1000, _time), _signed(running / 1000, _time), "",
             f"{len(rest)} more parts (--top 0 for all)")
        )  # fmt: skip
    return Table(("#", "Δ", "Running", "Kind", "Part"), (True, True, True, False, False), rows)


def _shown(k: KernelChange) -> str:
    return k.short_name or k.name


def figures_table(report: DiffReport) -> Table:
    """Kernel time, launches, idle time and step time: before, after, delta, %."""
    rows = []
    for f in report.figures:
        fmt = _count if f.key == "kernel_count" else _time  # durations in the unit that fits
        label = f.label.removesuffix(" (µs)")
        rows.append((label, fmt(f.before), fmt(f.after), _signed(f.delta, fmt), _pct(f.pct)))
    return Table(("Figure", "Before", "After", "Delta", "%"), (False, True, True, True, True), rows)


def kernels_table(report: DiffReport, verbose: bool) -> Table:
    """Kernels on both sides, largest |Δ time| first; a Gate column when a gate is set."""
    gate = report.gate.max_regression_pct is not None
    headers = _KERNEL_HEADERS + (("Gate",) if gate else ()) + ("Kernel",)
    rows = []
    for rank, k in enumerate(report.kernels, 1):
        cells = (str(rank), _counts(k.count_before, k.count_after), _time(k.time_before_us),
                 _time(k.time_after_us), _signed(k.delta_us, _time), _pct(k.pct),
                 _time(k.mean_before_us), _time(k.mean_after_us))  # fmt: skip
        rows.append(cells + ((_gate_cell(k),) if gate else ()) + (_name(k, verbose),))
    return Table(headers, (*(True,) * (len(headers) - 1), False), rows)


def one_side_table(rows: tuple[KernelChange, ...], verbose: bool, after: bool) -> Table:
    """New kernels (their NEW figures) or vanished ones (their BASE figures)."""
    cells = [
        (str(rank), _count(k.count_after if after else k.count_before),
         _time(k.time_after_us if after else k.time_before_us),
         _time(k.mean_after_us if after else k.mean_before_us), _name(k, verbose))
        for rank, k in enumerate(rows, 1)
    ]  # fmt: skip
    headers = ("#", "Count", "Time", "Mean", "Kernel")
    return Table(headers, (True, True, True, True, False), cells)


def gate_lines(report: DiffReport, verbose: bool) -> list[str]:
    """The verdict, and one line per failed check (every regressed kernel is named)."""
    gate = report.gate
    if not gate.active:
        return ["gate     none (add --max-regression 5% to fail on a regression)"]
    if gate.passed:
        return [f"gate     PASS: {_limits(report)}"]
    head = f"gate     FAIL: {len(gate.failures)} regression{'s' * (len(gate.failures) > 1)}"
    lines = [f"{head}; {_limits(report)}"]
    return lines + [f"  {_failure(f, verbose)}" for f in gate.failures]


def failure_message(report: DiffReport, verbose: bool) -> str:
    """The one stderr line of a failed gate."""
    return "regression gate failed: " + "; ".join(
        _failure(f, verbose) for f in report.gate.failures
    )


def _verdict_style(report: DiffReport) -> str | None:
    if not report.gate.active:
        return None
    return "bold green" if report.gate.passed else "bold red"


def _sections(report: DiffReport, verbose: bool) -> list[tuple[str, Table, str]]:
    """(title, table, footer) of each section; the footer says what --top left out."""
    per = " (per-step medians)" if report.mode == "median" else ""
    out = report.left_out
    waterfall = []
    if report.explain is not None:
        e = report.explain
        waterfall = [
            (f"Explain: median step time {_time(e.base_ns / 1000)} → {_time(e.new_ns / 1000)}, "
             "its change in parts (they add up to it exactly)",
             explain_table(e, verbose, report.options.group_by == "name", report.options.top),
             "")
        ]  # fmt: skip
    return [
        *waterfall,
        (f"Summary{per}", figures_table(report), ""),
        (f"Kernels on both sides, by |Δ time|{per}", kernels_table(report, verbose),
         _footer(out["kernels"], "kernel")),
        ("New kernels (only in NEW)", one_side_table(report.new_kernels, verbose, True),
         _footer(out["new"], "new kernel")),
        ("Vanished kernels (only in BASE)",
         one_side_table(report.vanished, verbose, False), _footer(out["vanished"], "vanished",
                                                                "vanished")),
    ]  # fmt: skip


def document(report: DiffReport, verbose: bool) -> Document:
    """``traceview diff`` in every format (no CSV: it is several tables); the gate's verdict
    last, in green or red on a terminal, and the Markdown review comment's headline."""
    gate = gate_lines(report, verbose)
    verdict = gate[0].removeprefix("gate     ")
    return Document(
        head=summary_lines(report),
        sections=[
            Section(
                (table if table.rows else Lines(["none"])),
                title=title,
                note=footer or None,
                drop_order=_NARROW_DROP,
            )
            for title, table, footer in _sections(report, verbose)
        ],
        foot=gate,
        foot_style=_verdict_style(report),
        title="traceview diff" + (f" — {verdict}" if report.gate.active else ""),
        data=lambda: as_json(report),
        csv=None,
    )


def as_json(report: DiffReport) -> dict[str, Any]:
    """The documented JSON shape (schema_version 1)."""
    gate = report.gate
    return {
        "schema_version": SCHEMA_VERSION,
        "base": _side_json(report.base),
        "new": _side_json(report.new),
        "mode": report.mode,
        "selection": {
            "steps": list(report.options.steps),
            "top": report.options.top,
            "group_by": report.options.group_by,
            "min_share_pct": gate.min_share_pct,
            "min_time_us": gate.min_time_us,
        },
        "totals": {f.key: _change_json(f) for f in report.figures},
        "kernels": [_kernel_json(k) for k in report.kernels],
        "new_kernels": [_kernel_json(k) for k in report.new_kernels],
        "vanished_kernels": [_kernel_json(k) for k in report.vanished],
        "left_out": dict(report.left_out),
        "gate": {
            "active": gate.active,
            "passed": gate.passed if gate.active else None,
            "max_regression_pct": gate.max_regression_pct,
            "max_idle_regression_pct": gate.max_idle_regression_pct,
            "failures": [_failure_json(f) for f in gate.failures],
        },
        "headline": _headline_json(report),
        "explain": None if report.explain is None else report.explain.as_dict(),
        "notes": list(report.notes),
    }


def _headline_json(report: DiffReport) -> dict[str, Any] | None:
    h = report.headline
    if h is None:
        return None
    return {
        "kernel_time_pct": _r(h.kernel_time_pct),
        "step_time_pct": _r(h.step_time_pct),
        "moves": [
            {"name": k.name, "status": k.status, "delta_us": _r(k.delta_us)} for k in h.moves
        ],
    }


def _side_line(which: str, side: SideView) -> str:
    trace = side.trace
    steps = f"{side.available_steps} step{'s' * (side.available_steps != 1)}"
    if side.source == "snapshot":
        return f"{which:<8} {side.path} (snapshot of {trace.path}, {steps})"
    if side.source in ("run", "run snapshot"):  # a run's roll-up (traceview.app.runs)
        return (
            f"{which:<8} {side.path} ({side.source}: {trace.path}, {units.size(trace.size_bytes)})"
        )
    size = units.size(trace.size_bytes)
    return f"{which:<8} {side.path} (trace, {size}, {steps})"


def _compare(report: DiffReport) -> str:
    mode = _MODES[report.mode]
    if report.mode != "total":
        base, new = describe_steps(report.base.steps), describe_steps(report.new.steps)
        return f"{mode} of ProfilerSteps {base} (base) and {new} (new)"
    have = f"base has {report.base.available_steps}, new has {report.new.available_steps}"
    return f"{mode} (per-step medians need 2+ ProfilerSteps on each side: {have})"


def _limits(report: DiffReport) -> str:
    gate, parts = report.gate, []
    if gate.max_regression_pct is not None:
        parts.append(
            f"max regression {gate.max_regression_pct:g}% for kernel time and each kernel with "
            f"≥ {gate.min_share_pct:g}% of base kernel time and ≥ {gate.min_time_us:g} µs"
        )
    if gate.max_idle_regression_pct is not None:
        parts.append(f"max GPU idle regression {gate.max_idle_regression_pct:g}%")
    return "; ".join(parts)


def _failure(f: Failure, verbose: bool) -> str:
    what = {"kernel_time": "total kernel time", "idle": "GPU idle time"}.get(f.what)
    label = what or f"{'part' if f.what == 'part' else 'kernel'} {_name(f, verbose)}"
    times = f"({units.time(f.before)} → {units.time(f.after)})"
    if f.pct is None:
        return f"{label} grew from 0 in the baseline {times} (--allow-empty-baseline accepts it)"
    return f"{label} {f.pct:+.2f}% > {f.limit_pct:g}% {times}"


def _gate_cell(k: KernelChange) -> str:
    return "FAIL" if k.regressed else "ok" if k.gated else "-"


def _footer(left_out: int, noun: str, plural: str | None = None) -> str:
    if not left_out:
        return ""
    more = units.counted(left_out, f"more {noun}", plural and f"more {plural}")
    return f"{more} not shown; use --top 0 for all"


def _name(k: KernelChange | Failure, verbose: bool) -> str:
    return k.name if verbose else k.short_name


def _time(value: float | None) -> str:
    """A kernel time in a table: the unit that fits its size."""
    return "-" if value is None else units.time(value)


def _count(value: float | None) -> str:
    if value is None:
        return "-"
    return units.count(int(value)) if float(value).is_integer() else f"{value:,.1f}"


def _counts(before: float, after: float) -> str:
    """``25`` when the count did not change, else ``25 → 27``."""
    return _count(before) if before == after else f"{_count(before)} → {_count(after)}"


def _signed(value: float | None, fmt: Callable[[float], str]) -> str:
    if value is None:
        return "-"
    text = fmt(abs(value))
    return text if text.strip("0.,") == "" else ("+" if value > 0 else "-") + text


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}"


def _r(value: float | None) -> float | None:
    """µs and % in JSON: rounded to 3 decimals (ns), so float noise does not show."""
    return None if value is None else round(value, 3)


def _n(value: float) -> int | float:
    """A count: an int unless it is the median of an even number of steps."""
    return int(value) if float(value).is_integer() else value


def _side_json(side: SideView) -> dict[str, Any]:
    return {
        "path": side.path,
        "source": side.source,
        "traceview_version": side.traceview_version,
        "trace": asdict(side.trace),
        "steps": list(side.steps),
        "available_steps": side.available_steps,
        "step_busy_pct": side.step_busy_pct,
        "cpu_bound": side.cpu_bound,
    }


def _change_json(change: Change) -> dict[str, Any]:
    number = _n if change.key == "kernel_count" else _r
    return {
        "before": None if change.before is None else number(change.before),
        "after": None if change.after is None else number(change.after),
        "delta": None if change.delta is None else number(change.delta),
        "pct": _r(change.pct),
    }


def _kernel_json(k: KernelChange) -> dict[str, Any]:
    return {
        "name": k.name,
        "short_name": k.short_name,
        "status": k.status,
        "count_before": _n(k.count_before),
        "count_after": _n(k.count_after),
        "time_before_us": _r(k.time_before_us),
        "time_after_us": _r(k.time_after_us),
        "delta_us": _r(k.delta_us),
        "pct": _r(k.pct),
        "mean_before_us": _r(k.mean_before_us),
        "mean_after_us": _r(k.mean_after_us),
        "mean_delta_us": _r(k.mean_delta_us),
        "share_before_pct": _r(k.share_before_pct),
        "gated": k.gated,
        "regressed": k.regressed,
    }


def _failure_json(f: Failure) -> dict[str, Any]:
    return {
        "what": f.what,
        "name": f.name,
        "before": _r(f.before),
        "after": _r(f.after),
        "pct": _r(f.pct),
        "limit_pct": f.limit_pct,
    }

"""Renderings of the steps table: one line per step and device."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from traceview.analyses.core.phase_figures import counted
from traceview.analyses.core.step_markers import UNKNOWN, unread_counts
from traceview.analyses.core.steps import EMPTY, StepDevice, StepRow, compress
from traceview.analyses.core.trace import TraceSummary
from traceview.analyses.ops.model_flops import ModelFlops, StepFlops
from traceview.render import first_rows as capped
from traceview.render import units
from traceview.render.document import Document, Section
from traceview.render.header import trace_lines
from traceview.render.tables import Table, to_csv

SCHEMA_VERSION = 2
_HEADERS = ("Step", "Device", "CPU start", "CPU dur", "Step time", "Kernels", "Kernel time",
            "GPU window", "Busy %", "Idle", "Lag", "Queue")  # fmt: skip
# On a narrow terminal these go first (the step, its device, duration, GPU window, busy % and
# lag stay: they say whether the GPU or the CPU set the pace).
_NARROW_DROP = ("CPU start", "Kernel time", "Queue", "Kernels", "Tokens", "Idle", "TFLOP",
                "CPU dur")  # fmt: skip
_STEP_CSV = ("step", "name", "cpu_start_us", "cpu_dur_us", "step_time_us", "paced_by",
             "kernels", "kernel_time_us", "gpu_only", "phase", "model_flops", "mfu",
             "tokens")  # fmt: skip
_DEVICE_CSV = ("device", "gpu_start_us", "gpu_end_us", "window_us", "busy_us", "idle_us",
               "busy_pct", "lag_us", "queue_us", "period_us")  # fmt: skip


def table(trace: TraceSummary, rows: Sequence[StepRow], flops: ModelFlops | None = None) -> Table:
    """One line per step and device (a step without GPU work: one line, device ``-``); with
    ``flops`` (shapes recorded), the step's model TFLOP, MFU % and tokens at the end."""
    plain = _table(trace, rows)
    if flops is None or not flops.shapes:
        return plain
    extra = [_flops_cells(flops.of(r.step)) for r in rows for _ in r.devices or (None,)]
    return Table(
        (*plain.headers, "TFLOP", "MFU %", "Tokens"),
        (*plain.right, True, True, True),
        [(*row, *more) for row, more in zip(plain.rows, extra, strict=True)],
    )


def _flops_cells(f: StepFlops | None) -> tuple[str, str, str]:
    if f is None:
        return ("-", "-", "-")
    mfu = "-" if f.mfu is None else units.pct(100 * f.mfu)
    tokens = "-" if f.tokens is None else units.count(f.tokens)
    return (f"{f.model_flops / 1e12:,.2f}", mfu, tokens)


def _table(trace: TraceSummary, rows: Sequence[StepRow]) -> Table:
    cells = []
    for r in rows:
        step = r.name + (" (gpu annotation)" if r.gpu_only else "")
        head = (
            step,
            units.duration((r.cpu_start_ns - trace.span_start_ns) / 1000),
            units.duration((r.cpu_end_ns - r.cpu_start_ns) / 1000),
            units.duration_ns(r.step_ns),
            units.count(r.kernels),
            units.duration_ns(r.kernel_time_ns),
        )
        for d in r.devices or (None,):
            cells.append((head[0], "-" if d is None else str(d.device), *head[1:], *_device(d)))
    right = (False, *(True,) * 11)  # the device is a number (or -)
    if not any(has_phase(r) for r in rows):
        return Table(_HEADERS, right, cells)
    phase = iter([r.phase or UNKNOWN for r in rows for _ in r.devices or (None,)])
    cells = [(c[0], next(phase), *c[1:]) for c in cells]
    return Table((_HEADERS[0], "Phase", *_HEADERS[1:]), (False, *right), cells)


def has_phase(r: StepRow) -> bool:
    """Whether the step's phase is known (shown in a Phase column)."""
    return r.phase not in ("", UNKNOWN)


def _device(d: StepDevice | None) -> tuple[str, ...]:
    if d is None:
        return ("-",) * 5
    return (
        units.duration_ns(d.window_ns),
        units.pct(d.busy_pct),
        *(units.duration_ns(v) for v in (d.idle_ns, d.lag_ns, d.queue_ns)),
    )


def notes(rows: list[StepRow]) -> list[str]:
    """Per device: the steps in which it ran behind the CPU (GPU-bound), and those whose GPU
    work started late because the CPU launched it late."""
    behind: dict[Any, list[tuple[int, int]]] = {}
    late: dict[Any, list[tuple[int, int]]] = {}
    for r in rows:
        for d in r.devices:
            if r.behind(d):
                behind.setdefault(d.device, []).append((r.step, d.queue_ns))
            elif d.lag_ns - d.queue_ns >= 0.1 * (r.cpu_end_ns - r.cpu_start_ns) > 0:
                late.setdefault(d.device, []).append((r.step, d.lag_ns - d.queue_ns))
    out = [
        f"device {device}: GPU {_spread(found)} behind the CPU in {_steps(found)} (the first "
        "work waited that long after its launch): GPU-bound"
        for device, found in behind.items()
    ]
    paced = [r.step for r in rows if r.gpu_paced]
    if paced:
        out.append(
            f"step time: the GPU's period in {_steps([(n, 0) for n in paced])} (the GPU set the "
            "pace; CPU dur beside it)"
        )
    out += [
        f"device {device}: the CPU launched the first GPU work {_spread(found)} into "
        f"{_steps(found)} (data loading or other CPU work first)"
        for device, found in late.items()
    ]
    unread = [
        r.step for r in rows if (r.batch is None or r.tokens is None) and unread_counts(r.name)
    ]
    if unread:
        out.append(f"{_steps([(n, 0) for n in unread])}: a count in the marker's name is beyond "
                   "int64: read as absent (null)")  # fmt: skip
    if len(rows) > 1 and all(r.degenerate == EMPTY for r in rows):  # a CPU-only trace
        out.append(f"no step ran GPU work: all {len(rows)} steps are degenerate: {EMPTY}")
    else:
        out += [
            f"step {r.step} ({r.name}) is degenerate: {r.degenerate}" for r in rows if r.degenerate
        ]
    return out


def _spread(found: list[tuple[int, int]]) -> str:
    lo, hi = min(ns for _, ns in found), max(ns for _, ns in found)
    if lo == hi:
        return units.duration_ns(lo)
    return f"{units.duration_ns(lo)} to {units.duration_ns(hi)}"


def _steps(found: list[tuple[int, int]]) -> str:
    numbers = [n for n, _ in found]
    word = "step" if len(numbers) == 1 else "steps"
    return f"{word} {compress(numbers)}"


def csv(rows: list[StepRow], flops: ModelFlops | None = None) -> str:
    """One CSV row per step and device, raw numbers (µs); the step's model FLOPs, MFU (a
    fraction) and tokens empty when unknown."""
    out = []
    for r in rows:
        step = _step_dict(r, flops)
        head = tuple("" if step[f] is None else step[f] for f in _STEP_CSV)
        for d in step["devices"] or [dict.fromkeys(_DEVICE_CSV, "")]:
            out.append((*head, *(d[f] for f in _DEVICE_CSV)))
    return to_csv((*_STEP_CSV, *_DEVICE_CSV), out)


def as_json(
    trace: TraceSummary, rows: list[StepRow], flops: ModelFlops | None = None
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "trace": trace.as_dict(),
        "steps": [_step_dict(r, flops) for r in rows],
        "mfu": None if flops is None else flops.summary(counted(rows, False)).as_dict(),
        "notes": notes(rows) + _flops_notes(rows, flops),
    }


def _step_dict(r: StepRow, flops: ModelFlops | None) -> dict[str, Any]:
    """A step's JSON: its figures, and its model FLOPs, MFU and tokens (null when unknown;
    ``tokens`` then as the serving marker says)."""
    out = r.as_dict()
    found = None if flops is None else flops.of(r.step)
    if found is None:
        out.update(model_flops=None, mfu=None, tflops_per_s=None, flops_coverage=None)
        out.update(tokens_source="serving step marker" if r.tokens else None)
    else:
        out.update(found.as_dict())
        if not flops or not flops.shapes:
            out.update(model_flops=None, tflops_per_s=None, flops_coverage=None)
    return out


def _flops_notes(rows: list[StepRow], flops: ModelFlops | None) -> list[str]:
    """Why MFU is not given, or where tokens and the peak come from."""
    if flops is None or not rows:
        return []
    m = flops.summary(counted(rows, False))
    if m.why:
        return [f"MFU not given: {m.why}"]
    out = [
        f"MFU: model FLOPs / (step time × {m.dtype} peak {m.peak_tflops_per_s:,.1f} TFLOP/s, "
        f"{m.peak_source}), FLOPs known for {units.pct(100 * (m.coverage or 0))}% of the "
        "kernel time (docs/metrics.md#model-flops-and-mfu)"
    ]
    if m.tokens_source:
        out.append(f"tokens: from {m.tokens_source}")
    return out


def summary_lines(trace: TraceSummary, rows: list[StepRow]) -> list[str]:
    """Header: the trace, and a line when it has no steps."""
    lines = trace_lines(trace)
    if not rows:
        lines.append(
            "steps    no ProfilerStep#N annotations nor serving step markers in this trace"
        )
    elif rows[0].label:
        lines.append(
            f"steps    {units.counted(len(rows), 'step')} from serving step markers "
            f"({rows[0].name}, ...): docs/metrics.md#serving-steps-and-phases"
        )
    return lines


def _more(rows: list[StepRow], top: int) -> str | None:
    """What the table left out: steps, and their lines when a step has several devices."""
    hidden = rows[top:] if top else []
    lines = sum(max(len(r.devices), 1) for r in hidden)
    detail = units.counted(lines, "line") if lines != len(hidden) else ""
    return capped.more_line(len(rows), top, "step", "--top", detail)


def _footer(rows: list[StepRow], flops: ModelFlops | None = None) -> list[str]:
    legend = (
        "CPU start: from the trace start; Step time: the GPU's period (its GPU end − the "
        "previous step's) where the GPU ran behind the CPU, else the CPU dur; GPU window: the "
        "step's GPU work on the device, first start to last end; Lag: GPU start − CPU step "
        "start; Queue: GPU start − launch of its first work"
    )
    found = notes(rows) + _flops_notes(rows, flops)
    return [f"note     {n}" for n in found] + ([legend] if rows else [])


def document(
    trace: TraceSummary, rows: list[StepRow], top: int, flops: ModelFlops | None = None
) -> Document:
    """``traceview steps`` in every format; the table (terminal, text, Markdown) shows the
    first ``top`` steps (0: all), JSON and CSV every step; ``flops``: model FLOPs, MFU and
    tokens per step."""
    shown = capped.head(rows, top)
    body = table(trace, shown, flops)
    return Document(
        head=summary_lines(trace, rows),
        sections=[Section(body, note=_more(rows, top), drop_order=_NARROW_DROP)],
        foot=_footer(rows, flops),
        data=lambda: as_json(trace, rows, flops),
        csv=lambda: csv(rows, flops),
    )

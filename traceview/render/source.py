"""Renderings of a SourceReport: tables by frame or by module, JSON, CSV, collapsed stacks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from traceview.analyses.core.trace import TraceSummary
from traceview.analyses.source import SCHEMA_VERSION, SourceReport
from traceview.analyses.source_tables import FrameRow, ModuleRow
from traceview.render import units
from traceview.render.document import Document, Section
from traceview.render.escape import visible
from traceview.render.header import trace_lines
from traceview.render.tables import Table, to_csv

BY_FRAME, BY_MODULE = "frame", "module"
RECORD_HINT = "record with torch.profiler.profile(with_stack=True) or `traceview record --stack`"
_FRAME_HEADERS = ("#", "Self", "Total", "% GPU", "Backward", "Kernels", "Calls", "Frame")
_MODULE_HEADERS = ("#", "Forward", "Backward", "% GPU", "Calls", "Module path")
_FRAME_DROP = ("Backward", "Calls", "Kernels")
_MODULE_DROP = ("Calls",)
FRAME_CSV = ("frame", "self_gpu_time_us", "gpu_time_us", "backward_gpu_time_us", "kernels",
             "calls")  # fmt: skip
MODULE_CSV = ("module", "path", "forward_gpu_time_us", "backward_gpu_time_us", "calls")


def no_frames_line(report: SourceReport) -> str:
    """The one line for a trace without python frames."""
    return (
        f"{report.path}: no Python frames (stacks) in this trace: {RECORD_HINT}; "
        f"{units.counted(report.kernels, 'kernel')} "
        f"({units.duration_ns(report.kernel_ns)} of GPU time) counted as unattributed"
    )


def summary_lines(trace: TraceSummary, report: SourceReport) -> list[str]:
    """Header: trace, totals, why time is unattributed, notes."""
    lines = trace_lines(trace)
    lines.append(
        f"kernels  {units.counted(report.kernels, 'kernel')}, "
        f"{units.duration_ns(report.kernel_ns)} of GPU time; "
        f"{units.counted(report.frame_count, 'python frame')}"
    )
    if report.steps:
        lines.append(f"steps    {', '.join(map(str, report.steps))}")
    lines.append(
        f"frames   {_share(report.attributed_ns, report)} attributed "
        f"(backward through fwdbwd flows: {_share(report.backward_ns, report)})"
    )
    for why, ns in report.unattributed.items():
        lines.append(f"no frame {_share(ns, report)}: {why}")
    if not report.has_frames:
        lines.append(f"note     no Python frames (stacks) in this trace: {RECORD_HINT}")
    lines += [f"note     {n}" for n in report.notes]
    return lines


def _share(ns: int, report: SourceReport) -> str:
    return f"{units.duration_ns(ns)} ({units.pct(_pct(ns, report))}%)"


def _pct(ns: int, report: SourceReport) -> float:
    return 100 * ns / report.kernel_ns if report.kernel_ns else 0.0


def frame_table(report: SourceReport, top: int) -> Table:
    kept = report.frames if top == 0 else report.frames[:top]
    rows = [
        (
            str(i),
            units.time_ns(r.self_ns),
            units.time_ns(r.total_ns),
            units.pct(_pct(r.total_ns, report)),
            units.time_ns(r.backward_ns),
            units.count(r.kernels),
            units.count(r.calls),
            r.frame,
        )
        for i, r in enumerate(kept, 1)
    ]
    return Table(_FRAME_HEADERS, (True,) * 7 + (False,), rows)


def module_table(report: SourceReport, top: int) -> Table:
    kept = report.modules if top == 0 else report.modules[:top]
    rows = [
        (str(i), units.time_ns(r.forward_ns), units.time_ns(r.backward_ns),
         units.pct(_pct(r.forward_ns + r.backward_ns, report)), units.count(r.calls), r.path)
        for i, r in enumerate(kept, 1)
    ]  # fmt: skip
    return Table(_MODULE_HEADERS, (True,) * 5 + (False,), rows)


def frame_json(row: FrameRow) -> dict[str, Any]:
    """One frame: the contract's fields, then the backward part."""
    return {
        "frame": row.frame,
        "self_gpu_time_us": row.self_ns / 1000,
        "gpu_time_us": row.total_ns / 1000,
        "kernels": row.kernels,
        "calls": row.calls,
        "backward_gpu_time_us": row.backward_ns / 1000,
    }


def module_json(row: ModuleRow) -> dict[str, Any]:
    """One module path: the contract's fields, then its calls."""
    return {
        "module": row.module,
        "path": row.path,
        "forward_gpu_time_us": row.forward_ns / 1000,
        "backward_gpu_time_us": row.backward_ns / 1000,
        "calls": row.calls,
    }


def as_json(report: SourceReport) -> dict[str, Any]:
    """The documented JSON shape (docs/source.md): every frame and module, not only --top."""
    return {
        "schema_version": SCHEMA_VERSION,
        "trace": report.path,
        "steps": list(report.steps),
        "has_stacks": report.has_frames,
        "totals": {
            "kernels": report.kernels,
            "kernel_time_us": report.kernel_ns / 1000,
            "attributed_us": report.attributed_ns / 1000,
            "unattributed_us": report.unattributed_ns / 1000,
            "backward_us": report.backward_ns / 1000,
            "unattributed_why": {why: ns / 1000 for why, ns in report.unattributed.items()},
        },
        "frames": [frame_json(r) for r in report.frames],
        "modules": [module_json(r) for r in report.modules],
        "notes": ([] if report.has_frames else [f"no Python frames: {RECORD_HINT}"])
        + list(report.notes),
    }


def csv(report: SourceReport, by: str) -> str:
    """One CSV row per frame (or module path), raw µs."""
    fields: tuple[str, ...] = MODULE_CSV if by == BY_MODULE else FRAME_CSV
    if by == BY_MODULE:
        records = [module_json(r) for r in report.modules]
    else:
        records = [frame_json(r) for r in report.frames]
    return to_csv(fields, [tuple(r[f] for f in fields) for r in records])


def document(trace: TraceSummary, report: SourceReport, by: str, top: int) -> Document:
    """``traceview source`` in every format but folded."""
    modules = by == BY_MODULE
    table = module_table(report, top) if modules else frame_table(report, top)
    drop: tuple[str, ...] = _MODULE_DROP if modules else _FRAME_DROP
    shown = len(report.modules) if modules else len(report.frames)
    noun = "module" if modules else "frame"
    hidden = shown - top if top else 0
    note = (
        f"{units.count(hidden)} more {noun}s not shown; use --top 0 for all" if hidden > 0 else None
    )
    title = "GPU time by module" if by == BY_MODULE else "GPU time by Python frame"
    return Document(
        head=summary_lines(trace, report),
        sections=[Section(table, title=title, note=note, drop_order=drop)] if shown else [],
        data=lambda: as_json(report),
        csv=lambda: csv(report, by),
    )


def folded(report: SourceReport) -> Iterator[str]:
    """Collapsed stacks, one line per distinct stack: ``frame;frame;...;kernel N`` (GPU ns),
    as flamegraph.pl, inferno and speedscope read them. A ``;`` inside a name becomes ``,``
    (it would split the frame); control characters are escaped."""
    for line in report.stacks:
        if line.ns > 0:
            yield ";".join(_folded_name(name) for name in line.frames) + f" {line.ns}\n"


def _folded_name(name: str) -> str:
    return visible(name).replace(";", ",")

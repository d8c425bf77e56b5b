"""Renderings of the operator view."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceview.analyses.ops.view import OpReport, OpRow
from traceview.render import units
from traceview.render.document import Document, Section
from traceview.render.header import device_busy_lines, trace_lines
from traceview.render.tables import Table, to_csv

if TYPE_CHECKING:
    pass

_HEADERS = ("#", "Op", "Calls", "Kernels", "GPU time", "% GPU", "GPU busy", "CPU time",
            "Kernels/call", "Queue delay", "CPU self", "TFLOP/s", "TB/s", "% peak",
            "Bound")  # fmt: skip
_NARROW_DROP = ("Kernels/call", "CPU self", "TB/s", "CPU time", "GPU busy", "Queue delay",
                "% peak", "TFLOP/s", "Bound", "Kernels")  # fmt: skip
_CSV_FIELDS = ("name", "shapes", "calls", "kernels", "gpu_time_us", "pct_gpu_time",
               "gpu_busy_us", "cpu_time_us", "cpu_self_us", "kernels_per_call",
               "queue_delay_us", "flops", "bytes", "dtype", "tflops_per_s", "tb_per_s",
               "intensity", "peak_tflops_per_s", "peak_tb_per_s", "pct_of_peak",
               "above_peak", "bound", "graph", "graph_launches",
               "graph_kernels")  # fmt: skip


def summary_lines(report: OpReport) -> list[str]:
    lines = trace_lines(report.trace)
    lines.append(
        f"ops      {report.options.level} op of each kernel: "
        f"{units.counted(report.kernels, 'kernel')}, "
        f"GPU time {units.duration_ns(report.gpu_time_ns)}"
    )
    lines += device_busy_lines(report.trace)
    if report.peaks is not None:
        peaks = report.peaks
        bw = "-" if peaks.tb_per_s is None else f"{peaks.tb_per_s:g} TB/s"
        lines.append(f"peaks    {peaks.device}: {bw} ({peaks.source})")
    lines += [f"note     {n}" for n in report.notes]
    return lines


def table(report: OpReport) -> Table:
    """The ops, with their shapes (``--group-by op+shapes``) in a last column: a long list
    of shapes in the op's column would push every row's numbers far to the right."""
    right = (True, False, *(True,) * 12, False)
    if not any(r.shapes is not None for r in report.rows):
        rows = [(str(i), op_label(r), *_cells(r)) for i, r in enumerate(report.rows, 1)]
        return Table(_HEADERS, right, rows)
    rows = [
        (str(i), op_label(r, shapes=False), *_cells(r), r.shapes or "-")
        for i, r in enumerate(report.rows, 1)
    ]
    return Table((*_HEADERS, "Shapes"), (*right, False), rows)


def op_label(r: OpRow, shapes: bool = True) -> str:
    """The op (and its shapes), marked when CUDA-graph replays ran its kernels."""
    label = r.name if r.shapes is None or not shapes else f"{r.name} {r.shapes}"
    if r.graph_kernels:
        label += f" [graph: {units.counted(r.graph_launches, 'replay')}]"
    return label


def _figure(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _cells(r: OpRow) -> tuple[str, ...]:
    return (
        units.count(r.calls),
        units.count(r.kernels),
        units.duration_ns(r.gpu_time_ns),
        units.pct(r.pct_gpu_time),
        units.duration_ns(r.gpu_busy_ns),
        units.duration_ns(r.cpu_time_ns),
        f"{r.kernels / r.calls:.2f}" if r.calls else "-",
        "-" if r.queue_delay_ns is None else units.duration_ns(r.queue_delay_ns),
        units.duration_ns(r.cpu_self_ns),
        _figure(r.tflops_per_s) + (" (above peak)" if r.above_peak else ""),
        _figure(r.tb_per_s, 3),
        "-" if r.pct_of_peak is None else units.pct(r.pct_of_peak),
        r.bound or "-",
    )


def footer(report: OpReport) -> str:
    if report.left_out == 0:
        n = len(report.rows)
        return f"{units.counted(n, 'op')} shown" if n == 1 else f"all {n} ops shown"
    return f"{units.counted(report.left_out, 'more op')} not shown; use --top 0 for all"


def document(report: OpReport, every: OpReport | None = None) -> Document:
    """``traceview ops`` in every format; ``every``: the same analysis without --top, for the
    CSV (files hold every row)."""
    return Document(
        head=summary_lines(report),
        sections=[Section(table(report), drop_order=_NARROW_DROP)],
        foot=[footer(report)],
        data=report.as_json,
        csv=lambda: csv(every or report),
    )


def csv(report: OpReport) -> str:
    rows = [tuple(r.as_dict()[f] for f in _CSV_FIELDS) for r in report.rows]
    return to_csv(_CSV_FIELDS, rows)

"""Renderings of the kernels roll-up of a run: the roll-up table first, then (``--per-rank``)
each rank's own table, as the one-file ``kernels`` shows it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceview.aggregate import sketch
from traceview.analyses.core.in_us import us_names
from traceview.analyses.runs.kernels import RollupReport, RollupRow
from traceview.render import kernels as one_file
from traceview.render import units
from traceview.render.document import Document, Section
from traceview.render.header import run_line
from traceview.render.tables import Table, to_csv

if TYPE_CHECKING:
    pass

_HEADERS = ("#", "Count", "Total", "Mean", "Std", "Min", "Max", "P50~", "P90~", "P99~",
            "% launches", "% time", "Ranks", "Rank min", "Rank median~", "Rank max",
            "Kernel")  # fmt: skip
_NARROW_DROP = ("Std", "Min", "P50~", "P90~", "Rank median~", "% launches", "Rank min",
                "Rank max", "Max", "Mean", "P99~")  # fmt: skip


def header_lines(report: RollupReport) -> list[str]:
    """The run (ranks, files, bytes) and the selection's totals."""
    kinds = "+".join(report.options.include)
    ranks = len(report.ranks)
    return [
        run_line(ranks, report.size_bytes),
        f"{kinds:<8} {units.counted(report.count, 'launch', 'launches')}, "
        f"{units.count(report.distinct)} distinct, total {units.duration_ns(report.total_ns)}",
        f"note     ~: within {100 * sketch.ALPHA:g}% (a mergeable sketch); exact in a rank's table",
    ]


def table(report: RollupReport, verbose: bool) -> Table:
    rows = [
        (str(i), *_cells(row), row.name if verbose else row.short_name)
        for i, row in enumerate(report.rows, 1)
    ]
    return Table(_HEADERS, (True,) * 16 + (False,), rows)


def _cells(row: RollupRow) -> tuple[str, ...]:
    t = units.time_ns
    return (
        units.count(row.count), t(row.total_ns), t(row.mean_ns), t(row.std_ns), t(row.min_ns),
        t(row.max_ns), t(row.p50_ns), t(row.p90_ns), t(row.p99_ns), units.pct(row.pct_launches),
        units.pct(row.pct_time), str(row.ranks), f"{t(row.rank_min_total_ns)} (r{row.rank_min})",
        t(row.rank_median_total_ns), f"{t(row.rank_max_total_ns)} (r{row.rank_max})",
    )  # fmt: skip


def footer(report: RollupReport) -> str:
    if report.left_out_rows == 0:
        return f"all {units.counted(report.distinct, 'kernel')} shown"
    return f"{units.counted(report.left_out_rows, 'more kernel')} not shown; use --top 0 for all"


def document(report: RollupReport, verbose: bool) -> Document:
    """``traceview kernels`` over a run in every format: the roll-up, then (``--per-rank``)
    each rank's own kernels document; the CSV holds the roll-up's rows."""
    return Document(
        head=header_lines(report),
        sections=[Section(table(report, verbose), drop_order=_NARROW_DROP)],
        foot=[footer(report)],
        parts=[
            (f"rank {r.rank}  {r.path}", one_file.document(r.report, verbose))
            for r in report.ranks
            if r.report is not None
        ],
        data=report.as_json,
        csv=lambda: csv(report),
    )


def csv(report: RollupReport) -> str:
    """One CSV row per kernel name of the roll-up, raw numbers."""
    return to_csv(
        ("position", *us_names(RollupRow), "fused_ops"),
        [(i, *map(one_file.csv_value, r.as_dict().values())) for i, r in enumerate(report.rows, 1)],
    )

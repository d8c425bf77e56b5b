"""Renderings of the kernels roll-up of a run: the roll-up table first, then (``--per-rank``)
each rank's own table, as the one-file ``kernels`` shows it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceview.aggregate import sketch
from traceview.analyses.kernel_rollup import RollupReport, RollupRow
from traceview.render import kernels as one_file
from traceview.render import units
from traceview.render.escape import markdown_list, print_line, text_lines
from traceview.render.header import run_line
from traceview.render.tables import Table, to_csv, to_markdown, to_rich, to_text

if TYPE_CHECKING:
    from rich.console import Console

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
        f"{units.count(report.distinct)} distinct, total {units.duration(report.total_us)}",
        f"note     ~: within {100 * sketch.ALPHA:g}% (a mergeable sketch); exact in a rank's table",
    ]


def table(report: RollupReport, verbose: bool) -> Table:
    rows = [
        (str(i), *_cells(row), row.name if verbose else row.short_name)
        for i, row in enumerate(report.rows, 1)
    ]
    return Table(_HEADERS, (True,) * 16 + (False,), rows)


def _cells(row: RollupRow) -> tuple[str, ...]:
    t = units.time
    return (
        units.count(row.count), t(row.total_us), t(row.mean_us), t(row.std_us), t(row.min_us),
        t(row.max_us), t(row.p50_us), t(row.p90_us), t(row.p99_us), units.pct(row.pct_launches),
        units.pct(row.pct_time), str(row.ranks), f"{t(row.rank_min_total_us)} (r{row.rank_min})",
        t(row.rank_median_total_us), f"{t(row.rank_max_total_us)} (r{row.rank_max})",
    )  # fmt: skip


def footer(report: RollupReport) -> str:
    if report.left_out_rows == 0:
        return f"all {units.counted(report.distinct, 'kernel')} shown"
    return f"{units.counted(report.left_out_rows, 'more kernel')} not shown; use --top 0 for all"


def _per_rank(report: RollupReport) -> list[tuple[str, one_file.KernelReport]]:
    return [(f"rank {r.rank}  {r.path}", r.report) for r in report.ranks if r.report is not None]


def print_rich(report: RollupReport, console: Console, verbose: bool) -> None:
    for line in header_lines(report):
        print_line(console, line)
    to_rich(table(report, verbose), console, drop_order=_NARROW_DROP)
    print_line(console, footer(report))
    for title, rank_report in _per_rank(report):
        print_line(console, "")
        print_line(console, title, style="bold")
        one_file.print_table(rank_report, console, verbose)


def text(report: RollupReport, verbose: bool) -> str:
    out = text_lines(header_lines(report)) + "\n\n" + to_text(table(report, verbose))
    out += "\n" + footer(report) + "\n"
    for title, rank_report in _per_rank(report):
        out += "\n" + text_lines([title]) + "\n" + one_file.text(rank_report, verbose)
    return out


def markdown(report: RollupReport, verbose: bool) -> str:
    out = markdown_list(header_lines(report)) + "\n\n" + to_markdown(table(report, verbose))
    out += "\n" + footer(report) + "\n"
    for title, rank_report in _per_rank(report):
        out += "\n" + markdown_list([title]) + "\n\n" + one_file.markdown(rank_report, verbose)
    return out


def csv(report: RollupReport) -> str:
    """One CSV row per kernel name of the roll-up, raw numbers."""
    fields = list(RollupRow.__dataclass_fields__)
    return to_csv(
        ("position", *fields),
        [(i, *(getattr(r, f) for f in fields)) for i, r in enumerate(report.rows, 1)],
    )

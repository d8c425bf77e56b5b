"""Renderings of ``traceview ranks``: the per-rank table, then collectives and stragglers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceview.analyses.core.names import display_names
from traceview.analyses.runs.collectives import Collective
from traceview.analyses.runs.ranks import RanksReport
from traceview.render import units
from traceview.render.document import Document, Lines, Section
from traceview.render.header import run_line
from traceview.render.tables import Table, to_csv

if TYPE_CHECKING:
    pass

_RANK_HEADERS = (
    "Rank",
    "Kernels",
    "Kernel time",
    "Busy %",
    "Idle",
    "Comm",
    "Exposed comm",
    "Median step",
    "Last",
    "Wait",
    "Mark",
)
_COLLECTIVE_HEADERS = ("Collective", "#", "Skew", "Last rank", "Latency", "End spread")
# With the trace's metadata: the process group, the ranks in it, size S, algbw and busbw.
_META_HEADERS = ("Group", "Ranks", "Size", "algbw GB/s", "busbw GB/s")
_BANDWIDTH_HEADERS = ("Collective", "Count", "Size", "Time", "algbw GB/s", "busbw GB/s")
_NARROW_DROP = ("Idle", "Median step", "Exposed comm", "End spread", "Ranks", "Group")


def header_lines(report: RanksReport) -> list[str]:
    """The run, the slowest rank, the clock check, warnings."""
    lines = [run_line(report.ranks, report.size_bytes)]
    if report.slowest is not None:
        why = (
            "most often last to start a collective"
            if report.collectives
            else ("longest median step, else most kernel time")
        )
        lines.append(f"slowest  rank {report.slowest} ({why})")
    if report.clock_spread_ns is not None:
        lines.append(
            f"clocks   collectives end {units.duration_ns(report.clock_spread_ns)} apart "
            "across ranks (median)"
        )
    lines += [f"warning  {w}" for w in report.warnings]
    return lines


def rank_table(report: RanksReport) -> Table:
    """One row per rank."""
    rows = []
    for row in report.rows:
        s, w = row.summary, row.waits
        step = "-" if s.median_step_ns is None else units.time_ns(s.median_step_ns)
        rows.append(
            (
                str(s.rank),
                units.count(s.kernels),
                units.time_ns(s.kernel_time_ns),
                units.pct(s.busy_pct),
                units.time_ns(s.idle_ns),
                units.time_ns(s.comm_ns),
                units.time_ns(s.exposed_comm_ns),
                step,
                units.count(w.times_last),
                units.time_ns(w.wait_ns),
                "slowest" if s.rank == report.slowest else "",
            )
        )
    return Table(_RANK_HEADERS, (True,) * 10 + (False,), rows)


def collective_table(report: RanksReport) -> Table:
    """One row per collective present on every rank of its group (with the metadata columns
    when the trace has process groups)."""
    shown = display_names([c.name for c in report.collectives])
    meta = any(c.process_group is not None for c in report.collectives)
    rows = []
    for c in report.collectives:
        row = (
            shown[c.name],
            str(c.index),
            units.time_ns(c.skew_ns),
            str(c.last),
            units.time_ns(c.latency_ns),
            units.time_ns(c.end_spread_ns),
        )
        rows.append(row + (_meta_cells(c) if meta else ()))
    headers = _COLLECTIVE_HEADERS + (_META_HEADERS if meta else ())
    return Table(headers, (False, *(True,) * (len(headers) - 1)), rows)


def _meta_cells(c: Collective) -> tuple[str, ...]:
    return (
        "-" if c.process_group is None else c.process_group,
        str(c.ranks),
        "-" if c.bytes is None else units.size(c.bytes),
        _gbps(c.algbw_gbps),
        _gbps(c.busbw_gbps),
    )


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def bandwidth_table(report: RanksReport) -> Table:
    """Per collective kind: nccl-tests algbw and busbw over its collectives with a size."""
    rows = [
        (
            b.kind,
            units.count(b.collectives),
            units.size(b.bytes),
            units.time_ns(b.time_ns),
            _gbps(b.algbw_gbps),
            _gbps(b.busbw_gbps),
        )
        for b in report.bandwidth
    ]
    return Table(_BANDWIDTH_HEADERS, (False, *(True,) * 5), rows)


def _collectives_line(report: RanksReport) -> str:
    if not report.collectives:
        return "no collective ran on every rank (communication kernels: nccl or rccl in the name)"
    return f"{units.counted(len(report.collectives), 'collective')} on every rank of its group"


def document(report: RanksReport) -> Document:
    """``traceview ranks`` in every format (the CSV: one row per rank)."""
    collectives = _collectives_line(report)
    second = (
        Section(collective_table(report), title=collectives, drop_order=_NARROW_DROP)
        if report.collectives
        else Section(Lines([collectives]))
    )
    sections = [Section(rank_table(report), drop_order=_NARROW_DROP), second]
    if report.bandwidth:
        title = "bandwidth per collective kind (nccl-tests algbw and busbw; size S ÷ latency)"
        sections.append(Section(bandwidth_table(report), title=title))
    return Document(
        head=header_lines(report),
        sections=sections,
        data=report.as_json,
        csv=lambda: csv(report),
    )


def csv(report: RanksReport) -> str:
    """One CSV row per rank, raw numbers (the collectives are in the JSON)."""
    rows = [r.as_dict(report.slowest) for r in report.rows]
    fields = [k for k in rows[0] if k != "devices"] if rows else ["rank"]
    return to_csv(tuple(fields), [tuple(r[f] for f in fields) for r in rows])

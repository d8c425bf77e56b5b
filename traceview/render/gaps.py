"""Renderings of a GapReport: terminal tables and histogram, text, Markdown, CSV, report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from traceview.analyses.gaps import GapReport, Histogram, StreamGaps
from traceview.analyses.names import short_name
from traceview.render import units
from traceview.render.escape import markdown_list, print_line, text_lines
from traceview.render.header import trace_lines
from traceview.render.tables import Table, to_csv, to_markdown, to_rich, to_text

if TYPE_CHECKING:
    from rich.console import Console

_BAR = 40
# Columns left out, in this order, when the terminal is too narrow for all of them.
_NARROW_DROP = ("Std (µs)", "Min (µs)", "Max (µs)", "Overlap (µs)", "Zero gaps", "Overlaps")


def summary_lines(report: GapReport) -> list[str]:
    """Header: trace, busy kinds, totals, per-device idle %."""
    t = report.totals
    lines = trace_lines(report.trace)
    lines.append(
        f"busy     {'+'.join(report.options.busy)}; {units.count(t.gaps)} gaps, idle "
        f"{units.duration(t.idle_us)}, gaps total {units.duration(t.gap_total_us)}, "
        f"mean gap {units.duration(t.mean_gap_us)}"
    )
    for d in report.devices:
        lines.append(
            f"device   {d.device}: idle {units.pct(d.idle_pct)}% "
            f"({units.duration(d.idle_us)} of {units.duration(d.window_us)})"
        )
    lines += [f"note     {n}" for n in report.notes]
    return lines


def streams_table(report: GapReport) -> Table:
    rows = [
        (str(s.device), str(s.stream), units.count(s.events), units.count(s.gaps),
         units.us(s.gap_total_us), units.us(s.idle_us), units.count(s.overlaps),
         units.us(s.overlap_us), units.count(s.zero_gaps))
        for s in report.streams
    ]  # fmt: skip
    headers = ("Device", "Stream", "Events", "Gaps", "Gap total (µs)", "Idle (µs)",
               "Overlaps", "Overlap (µs)", "Zero gaps")  # fmt: skip
    return Table(headers, (False, False, *(True,) * 7), rows)


def transitions_table(report: GapReport, verbose: bool) -> Table:
    def name(n: str) -> str:
        return n if verbose else short_name(n)

    rows = [
        (name(t.from_name), name(t.to_name), units.count(t.count), units.us(t.total_us),
         units.us(t.mean_us), units.us(t.min_us), units.us(t.max_us), units.us(t.std_us))
        for t in report.transitions
    ]  # fmt: skip
    headers = ("From", "To", "Count", "Total (µs)", "Mean (µs)", "Min (µs)", "Max (µs)",
               "Std (µs)")  # fmt: skip
    return Table(headers, (False, False, *(True,) * 6), rows)


def largest_table(report: GapReport, verbose: bool) -> Table:
    def name(n: str) -> str:
        return n if verbose else short_name(n)

    rows = [
        (str(g.device), str(g.stream), units.us(g.start_us), units.us(g.length_us),
         name(g.before), name(g.after), g.cpu_context or "-")
        for g in report.largest
    ]  # fmt: skip
    headers = ("Device", "Stream", "Start (µs)", "Length (µs)", "Previous", "Next",
               "CPU when the gap began (thread that launched the next kernel)")  # fmt: skip
    return Table(headers, (False, False, True, True, False, False, False), rows)


def histogram_lines(h: Histogram) -> list[str]:
    """One text bar per bin, plus the counts outside the range."""
    if not h.counts:
        return ["no gaps"]
    peak = max(h.counts) or 1
    lines = [f"below {units.us(h.edges[0])} µs: {units.count(h.below)}"]
    for lo, hi, n in zip(h.edges, h.edges[1:], h.counts, strict=False):
        bar = "█" * round(_BAR * n / peak)
        lines.append(f"{units.us(lo):>14} – {units.us(hi):>14} µs {units.count(n):>9} {bar}")
    lines.append(f"above {units.us(h.edges[-1])} µs: {units.count(h.above)}")
    return lines


def footer(report: GapReport) -> str:
    if report.left_out_transitions == 0:
        return "all transitions shown"
    return f"{report.left_out_transitions} more transitions not shown; use --gap-top 0 for all"


def _sections(report: GapReport, verbose: bool) -> list[tuple[str, Table | list[str]]]:
    return [
        ("Streams", streams_table(report)),
        ("Gap histogram", histogram_lines(report.histogram)),
        ("Transitions (signed gap from one kernel's end to the next one's start)",
         transitions_table(report, verbose)),
        ("Largest gaps", largest_table(report, verbose)),
    ]  # fmt: skip


def print_rich(report: GapReport, console: Console, verbose: bool) -> None:
    for line in summary_lines(report):
        print_line(console, line)
    for title, body in _sections(report, verbose):
        console.print(f"\n[bold]{title}[/bold]")
        if isinstance(body, Table):
            to_rich(body, console, drop_order=_NARROW_DROP)
        else:
            for line in body:
                print_line(console, line)
    print_line(console, footer(report))


def text(report: GapReport, verbose: bool) -> str:
    parts = [text_lines(summary_lines(report))]
    for title, body in _sections(report, verbose):
        rendered = to_text(body) if isinstance(body, Table) else text_lines(body) + "\n"
        parts.append(f"{title}\n{rendered}")
    return "\n\n".join(parts) + "\n" + footer(report) + "\n"


def markdown(report: GapReport, verbose: bool) -> str:
    parts = [markdown_list(summary_lines(report))]
    for title, body in _sections(report, verbose):
        rendered = (
            to_markdown(body) if isinstance(body, Table) else "```\n" + text_lines(body) + "\n```\n"
        )
        parts.append(f"### {title}\n\n{rendered}")
    return "\n\n".join(parts) + "\n" + footer(report) + "\n"


def csv(report: GapReport) -> str:
    """One CSV row per stream with raw numbers."""
    fields = tuple(StreamGaps.__dataclass_fields__)
    return to_csv(fields, [tuple(getattr(s, f) for f in fields) for s in report.streams])


def detailed_report(report: GapReport) -> str:
    """The --gap-output report: everything with full names (transitions uncut by --gap-top)."""
    return text(report, verbose=True)

"""Renderings of a GapReport: terminal tables and histogram, text, Markdown, CSV, report."""

from __future__ import annotations

from collections.abc import Iterator

from traceview.analyses.core.cpu_context import CpuContext, Holder
from traceview.analyses.core.devices import LAUNCH_LATENCY_NS
from traceview.analyses.core.in_us import us_names
from traceview.analyses.gaps import GapReport, Histogram, StreamGaps
from traceview.render import first_rows as capped
from traceview.render import units
from traceview.render.document import Document, Lines, Section, plain_chunks
from traceview.render.header import trace_lines
from traceview.render.tables import Table, each_row, to_csv
from traceview.render.trim_command import PIPE_NAMES, TRIM_MARGIN_NS, trim_command

_BAR = 40
# Columns left out, in this order, when the terminal is too narrow for all of them.
_NARROW_DROP = ("Std", "Min", "Max", "Overlap", "Zero gaps", "Overlaps", "Host wait", "Start")


def summary_lines(report: GapReport) -> list[str]:
    """Header: trace, busy kinds, the scope's totals, per-device idle and its split."""
    t = report.totals
    lines = trace_lines(report.trace)
    scope = "device gaps" if report.options.scope == "device" else "gaps per stream"
    lines.append(
        f"busy     {'+'.join(report.options.busy)}; {scope}: {units.counted(t.gaps, 'gap')}, "
        f"total {units.duration_ns(t.gap_total_ns)}, mean {units.duration_ns(t.mean_gap_ns)}; "
        f"idle {units.duration_ns(t.idle_ns)}"
    )
    for d in report.devices:
        parts = [
            f"{what} {units.duration_ns(ns)} ({units.pct(_pct(ns, d.window_ns))}%)"
            for what, ns in (
                ("host wait (cpu)", d.host_wait_ns),
                ("launch latency", d.launch_latency_ns),
                ("gpu wait", d.gpu_wait_ns),
            )
        ]
        lines.append(
            f"device   {d.device}: idle {units.pct(d.idle_pct)}% "
            f"({units.duration_ns(d.idle_ns)} of {units.duration_ns(d.window_ns)}) = "
            + " + ".join(parts)
        )
    lines += [f"note     {n}" for n in report.notes]
    return lines


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole > 0 else 0.0


def streams_table(report: GapReport) -> Table:
    """The first ``--stream-top`` streams (0: all)."""
    rows = [
        (str(s.device), str(s.stream), units.count(s.events), units.count(s.gaps),
         units.time_ns(s.gap_total_ns), units.time_ns(s.idle_ns), units.count(s.overlaps),
         units.time_ns(s.overlap_ns), units.count(s.zero_gaps))
        for s in capped.head(report.streams, report.options.stream_top)
    ]  # fmt: skip
    headers = ("Device", "Stream", "Events", "Gaps", "Gap total", "Idle", "Overlaps",
               "Overlap", "Zero gaps")  # fmt: skip
    return Table(headers, (False, False, *(True,) * 7), rows)


def transitions_table(report: GapReport, verbose: bool) -> Table:
    def name(n: str) -> str:
        return n if verbose else report.shown_names.get(n, n)

    rows = each_row(report.transitions, lambda _, t: (
        units.count(t.count), units.time_ns(t.total_ns), units.time_ns(t.mean_ns),
        units.time_ns(t.min_ns), units.time_ns(t.max_ns), units.time_ns(t.std_ns),
        name(t.from_name), name(t.to_name),
    ))  # fmt: skip
    headers = ("Count", "Total", "Mean", "Min", "Max", "Std", "From", "To")
    return Table(headers, (*(True,) * 6, False, False), rows)


def largest_table(report: GapReport, verbose: bool) -> Table:
    def name(n: str) -> str:
        return n if verbose else report.shown_names.get(n, n)

    rows = [
        (str(i), str(g.device), str(g.stream), units.time_ns(g.start_ns),
         units.time_ns(g.gap_ns), g.cause, units.time_ns(g.host_wait_ns), name(g.before),
         name(g.after))
        for i, g in enumerate(report.largest, 1)
    ]  # fmt: skip
    headers = ("#", "Device", "Stream", "Start", "Gap", "Cause", "Host wait", "Before", "After")
    return Table(headers, (True, False, False, True, True, False, True, False, False), rows)


def context_lines(report: GapReport) -> list[str]:
    """What held each listed gap on the CPU, one line per gap (numbered as in the table)."""
    return [
        f"#{i} at ts {g.ts_ns / 1000:.3f} µs: {context_text(g.context, g.cause)}"
        for i, g in enumerate(report.largest, 1)
    ]


def trim_lines(report: GapReport) -> list[str]:
    """Per listed gap, the ``traceview trim`` command that cuts it out (none for a pipe,
    which trim cannot read twice)."""
    path = report.trace.path
    if path in PIPE_NAMES:
        return ["(the trace came from a pipe: save it to a file to trim it)"]
    return [
        f"#{i} {trim_command(path, g.ts_ns, g.gap_ns, i)}" for i, g in enumerate(report.largest, 1)
    ]


def context_text(c: CpuContext, cause: str = "gpu wait") -> str:
    """What held the gap, the largest holder first: e.g. ``thread 1/1:
    enumerate(DataLoader)#…__next__ 125.6 ms of 126.0 ms host wait``, or a sync call."""
    if c.thread is None or c.launch_ns is None:
        return "no launch of the next activity recorded (no CPU context)"
    syncs = _holders(c.syncs)
    parts = []
    if c.host_wait_ns > 0:
        wait = units.duration_ns(c.host_wait_ns)
        if c.ops:
            top = c.ops[0]
            parts.append(f"{top.name} {units.duration_ns(top.overlap_ns)} of {wait} host wait")
            if len(c.ops) > 1:
                parts[-1] += f" (inside or beside it: {_holders(c.ops[1:])})"
        else:
            parts.append(f"host wait {wait}, no CPU op in it")
    else:
        parts.append(
            "the next activity was launched before the gap began and started within the "
            f"launch latency ({LAUNCH_LATENCY_NS // 1000} µs) of it"
            if cause == "launch latency"
            else "the next activity was launched before the gap began (the GPU waited on a "
            "dependency, an event or a copy)"
        )
    if c.syncs:
        sync = f"CPU blocked in {syncs} during the gap"
        lead = not c.ops or c.syncs[0].overlap_ns > c.ops[0].overlap_ns
        parts.insert(0, sync) if lead else parts.append(sync)
    uncovered = c.host_wait_ns - c.covered_ns
    if uncovered > 0 and c.covered_ns > 0:
        parts.append(f"nothing recorded for {units.duration_ns(uncovered)} of the host wait")
    return f"thread {c.thread}: " + "; ".join(parts)


def _holders(holders: tuple[Holder, ...]) -> str:
    return ", ".join(f"{h.name} {units.duration_ns(h.overlap_ns)}" for h in holders)


def histogram_lines(h: Histogram) -> list[str]:
    """One text bar per bin, plus the counts outside the range."""
    if not h.counts:
        return ["no gaps"]
    peak = max(h.counts) or 1
    lines = [f"below {units.time(h.edges[0])}: {units.count(h.below)}"]
    for lo, hi, n in zip(h.edges, h.edges[1:], h.counts, strict=False):
        bar = "█" * round(_BAR * n / peak)
        lines.append(f"{units.time(lo):>10} – {units.time(hi):>10} {units.count(n):>9} {bar}")
    lines.append(f"above {units.time(h.edges[-1])}: {units.count(h.above)}")
    return lines


def footer(report: GapReport) -> str:
    if report.left_out_transitions == 0:
        return "all transitions shown"
    more = units.counted(report.left_out_transitions, "more transition")
    return f"{more} not shown; use --gap-top 0 for all"


def _more_streams(report: GapReport) -> str | None:
    """What the Streams table left out: the streams and their gaps."""
    top = report.options.stream_top
    hidden = report.streams[top:] if top else []
    gaps = units.counted(sum(s.gaps for s in hidden), "gap")
    return capped.more_line(len(report.streams), top, "stream", "--stream-top", gaps)


def _sections(report: GapReport, verbose: bool) -> list[tuple[str, Table | list[str], str | None]]:
    """(title, table or lines, the note that belongs under it)."""
    device = report.options.scope == "device"
    kind = "device gaps" if device else "gaps per stream"
    transitions = (
        "Transitions (device gaps: the activity before → the one after)"
        if device
        else "Transitions (signed gap from one activity's end to the next one's start on a stream)"
    )
    return [
        ("Streams", streams_table(report), _more_streams(report)),
        (f"Gap histogram ({kind})", histogram_lines(report.histogram), None),
        (transitions, transitions_table(report, verbose), footer(report)),
        (f"Largest gaps ({kind}; cause cpu: the next activity was not yet launched; launch "
         f"latency: it started within {LAUNCH_LATENCY_NS // 1000} µs of its launch; gpu wait: "
         "it waited on a dependency, an event or a copy)",
         largest_table(report, verbose), None),
        ("What the CPU was doing (thread that launched the activity after the gap)",
         context_lines(report) or ["no gaps"], None),
        (f"Each gap as a small trace for Perfetto ({units.duration_ns(TRIM_MARGIN_NS)} of work "
         "each side)",
         trim_lines(report) or ["no gaps"], None),
    ]  # fmt: skip


def document(report: GapReport, verbose: bool) -> Document:
    """``traceview gaps`` in every format; ``verbose``: full names."""
    return Document(
        head=summary_lines(report),
        sections=[
            Section(
                body if isinstance(body, Table) else Lines(body, aligned=title.startswith("Gap")),
                title,
                note,
                _NARROW_DROP,
            )
            for title, body, note in _sections(report, verbose)
        ],
        data=report.as_json,
        csv=lambda: csv(report),
    )


def csv(report: GapReport) -> str:
    """One CSV row per stream with raw numbers."""
    return to_csv(
        tuple(us_names(StreamGaps)), [tuple(s.as_dict().values()) for s in report.streams]
    )


def detailed_report(report: GapReport) -> Iterator[str]:
    """The --gap-output report: everything with full names (transitions uncut by --gap-top,
    streams by --stream-top), a chunk at a time."""
    return plain_chunks(document(report, verbose=True))

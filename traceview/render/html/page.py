"""The report page: header, one section per view, plotly.js and the data inline.

Nothing is loaded from anywhere: plotly.js, the style, the script and the data are in the file,
and its Content-Security-Policy forbids every request (``default-src 'none'``). Text from the
trace is HTML-escaped (``html_text``); data goes in ``<script type="application/json">``
elements written by ``script_json``, so no name can close them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from traceview.analyses.core.steps import describe_ranges, step_ranges
from traceview.errors import TraceviewError
from traceview.render import units
from traceview.render.escape import html_text, script_json
from traceview.render.html import charts, flame, ranks, roofline
from traceview.render.html.documents import Documents
from traceview.render.trim_command import PIPE_NAMES, TRIM_MARGIN_NS, trim_command

NO_GPU = "absent: no GPU activity in this trace"
TABLE_ROWS = 5000  # kernels (and ops) rows carried in the page, by time
_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data: blob:; font-src data:"
)
MISSING_PLOTLY = (
    "traceview report needs plotly (its plotly.js is inlined in the page): "
    "pip install 'traceview[report]'"
)


@dataclass(frozen=True)
class PageInfo:
    """What the header says beyond the documents."""

    version: str
    command: str


@dataclass(frozen=True)
class Section:
    """A section of the page: its title, what its figures mean, and its charts."""

    id: str
    title: str
    definition: str
    charts: tuple[tuple[str, Callable[[Documents], charts.Figure | None], str], ...]
    extra: Callable[[Documents], str] | None = None


def plotly_js() -> str:
    """plotly.min.js from the plotly package (the optional ``report`` extra)."""
    return plotly_path().read_text("utf-8")


def plotly_path() -> Path:
    """Where plotly.min.js is, found without importing plotly (its import, which reads its
    own metadata, took 0.02 s of a warm report); TraceviewError when it is not there."""
    spec = find_spec("plotly")
    if spec is None or spec.origin is None:
        raise TraceviewError(MISSING_PLOTLY)
    path = Path(spec.origin).parent / "package_data" / "plotly.min.js"
    if not path.is_file():
        raise TraceviewError(MISSING_PLOTLY)
    return path


def render(docs: Documents, info: PageInfo) -> str:
    """The whole page."""
    before, after = _around_plotly(docs, info)
    return f"{before}\n<script>{plotly_js()}</script>\n{after}"


def render_bytes(docs: Documents, info: PageInfo) -> bytes:
    """``render(docs, info)`` in UTF-8."""
    return page_bytes(*_around_plotly(docs, info))


def page_bytes(before: str, after: str) -> bytes:
    """A page in UTF-8, plotly.min.js copied in between ``before`` and ``after`` as the bytes
    it is: not read into a string of 4.8·10^6 characters (two bytes each: it is not all
    ASCII) and encoded again with the page (0.015 s of a warm report)."""
    js = plotly_path().read_bytes().replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # as read_text
    return b"".join([before.encode(), b"\n<script>", js, b"</script>\n", after.encode()])


def _around_plotly(docs: Documents, info: PageInfo) -> tuple[str, str]:
    """The page before the script element of plotly.js and after it (lines)."""
    figures: dict[str, Any] = {}
    body = [_header(docs, info), _findings(docs)]
    for section in _sections(docs):
        body.append(_section(section, docs, figures))
    data = {
        "summary": docs.summary,
        "kernels": _capped(docs.kernels, "kernels"),
        "gaps": docs.gaps,
        "steps": docs.steps,
        "ops": _capped(docs.ops, "ops"),
    }
    if docs.ranks is not None:
        data["ranks"] = docs.ranks
    return around_plotly(f"traceview report: {_title(docs)}", body, figures, data)


def around_plotly(
    title: str, body: list[str], figures: dict[str, Any], data: dict[str, Any]
) -> tuple[str, str]:
    """A page of ``body`` (HTML, escaped by its maker) before the script element of plotly.js
    and after it: the report's style and script, ``figures`` drawn into the elements whose
    ``data-chart`` names them, ``data`` (the JSON documents) inline; ``title`` is escaped."""
    asset = resources.files("traceview.render.html")
    before = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html_text(title)}</title>",
        f"<style>{(asset / 'report.css').read_text('utf-8')}</style>",
    ]
    after = [
        "</head><body>",
        *body,
        f'<script type="application/json" id="tv-charts">{script_json(figures)}</script>',
        f'<script type="application/json" id="tv-data">{script_json(data)}</script>',
        f"<script>{(asset / 'report.js').read_text('utf-8')}</script>",
        "</body></html>",
        "",
    ]
    return "\n".join(before), "\n".join(after)


def _capped(doc: dict[str, Any], key: str) -> dict[str, Any]:
    """The document with at most TABLE_ROWS rows (they come by time, largest first)."""
    rows = doc[key]
    if len(rows) <= TABLE_ROWS:
        return doc
    return {**doc, key: rows[:TABLE_ROWS], "report_rows_left_out": len(rows) - TABLE_ROWS}


def _file_name(docs: Documents) -> str:
    return str(docs.summary["trace"]["path"]).rsplit("/", 1)[-1]


def _header(docs: Documents, info: PageInfo) -> str:
    trace = docs.summary["trace"]
    devices = ", ".join(f"GPU {d['device']} ({d['busy_pct']:.1f}% busy)" for d in trace["devices"])
    names = ", ".join(trace.get("device_names") or []) or "not recorded"
    rows = [
        *ranks.header_rows(docs),
        ("trace", trace["path"]),
        ("size", units.size(trace["size_bytes"])),
        ("span", units.duration(trace["span_us"])),
        ("devices", f"{devices or 'none'}; {names}"),
        ("events", f"{trace['events_read']:,}"),
        ("traceview", info.version),
        ("command", info.command),
    ]
    cells = "".join(f"<tr><th>{k}</th><td>{html_text(str(v))}</td></tr>" for k, v in rows)
    warnings = "".join(f"<li>{html_text(w)}</li>" for w in trace.get("warnings", []))
    return (
        f"<header><h1>traceview report: {html_text(_title(docs))}</h1>"
        f'<table class="facts">{cells}</table>'
        + (f'<ul class="warnings">{warnings}</ul>' if warnings else "")
        + _nav(docs)
        + "</header>"
    )


# The section whose chart shows what each hint found (the Findings link there).
FINDING_SECTION = {
    "host-stall": "steps",
    "cpu-bound": "steps",
    "dataloader": "steps",
    "cuda-graphs": "timeline",
    "pinned-memory": "timeline",
    "gemm-alignment": "roofline",
    "low-precision": "roofline",
    "fused-attention": "kernels",
    "fused-norm": "kernels",
    "overlap-communication": "breakdown",
    "memory-headroom": "memory",
}
FINDINGS_SHOWN = 6


def _findings(docs: Documents) -> str:
    """The Findings of ``summary`` (ranked by time at stake), each linked to the chart that
    shows it; none: a line saying so."""
    found = docs.summary.get("findings", [])[:FINDINGS_SHOWN]
    if not found:
        items = '<p class="note">No hint fired (docs/hints.md lists the rules).</p>'
    else:
        rows = "".join(
            f'<li data-rule="{html_text(f["rule"])}"><p>{html_text(f["finding"])} '
            f'<a href="#{FINDING_SECTION.get(f["rule"], "breakdown")}">see the chart</a></p>'
            f'<p class="try">try: {html_text(f["try"])} '
            f"<small>({html_text(f['doc'])})</small></p></li>"
            for f in found
        )
        items = f'<ol class="findings">{rows}</ol>'
    return (
        '<section id="findings"><h2>Findings</h2><p class="definition">What the hints found, '
        "ranked by the GPU time at stake (as <code>traceview summary</code> opens); "
        f"docs/hints.md.</p>{items}</section>"
    )


def _title(docs: Documents) -> str:
    if docs.ranks is None:
        return _file_name(docs)
    return f"run of {docs.ranks['run']['ranks']} ranks, rank {docs.rank}: {_file_name(docs)}"


def _nav(docs: Documents) -> str:
    links = '<a href="#findings">Findings</a>' + "".join(
        f'<a href="#{s.id}">{s.title}</a>' for s in _sections(docs)
    )
    return f"<nav>{links}</nav>"


def _sections(docs: Documents) -> tuple[Section, ...]:
    """The sections of the page: of a run, the ranks first."""
    return SECTIONS if docs.ranks is None else (RANKS, *SECTIONS)


def _section(section: Section, docs: Documents, figures: dict[str, Any]) -> str:
    parts = [
        f'<section id="{section.id}"><h2>{section.title}</h2>',
        f'<p class="definition">{section.definition}</p>',
    ]
    for name, build, absent in section.charts:
        figure = build(docs)
        if figure is None and absent:
            parts.append(f'<p class="absent" data-absent="{name}">{html_text(absent)}</p>')
        elif figure is not None:
            figures[name] = figure
            parts.append(f'<div class="chart" data-chart="{name}"></div>')
    if section.extra is not None:
        parts.append(section.extra(docs))
    parts.append("</section>")
    return "\n".join(parts)


def _breakdown_table(docs: Documents) -> str:
    """The split's figures beside the chart (ms and % of the window)."""
    head = (
        "device",
        "window",
        "compute",
        "exposed comm.",
        "exposed memcpy/memset",
        "idle",
        "host wait",
        "launch latency",
    )
    keys = (
        "window_us",
        "compute_us",
        "exposed_communication_us",
        "exposed_memcpy_memset_us",
        "idle_us",
        "host_wait_us",
        "launch_latency_us",
    )
    rows = []
    for d in docs.summary["devices"]:
        window = d["window_us"] or 1
        cells = [f"<td>{html_text(str(d['device']))}</td>"]
        cells += [
            f"<td>{d[k] / 1000:,.3f} ms<small> {100 * d[k] / window:.1f}%</small></td>"
            for k in keys
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    header = "".join(f"<th>{h}</th>" for h in head)
    return f'<table class="figures"><tr>{header}</tr>{"".join(rows)}</table>'


def _kernel_table(docs: Documents) -> str:
    """The place of the sortable, filterable table (report.js fills it from the data)."""
    total = len(docs.kernels["kernels"])
    note = (
        f'<p class="note">The page carries the {TABLE_ROWS:,} kernels with the most time of '
        f"{total:,}; <code>traceview kernels --top 0 -f csv</code> lists all.</p>"
        if total > TABLE_ROWS
        else ""
    )
    return (
        '<div class="table-tools"><input type="search" id="kernel-filter" '
        'placeholder="filter by name (substring or /regex/)" aria-label="filter kernels">'
        '<span id="kernel-count"></span></div>'
        f'{note}<div class="table-wrap"><table id="kernel-table" class="kernels"></table></div>'
    )


def _timeline_notes(docs: Documents) -> str:
    notes = []
    left = docs.utilisation.streams_left_out
    if left:
        notes.append(f"{left} less busy streams are left out of the utilisation rows.")
    if docs.step is not None and docs.step.capped:
        notes.append(
            f"Step {docs.step.step} has {docs.step.total:,} GPU activities: the "
            f"{len(docs.step.ts):,} longest are drawn."
        )
    if docs.graph_steps:
        notes.append(_graph_steps_note(docs))
    return "".join(f'<p class="note">{html_text(n)}</p>' for n in notes)


def _graph_steps_note(docs: Documents) -> str:
    """Which steps ran kernels in CUDA-graph replays, and how many."""
    found = docs.graph_steps
    graph = sum(s.graph_kernels for s in found)
    kernels = sum(s.kernels for s in found)
    replays = sum(s.replays for s in found)
    whole = [s.step for s in found if s.graph_kernels == s.kernels]
    only = f"; steps {_steps(whole)}: nothing else" if whole else ""
    return (
        f"Steps {_steps([s.step for s in found])} ran CUDA-graph replays (hatched): "
        f"{graph:,} of their {kernels:,} kernels, in {replays:,} replays{only}."
    )


def _steps(numbers: list[int]) -> str:
    return describe_ranges(step_ranges(numbers))


TRIM_GAPS = 5  # the largest gaps the page gives a trim command for


def _gap_commands(docs: Documents) -> str:
    """The largest device gaps, each with the ``traceview trim`` command that cuts it out
    for Perfetto (ts from the JSON's µs: within a ns of the trace's)."""
    gaps = docs.gaps["largest"][:TRIM_GAPS]
    path = docs.gaps["trace"]["path"]
    if not gaps or path in PIPE_NAMES:
        return ""
    rows = []
    for i, g in enumerate(gaps, 1):
        command = trim_command(path, round(g["ts_us"] * 1000), round(g["gap_us"] * 1000), i)
        rows.append(
            f"<tr><td>{i}</td><td>{html_text(str(g['device']))}</td>"
            f"<td>{g['start_us'] / 1000:,.3f} ms</td><td>{g['gap_us'] / 1000:,.3f} ms</td>"
            f"<td>{html_text(g['cause'])}</td><td><code>{html_text(command)}</code></td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("#", "device", "start", "gap", "cause", "cut it out"))
    return (
        f'<p class="note">The {len(gaps)} largest device gaps, each with the command that '
        f"writes it, with {units.duration_ns(TRIM_MARGIN_NS)} of work on each side, as a "
        "trace small enough for Perfetto or chrome://tracing.</p>"
        f'<div class="table-wrap"><table class="figures gap-commands"><tr>{head}</tr>'
        f"{''.join(rows)}</table></div>"
    )


MEMORY_ABSENT = "absent: no [memory] events in this trace (record with profile_memory=True)"


def _gib_or_unknown(value: int | None) -> str:
    """Bytes in GiB, or ``unknown`` (a reserve the trace does not give)."""
    return "unknown" if value is None else f"{value / 2**30:,.3f} GiB"


def _memory_table(docs: Documents) -> str:
    """Per device, the ops holding the most at its peak (names escaped)."""
    doc = docs.memory
    if doc is None or not doc["devices"]:
        return ""
    parts = []
    for d in doc["devices"]:
        rows = "".join(
            f"<tr><td>{html_text(h['op'])}</td><td>{h['bytes'] / 2**20:,.2f} MiB</td>"
            f"<td>{h['count']:,}</td></tr>"
            for h in d["holders"][: charts.MEMORY_HOLDERS]
        )
        before, device = d["held_before_bytes"], html_text(f"GPU {d['device']}")
        held = (
            "Addresses missing: holders unknown."
            if before is None
            else f"{before / 2**20:,.2f} MiB of the peak held by allocations made before the "
            "trace's first [memory] event."
        )
        parts.append(
            f"<h3>{device}: peak {d['peak_allocated_bytes'] / 2**30:,.3f} "
            f"GiB allocated, {_gib_or_unknown(d['peak_reserved_bytes'])} reserved</h3>"
            '<table class="figures"><tr><th>op</th><th>held at the peak</th><th>allocations'
            f"</th></tr>{rows}</table>"
            f'<p class="note">{held}</p>'
        )
    notes = "".join(f'<p class="note">{html_text(n)}</p>' for n in doc["notes"])
    return "".join(parts) + notes


RANKS = Section(
    "ranks",
    "Ranks",
    ranks.DEFINITION,
    (("ranks", ranks.chart, "absent: no rank in this run"),),
    ranks.table,
)
SECTIONS = (
    Section(
        "breakdown",
        "Where each GPU's time went",
        "Per device, its window (first start to last end of its GPU work) split exactly: "
        "compute (the union of its non-communication kernels) + exposed communication "
        "(communication not overlapped by compute) + exposed memcpy/memset + idle; below, "
        "each category's busy time (the union of its activities). As <code>traceview "
        "summary</code>; docs/metrics.md “Summary”.",
        (("breakdown", charts.breakdown, NO_GPU), ("categories", charts.categories, "")),
        _breakdown_table,
    ),
    Section(
        "kernels",
        "Kernels",
        "Per kernel name: launches, total and per-launch statistics (µs), shares of "
        "launches and of kernel time. As <code>traceview kernels --top 0</code>; "
        "docs/metrics.md “Kernels”. Click a column to sort; hover a name for the full one.",
        (("kernels", charts.top_kernels, "absent: no kernels in this trace"),),
        _kernel_table,
    ),
    Section(
        "timeline",
        "Timeline",
        "GPU utilisation over the whole trace: per device and stream, the busy share of "
        "each of ~1,000 equal bins (the union of kernels, memcpy and memset inside the "
        "bin ÷ its width); ▼ marks the largest device gaps with their cause (as "
        "<code>traceview gaps</code>); dashed lines: the steps' CPU windows. Below, one step's GPU "
        "work as rectangles per stream, "
        "coloured by category (by name), hatched where a CUDA-graph replay ran it; "
        "docs/metrics.md “Timeline”.",
        (
            ("timeline", charts.utilisation, NO_GPU),
            ("timeline-step", charts.step_work, "absent: no step with GPU work in this trace"),
        ),
        _timeline_notes,
    ),
    Section(
        "gap-histogram",
        "Device gaps",
        "How many device gaps (the GPU idle between two busy stretches) fall in each "
        "length bin: the histogram of <code>traceview gaps</code>, same log-spaced edges; "
        "docs/metrics.md “Gaps”.",
        (("gap-histogram", charts.gap_histogram, "absent: no device gaps in this trace"),),
        _gap_commands,
    ),
    Section(
        "steps",
        "Steps",
        "Per ProfilerStep: its window (the CPU step) split exactly into compute, exposed "
        "communication, exposed memcpy/memset, host wait (the GPU idle, the next work not "
        "yet launched) and other idle, on each device; below, its step time (the GPU's period "
        "where the GPU ran behind the CPU, else the CPU step's duration), each device's GPU "
        "busy time in it and its lag (GPU start − CPU step start), as <code>traceview "
        "steps</code>; ✕ marks outlier steps (|time − median| &gt; 3 × 1.4826 × max(MAD, 2% "
        "of the median)); docs/metrics.md “Steps: where each step's time went”, “Steps”, "
        "“Outlier steps”. Below, MFU per step: model FLOPs from the recorded shapes ÷ (step "
        "time × the dense peak), and the achieved TFLOP/s; docs/metrics.md “Model FLOPs and "
        "MFU”.",
        (
            ("step-breakdown", charts.step_breakdown, ""),
            ("steps", charts.steps, "absent: this trace has no ProfilerStep annotations"),
            ("mfu", charts.mfu, charts.MFU_ABSENT),
        ),
    ),
    Section(
        "roofline",
        "Roofline",
        "One point per op and shapes with FLOPs (<code>traceview ops --group-by "
        "op+shapes</code>): x = arithmetic intensity (FLOP/byte), y = achieved TFLOP/s; the "
        "memory and compute ceilings of the device when its peaks are known. Click a dtype "
        "in the legend to hide it. Below, GEMMs by M and N, coloured by % of peak; the menu "
        "picks the dtype and K. docs/metrics.md “Operators”, “Report”.",
        (
            ("roofline", lambda d: roofline.roofline(d.ops), roofline.ABSENT),
            ("gemm-heatmap", lambda d: roofline.gemm_heatmap(d.ops), roofline.GEMM_ABSENT),
        ),
        lambda d: roofline.notes(d.ops),
    ),
    Section(
        "memory",
        "GPU memory",
        "Per device, the caching allocator's allocated level (solid) and reserve (dotted) "
        "over time from the trace's [memory] events (profile_memory=True), the peak marked, "
        "every other step shaded; below, the ops holding the live allocations at the peak. "
        "As <code>traceview memory</code>; docs/metrics.md “GPU memory”.",
        (("memory", charts.memory, MEMORY_ABSENT),),
        _memory_table,
    ),
    Section(
        "source",
        "Python stacks",
        "GPU time by the Python stack that launched it (traces recorded with stacks): the "
        "outermost frame at the top, the kernel at the bottom; a backward kernel under "
        "[backward], below the forward op's stack; time without a frame under the reason. "
        "Click a frame to zoom. As <code>traceview source -f folded</code>; docs/source.md.",
        (("flame", flame.flame, flame.ABSENT),),
    ),
)

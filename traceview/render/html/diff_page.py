"""The diff page (``traceview diff --explain -f html -o F``): the diff's headline, the
``--explain`` waterfall drawn with plotly, and the diff's JSON document inline, in the report's
page (page.around_plotly: plotly.js, style and script inline, nothing loaded from anywhere).

The waterfall's bars are the JSON's ``explain`` figures: the base median step time, each part's
``delta_us`` (largest |Δ| first; past ``--top``, the rest summed from their integer ns as one
bar) and the new median step time, which the parts add up to exactly.
"""

from __future__ import annotations

from traceview.analyses.core.names import display_names
from traceview.analyses.diff import DiffReport
from traceview.analyses.explain import Explain
from traceview.render import diff as render_diff
from traceview.render.escape import html_text, plotly_text
from traceview.render.html.charts import FONT, HOVER, Figure, label
from traceview.render.html.page import PageInfo, around_plotly, page_bytes

INCREASING, DECREASING, TOTAL = "#e45756", "#54a24b", "#4c78a8"  # slower, faster, step times
DEFINITION = (
    "The change in median step time split into parts that add up to it exactly (integer ns): "
    "kernel time by group (slower, faster, new, gone), copies, overlap and idle by cause; the "
    "bars run from the base median step's time to the new one's. As <code>traceview diff "
    "--explain</code>; docs/diff.md, docs/metrics.md “Diff --explain”."
)


def render_bytes(report: DiffReport, info: PageInfo) -> bytes:
    """The page of a diff with its explain, in UTF-8."""
    if report.explain is None:  # app.commands.diff asks for --explain first
        raise ValueError("the diff page draws the --explain waterfall")
    by_name = report.options.group_by == "name"
    figures = {"waterfall": waterfall(report.explain, report.options.top, by_name)}
    lead = render_diff.explain_lines(report.explain, by_name)[0].removeprefix("explain  ")
    body = [
        _header(report, info),
        '<section id="explain"><h2>Where the step time went</h2>',
        f'<p class="definition">{DEFINITION}</p>',
        f'<p class="lead">{html_text(lead[:1].upper() + lead[1:])}.</p>',
        '<div class="chart" data-chart="waterfall"></div></section>',
    ]
    title = f"traceview diff: {_file_name(report.base.path)} → {_file_name(report.new.path)}"
    data = {"diff": render_diff.as_json(report)}
    return page_bytes(*around_plotly(title, body, figures, data))


def waterfall(e: Explain, top: int = 0, by_name: bool = False) -> Figure:
    """The waterfall of ``e`` in µs: the base step time, the first ``top`` parts (0: all) and
    the rest as one bar, the new step time (kernel names shortened when ``by_name``)."""
    kept = e.parts[:top] if top else e.parts
    rest = e.parts[len(kept) :]
    shown = display_names([p.group for p in kept]) if by_name else {}
    x = [f"base step {e.base_step}"]
    hover = [f"base median step {e.base_step}"]
    y = [e.base_ns / 1000]
    for rank, p in enumerate(kept, 1):
        x.append(f"{rank}. {label(shown.get(p.group, p.group))} ({p.kind})")
        hover.append(f"{plotly_text(p.group[:HOVER])}<br>{p.kind}")
        y.append(p.delta_ns / 1000)
    if rest:
        x.append(f"{len(rest)} more parts")
        hover.append(f"{len(rest)} more parts (--top 0 for all)")
        y.append(sum(p.delta_ns for p in rest) / 1000)
    x.append(f"new step {e.new_step}")
    hover.append(f"new median step {e.new_step}")
    y.append(e.new_ns / 1000)
    trace = {
        "type": "waterfall",
        "orientation": "v",
        "measure": ["absolute"] + ["relative"] * (len(y) - 2) + ["total"],
        "x": x,
        "y": y,
        "hovertext": hover,
        "hoverinfo": "text+delta+final",
        "increasing": {"marker": {"color": INCREASING}},
        "decreasing": {"marker": {"color": DECREASING}},
        "totals": {"marker": {"color": TOTAL}},
        "connector": {"line": {"color": "#999", "width": 1}},
    }
    layout = {
        "title": {"text": "Median step time, base → new (µs)", "x": 0, "xanchor": "left"},
        "font": FONT,
        "height": 480,
        "margin": {"l": 70, "r": 20, "t": 40, "b": 50},
        "xaxis": {"automargin": True, "tickangle": -30},
        "yaxis": {"title": {"text": "µs"}, "automargin": True},
        "showlegend": False,
        "hoverlabel": {"namelength": -1, "align": "left"},
    }
    return {"data": [trace], "layout": layout}


def _header(report: DiffReport, info: PageInfo) -> str:
    """The diff's header lines (sides, comparison, headline, warnings, notes) and its gate."""
    lines = render_diff.summary_lines(report) + render_diff.gate_lines(report, False)
    rows = [line.partition(" ") for line in lines if not line.startswith("explain ")]
    rows += [("traceview", " ", info.version), ("command", " ", info.command)]
    cells = "".join(
        f"<tr><th>{html_text(k)}</th><td>{html_text(v.strip())}</td></tr>" for k, _, v in rows
    )
    title = f"{report.base.path} → {report.new.path}"
    return (
        f"<header><h1>traceview diff: {html_text(title)}</h1>"
        f'<table class="facts">{cells}</table></header>'
    )


def _file_name(path: str) -> str:
    return path.rsplit("/", 1)[-1]

"""The report's ``ranks`` section, for a run: per rank its kernel time, busy % and wait, the
slowest rank (the straggler) marked; a chart and a table, both from the run's ``ranks`` JSON
document (``traceview ranks --format json``)."""

from __future__ import annotations

from typing import Any

from traceview.render import units
from traceview.render.escape import html_text
from traceview.render.html.charts import Figure, _layout, label
from traceview.render.html.documents import Documents

KERNEL_COLOR, WAIT_COLOR, BUSY_COLOR, SLOWEST_COLOR = "#4c78a8", "#f58518", "#54a24b", "#e45756"
DEFINITION = (
    "Per rank of the run: its kernel time (Σ duration of its kernels), its GPU busy % (Σ busy "
    "over Σ window of its devices) and its wait (Σ over the collectives present on every rank "
    "of latest start − its own start); ★ marks the slowest rank, the one the others wait for "
    "(most often last to start a collective; without collectives the longest median step, "
    "else the most kernel time). As <code>traceview ranks</code>; docs/metrics.md “Several "
    "ranks”."
)
_TABLE = (
    ("rank", "rank"),
    ("kernels", "kernels"),
    ("kernel time", "kernel_time_us"),
    ("busy %", "busy_pct"),
    ("idle", "idle_us"),
    ("comm.", "comm_us"),
    ("exposed comm.", "exposed_comm_us"),
    ("median step", "median_step_us"),
    ("times last", "times_last"),
    ("wait", "wait_us"),
)


def chart(docs: Documents) -> Figure | None:
    """Kernel time and wait per rank as bars (ms), busy % as points on a right-hand axis; the
    slowest rank's bars outlined and ★ over its column."""
    rows = [] if docs.ranks is None else docs.ranks["ranks"]
    if not rows:
        return None
    x = [r["rank"] for r in rows]
    hover = [_hover(r) for r in rows]
    outline = [2.5 if r["slowest"] else 0 for r in rows]
    data: list[dict[str, Any]] = [
        _bars("kernel time", x, [r["kernel_time_us"] / 1000 for r in rows], KERNEL_COLOR, hover),
        _bars("wait", x, [r["wait_us"] / 1000 for r in rows], WAIT_COLOR, hover),
        {
            "type": "scatter",
            "mode": "markers",
            "name": "GPU busy %",
            "x": x,
            "y": [r["busy_pct"] for r in rows],
            "yaxis": "y2",
            "marker": {"symbol": "diamond", "size": 9, "color": BUSY_COLOR},
            "hovertemplate": "rank %{x}: %{y:.1f}% busy<extra></extra>",
        },
    ]
    for bars in data[:2]:
        bars["marker"]["line"] = {"width": outline, "color": SLOWEST_COLOR}
    layout = _layout("", "rank", "time (ms)", 400, barmode="group", bargap=0.25)
    layout["xaxis"].update(type="category" if len(x) <= 64 else "linear")
    layout["yaxis2"] = {
        "title": {"text": "GPU busy %"},
        "overlaying": "y",
        "side": "right",
        "range": [0, 100],
        "tickmode": "linear",
        "tick0": 0,
        "dtick": 25,
        "showgrid": False,
    }
    layout["margin"].update(r=70, t=60)
    layout["annotations"] = [
        {
            "x": r["rank"],
            "y": 1,
            "xref": "x",
            "yref": "paper",
            "yanchor": "bottom",
            "showarrow": False,
            "text": f"★ slowest: rank {r['rank']}",
            "font": {"color": SLOWEST_COLOR, "size": 12},
        }
        for r in rows
        if r["slowest"]
    ]
    return {"data": data, "layout": layout}


def _bars(name: str, x: list[int], y: list[float], color: str, hover: list[str]) -> Figure:
    return {
        "type": "bar",
        "name": name,
        "x": x,
        "y": y,
        "marker": {"color": color},
        "hovertext": hover,
        "hovertemplate": f"rank %{{x}}: {name} %{{y:.3f}} ms<br>%{{hovertext}}<extra></extra>",
    }


def _hover(row: dict[str, Any]) -> str:
    step = row["median_step_us"]
    return (
        f"{row['kernels']:,} kernels · {row['busy_pct']:.1f}% busy · last in "
        f"{row['times_last']} collectives<br>exposed comm. {row['exposed_comm_us'] / 1000:.3f} ms"
        f" · median step {'-' if step is None else f'{step / 1000:.3f} ms'}"
        f"<br>{label(row['path'], 90)}"
    )


def table(docs: Documents) -> str:
    """Every rank's figures (as ``traceview ranks``), the slowest marked, and whose trace the
    other sections show."""
    if docs.ranks is None:
        return ""
    head = "".join(f"<th>{h}</th>" for h, _ in _TABLE) + "<th>file</th><th></th>"
    rows = []
    for r in docs.ranks["ranks"]:
        cells = "".join(f"<td>{_cell(key, r[key])}</td>" for _, key in _TABLE)
        mark = "★ slowest" if r["slowest"] else ""
        rows.append(
            f'<tr>{cells}<td class="name">{html_text(str(r["path"]))}</td><td>{mark}</td></tr>'
        )
    return (
        f'{_notes(docs)}<div class="table-wrap"><table class="figures ranks">'
        f"<tr>{head}</tr>{''.join(rows)}</table></div>"
    )


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key.endswith("_us"):
        return html_text(units.time(value))
    if key == "busy_pct":
        return f"{value:.2f}"
    return f"{value:,}"


def _notes(docs: Documents) -> str:
    assert docs.ranks is not None
    notes = [
        f"The sections below are of rank {docs.rank}'s trace alone (<code>--rank N</code> "
        "shows another rank)."
    ]
    spread = docs.ranks["clock_spread_us"]
    if spread is not None:
        notes.append(
            f"Collectives end {html_text(units.duration(spread))} apart across ranks (median): "
            "the ranks' clocks agree to about that."
        )
    notes += [html_text(w) for w in docs.ranks["warnings"]]
    return "".join(f'<p class="note">{n}</p>' for n in notes)


def header_rows(docs: Documents) -> list[tuple[str, str]]:
    """The run's lines of the page header (none for one trace)."""
    if docs.ranks is None:
        return []
    run = docs.ranks["run"]
    slowest = docs.ranks["slowest"]
    return [
        ("run", f"{run['ranks']} ranks, {run['files']} files, {units.size(run['bytes'])}"),
        ("slowest rank", "-" if slowest is None else str(slowest)),
        ("shown rank", f"rank {docs.rank}: the sections below are of its trace"),
    ]

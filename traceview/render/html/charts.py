"""Plotly figures (plain dicts: data + layout) for the report's sections, from the documents.

Every name from the trace goes through ``plotly_text`` first: plotly reads tags in its strings,
so a kernel named ``<b>x</b>`` would be bold; escaped, plotly shows the characters as written.
Times are in ms on time axes and µs for gap lengths, as the axis titles say.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np

from traceview.aggregate.order import distinct
from traceview.analyses.core.categories import CATEGORIES
from traceview.analyses.timeline import StepWork
from traceview.render import units
from traceview.render.escape import plotly_text
from traceview.render.html.documents import Documents

Figure = dict[str, Any]
TOP_KERNELS = 20
LABEL = 56  # characters of a name shown on an axis
HOVER = 300  # characters of a name shown on hover
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12}
# The split of a device's window (summary): exact parts, in this order.
SPLIT = (
    ("compute_us", "compute", "#4c78a8"),
    ("exposed_communication_us", "exposed communication", "#f58518"),
    ("exposed_memcpy_memset_us", "exposed memcpy/memset", "#54a24b"),
    ("idle_us", "idle", "#d3d3d3"),
)
# A colour per kernel category (analyses.categories.CATEGORIES), similar kinds in similar hues.
CATEGORY_COLORS = {
    "communication": "#e45756",
    "attention": "#f58518",
    "gemm": "#4c78a8",
    "convolution": "#1f3f73",
    "normalization": "#54a24b",
    "softmax": "#88d27a",
    "reduction": "#b279a2",
    "pooling": "#d6a5c9",
    "embedding": "#9d755d",
    "elementwise": "#72b7b2",
    "triton pointwise": "#eeca3b",
    "triton reduction": "#c49c12",
    "triton persistent": "#f2cf5b",
    "triton": "#ffe08a",
    "optimizer": "#ff9da6",
    "memcpy": "#7f7f7f",
    "memset": "#bab0ac",
    "other": "#d3d3d3",
}
PALETTE = (
    "#4c78a8",
    "#f58518",
    "#54a24b",
    "#e45756",
    "#72b7b2",
    "#eeca3b",
    "#b279a2",
    "#ff9da6",
    "#9d755d",
    "#bab0ac",
    "#1f77b4",
    "#8c564b",
    "#17becf",
    "#bcbd22",
)


def label(text: Any, limit: int = LABEL) -> str:
    """A name for an axis or legend: escaped, at most ``limit`` characters, cut in the middle
    (names alike at the start, template instantiations, still differ at the end)."""
    s = str(text)
    if len(s) > limit:
        head = (limit - 1) * 3 // 5
        s = s[:head] + "…" + s[len(s) - (limit - 1 - head) :]
    return plotly_text(s)


def device_label(device: Any, stream: Any = None) -> str:
    """``GPU 0`` or ``GPU 0 · stream 7`` (escaped: devices and streams come from the trace)."""
    name = f"GPU {device}" if stream is None else f"GPU {device} · stream {stream}"
    return label(name, 60)


def _layout(title: str, x: str, y: str, height: int = 360, **more: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "x": 0, "xanchor": "left", "font": {"size": 14}},
        "font": FONT,
        "height": height,
        "margin": {"l": 70, "r": 20, "t": 40, "b": 50},
        "xaxis": {"title": {"text": x}, "automargin": True},
        "yaxis": {"title": {"text": y}, "automargin": True},
        "legend": {"orientation": "h", "x": 0, "xanchor": "left", "y": 1.02, "yanchor": "bottom"},
        "hoverlabel": {"namelength": -1, "align": "left"},
        **more,
    }


def breakdown(docs: Documents) -> Figure | None:
    """Per device, its window split exactly (compute + exposed comm + exposed copies + idle)."""
    devices = docs.summary["devices"]
    if not devices:
        return None
    y = [device_label(d["device"]) for d in devices]
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": name,
            "y": y,
            "x": [d[key] / 1000 for d in devices],
            "customdata": [100 * d[key] / d["window_us"] if d["window_us"] else 0 for d in devices],
            "marker": {"color": color},
            "hovertemplate": f"{name}: %{{x:.3f}} ms (%{{customdata:.1f}}% of the window)"
            "<extra>%{y}</extra>",
        }
        for key, name, color in SPLIT
    ]
    height = 140 + 40 * len(devices)
    layout = _layout("", "time (ms)", "", height, barmode="stack")
    layout["legend"]["traceorder"] = "normal"
    return {"data": data, "layout": layout}


def categories(docs: Documents) -> Figure | None:
    """Per device, each category's busy time (the union of its activities)."""
    devices = docs.summary["devices"]
    names = [c for c in CATEGORIES if any(_busy(d, c) for d in devices)]
    if not names:
        return None
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "name": device_label(d["device"]),
            "y": names,
            "x": [_busy(d, c) / 1000 for c in names],
            "hovertemplate": "%{y}: %{x:.3f} ms busy<extra>%{fullData.name}</extra>",
        }
        for d in devices
    ]
    layout = _layout("", "busy time (ms)", "", 140 + 14 * len(names) * max(len(devices), 1))
    layout["yaxis"]["autorange"] = "reversed"
    return {"data": data, "layout": layout}


def _busy(device: dict[str, Any], category: str) -> float:
    return next((c["busy_us"] for c in device["categories"] if c["category"] == category), 0.0)


def top_kernels(docs: Documents) -> Figure | None:
    """The kernels with the most time, as a bar each (full name on hover)."""
    rows = docs.kernels["kernels"][:TOP_KERNELS]
    if not rows:
        return None
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "y": [f"{i}. {label(r['short_name'])}" for i, r in enumerate(rows, 1)],
            "x": [r["total_us"] / 1000 for r in rows],
            "customdata": [[r["count"], r["pct_time"]] for r in rows],
            "hovertext": [label(r["name"], HOVER) for r in rows],
            "hovertemplate": "%{hovertext}<br>total %{x:.3f} ms · %{customdata[0]} launches · "
            "%{customdata[1]:.1f}% of kernel time<extra></extra>",
            "marker": {"color": "#4c78a8"},
        }
    ]
    layout = _layout("", "total time (ms)", "", 120 + 22 * len(rows))
    layout["yaxis"].update(autorange="reversed", tickfont={"family": "monospace", "size": 11})
    return {"data": data, "layout": layout}


def utilisation(docs: Documents) -> Figure | None:
    """Busy % per bin of each device and stream, with the largest device gaps marked."""
    util = docs.utilisation.as_json()
    rows = util["rows"]
    if not rows:
        return None
    edges = np.asarray(util["edges_ms"])
    centres = ((edges[:-1] + edges[1:]) / 2).round(4).tolist() if len(edges) else []
    y = [device_label(r["device"], r["stream"]) for r in rows]
    data: list[dict[str, Any]] = [
        {
            "type": "heatmap",
            "x": centres,
            "y": y,
            "z": [r["busy_pct"] for r in rows],
            "zmin": 0,
            "zmax": 100,
            "colorscale": [[0, "#ffffff"], [0.5, "#6baed6"], [1, "#08306b"]],
            "colorbar": {"title": {"text": "busy %"}, "thickness": 12},
            "hovertemplate": "%{y}<br>%{x:.3f} ms: %{z:.1f}% busy<extra></extra>",
        }
    ]
    data.append(_gap_marks(docs, util["start_us"]))
    layout = _layout("", "time since the trace start (ms)", "", max(240, 110 + 26 * len(rows)))
    layout["yaxis"].update(autorange="reversed", type="category")
    layout["shapes"], layout["annotations"] = _step_bounds(docs.steps["steps"], util["start_us"])
    layout["legend"].update(x=1, xanchor="right")
    return {"data": data, "layout": layout}


def _gap_marks(docs: Documents, start_us: float) -> dict[str, Any]:
    """The largest device gaps (``gaps``) as markers on their device's row."""
    gaps = docs.gaps["largest"]
    return {
        "type": "scatter",
        "mode": "markers",
        "name": f"the {len(gaps)} largest device gaps",
        "x": [(g["ts_us"] - start_us + g["gap_us"] / 2) / 1000 for g in gaps],
        "y": [device_label(g["device"]) for g in gaps],
        "marker": {"symbol": "triangle-down", "size": 11, "color": "#e45756"},
        "hovertext": [_gap_text(g) for g in gaps],
        "hovertemplate": "%{hovertext}<extra></extra>",
    }


def _gap_text(gap: dict[str, Any]) -> str:
    return (
        f"gap of {gap['gap_us'] / 1000:.3f} ms · cause: {plotly_text(str(gap['cause']))}"
        f"<br>host wait {gap['host_wait_us'] / 1000:.3f} ms"
        f"<br>before: {label(gap['before'], 90)}<br>after: {label(gap['after'], 90)}"
    )


def step_work(docs: Documents) -> Figure | None:
    """The chosen step's GPU work: a rectangle per activity on its stream's row."""
    work = docs.step
    if work is None or len(work.ts) == 0:
        return None
    streams = [device_label(d, s) for d, s in work.streams]
    start = (work.ts - work.start_ns) / 1e6
    graph = np.zeros(len(work.ts), dtype=bool) if work.graph is None else work.graph
    data = []
    for c in distinct(work.category).tolist():  # np.unique imports numpy.ma (8 ms)
        for replayed in (False, True):
            mine = (work.category == c) & (graph == replayed)
            if mine.any():
                data.append(_rectangles(docs, work, streams, start, mine, c, replayed))
    layout = _layout(
        "",
        f"time since step {work.step}'s first GPU work (ms)",
        "",
        max(220, 150 + 34 * len(streams)),
        barmode="overlay",
        bargap=0.25,
    )
    layout["yaxis"].update(
        autorange="reversed", type="category", categoryorder="array", categoryarray=streams
    )
    return {"data": data, "layout": layout}


def _rectangles(
    docs: Documents,
    work: StepWork,
    streams: list[str],
    start: np.ndarray,
    mine: np.ndarray,
    category: int,
    replayed: bool,
) -> dict[str, Any]:
    """One category's rectangles of a step; a CUDA-graph replay's hatched, in a trace of
    their own (``<category> (graph replay)``)."""
    marker: dict[str, Any] = {
        "color": CATEGORY_COLORS.get(CATEGORIES[category], "#999"),
        "line": {"width": 0},
    }
    if replayed:
        marker["pattern"] = {"shape": "/", "fgcolor": "#222", "solidity": 0.3}
    ids = work.name[mine]
    shown = distinct(ids)  # each name labelled once, not once a kernel
    labels = np.array([label(docs.names[n], 90) for n in shown.tolist()], dtype=object)
    names = labels[np.searchsorted(shown, ids)].tolist()
    return {
        "type": "bar",
        "orientation": "h",
        "name": CATEGORIES[category] + (" (graph replay)" if replayed else ""),
        "base": start[mine].round(6).tolist(),
        "x": (work.dur[mine] / 1e6).round(6).tolist(),
        "y": [streams[s] for s in work.stream[mine].tolist()],
        "hovertext": names,
        "hovertemplate": "%{hovertext}<br>start %{base:.3f} ms · %{x:.4f} ms"
        "<extra>%{fullData.name}</extra>",
        "marker": marker,
    }


def gap_histogram(docs: Documents) -> Figure | None:
    """The device-gap histogram of ``gaps``: a bar per bin (its edges, its count), the bins
    log-spaced as there, the count axis log so the few long gaps stay visible."""
    hist = docs.gaps["histogram"]
    edges, counts = hist["edges"], hist["counts"]
    if not any(counts):
        return None
    bins = [f"{units.time(lo)}–{units.time(hi)}" for lo, hi in pairwise(edges)]
    data = [
        {
            "type": "bar",
            "x": bins,
            "y": [c or None for c in counts],
            "text": [str(c) if c else "" for c in counts],
            "textposition": "outside",
            "cliponaxis": False,
            "marker": {"color": "#4c78a8"},
            "hovertemplate": "gaps of %{x}: %{y}<extra></extra>",
        }
    ]
    layout = _layout("", "gap length (log-spaced bins, as traceview gaps)", "gaps (log scale)", 380)
    layout["xaxis"].update(type="category", tickangle=-40)
    layout["yaxis"]["type"] = "log"
    layout["showlegend"] = False
    layout["bargap"] = 0.08
    return {"data": data, "layout": layout}


def steps(docs: Documents) -> Figure | None:
    """Per step: its time, each device's GPU busy time and lag; outlier steps marked."""
    rows = docs.steps["steps"]
    if not rows:
        return None
    x = [r["step"] for r in rows]
    data: list[dict[str, Any]] = [
        {
            "type": "bar",
            "name": "step time",
            "x": x,
            "y": [r["step_time_us"] / 1000 for r in rows],
            "marker": {"color": "#c6dbef"},
            "hovertemplate": "step %{x}: %{y:.3f} ms<extra>step time</extra>",
        }
    ]
    devices = sorted({d["device"] for r in rows for d in r["devices"]}, key=str)
    for i, device in enumerate(devices):
        for key, what, dash in (("busy_us", "GPU busy", "solid"), ("lag_us", "lag", "dot")):
            data.append(
                _per_device(
                    rows,
                    device,
                    key,
                    f"{device_label(device)} {what}",
                    PALETTE[(i + 1) % len(PALETTE)],
                    dash,
                )
            )
    out = [r for r, flagged in zip(rows, docs.step_outliers, strict=True) if flagged]
    data.append(
        {
            "type": "scatter",
            "mode": "markers",
            "name": "outlier step",
            "x": [r["step"] for r in out],
            "y": [r["step_time_us"] / 1000 for r in out],
            "marker": {"symbol": "x", "size": 12, "color": "#e45756"},
            "hovertemplate": "step %{x} is an outlier: %{y:.3f} ms<extra></extra>",
        }
    )
    layout = _layout("", "step", "time (ms)", 380)
    layout["xaxis"].update(tickmode="linear" if len(x) <= 40 else "auto", dtick=1)
    return {"data": data, "layout": layout}


MFU_ABSENT = "absent: no step with model FLOPs (shapes of GEMM, attention or convolution ops)"


def mfu(docs: Documents) -> Figure | None:
    """Per step: its MFU (% of the dense peak) where it is given, else nothing; the achieved
    model TFLOP/s on a second axis (docs/metrics.md "Model FLOPs and MFU")."""
    rows = [r for r in docs.steps["steps"] if r.get("model_flops")]
    if not rows:
        return None
    x = [r["step"] for r in rows]
    data: list[dict[str, Any]] = [
        {
            "type": "bar",
            "name": "MFU",
            "x": x,
            "y": [None if r["mfu"] is None else 100 * r["mfu"] for r in rows],
            "marker": {"color": "#4c78a8"},
            "hovertemplate": "step %{x}: MFU %{y:.2f}%<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "achieved TFLOP/s",
            "x": x,
            "y": [r["tflops_per_s"] for r in rows],
            "yaxis": "y2",
            "line": {"color": "#f58518"},
            "hovertemplate": "step %{x}: %{y:.1f} TFLOP/s<extra></extra>",
        },
    ]
    layout = _layout("", "step", "MFU (% of the dense peak)", 340)
    layout["yaxis2"] = {"title": {"text": "TFLOP/s"}, "overlaying": "y", "side": "right"}
    layout["xaxis"].update(tickmode="linear" if len(x) <= 40 else "auto", dtick=1)
    return {"data": data, "layout": layout}


def _per_device(
    rows: list[dict[str, Any]], device: Any, key: str, name: str, color: str, dash: str
) -> dict[str, Any]:
    points = [
        (r["step"], d[key] / 1000) for r in rows for d in r["devices"] if d["device"] == device
    ]
    return {
        "type": "scatter",
        "mode": "lines+markers",
        "name": name,
        "x": [p[0] for p in points],
        "y": [p[1] for p in points],
        "line": {"color": color, "dash": dash},
        "hovertemplate": "step %{x}: %{y:.3f} ms<extra>%{fullData.name}</extra>",
    }


MEMORY_HOLDERS = 10  # holders listed per device under the memory chart


# The parts of a step's window (analyses.step_breakdown), in this order, stacked.
STEP_SPLIT = (
    ("compute_us", "compute", "#4c78a8"),
    ("communication_us", "communication", "#f58518"),
    ("memcpy_memset_us", "memcpy/memset", "#54a24b"),
    ("host_wait_us", "host wait", "#e45756"),
    ("other_idle_us", "other idle", "#d3d3d3"),
)


def step_breakdown(docs: Documents) -> Figure | None:
    """Per step (and device), its window stacked: compute, exposed communication, exposed
    memcpy/memset, host wait and other idle; a stall shows as a tall red part."""
    rows = [] if docs.step_breakdown is None else docs.step_breakdown["steps"]
    if not rows:
        return None
    several = len({str(r["device"]) for r in rows}) > 1
    x = [
        plotly_text(f"{r['step']} · GPU {r['device']}") if several else str(r["step"]) for r in rows
    ]
    data = [
        {
            "type": "bar",
            "name": name,
            "x": x,
            "y": [r[key] / 1000 for r in rows],
            "customdata": [100 * r[key] / r["window_us"] if r["window_us"] else 0 for r in rows],
            "marker": {"color": color},
            "hovertemplate": f"step %{{x}}: {name} %{{y:.3f}} ms (%{{customdata:.1f}}% of the "
            "step)<extra></extra>",
        }
        for key, name, color in STEP_SPLIT
    ]
    layout = _layout("", "step", "time (ms)", 380, barmode="stack")
    layout["xaxis"].update(type="category")
    layout["legend"]["traceorder"] = "normal"
    return {"data": data, "layout": layout}


def memory(docs: Documents) -> Figure | None:
    """Per device, the allocated level (solid) and the reserve (dotted) over time, in GiB;
    the peak marked; every other step shaded."""
    doc = docs.memory
    if doc is None or not doc["devices"]:
        return None
    start = docs.summary["trace"]["span_start_us"]
    data: list[dict[str, Any]] = []
    for i, d in enumerate(doc["devices"]):
        color, name = PALETTE[i % len(PALETTE)], device_label(d["device"])
        x = [(p["ts_us"] - start) / 1000 for p in d["timeline"]]
        for key, what, dash in (("allocated_bytes", "allocated", "solid"),
                                ("reserved_bytes", "reserved", "dot")):  # fmt: skip
            if any(p[key] is None for p in d["timeline"]):  # the reserve unknown: Bytes alone
                continue
            y = [p[key] / GIB for p in d["timeline"]]
            data.append(_level(f"{name} {what}", x, y, {"color": color, "dash": dash}))
        peak = ([(d["peak_ts_us"] - start) / 1000], [d["peak_allocated_bytes"] / GIB])
        data.append(_peak_mark(f"{name} peak", *peak, color))
    layout = _layout("", "time (ms from the trace start)", "GiB", 380)
    layout["shapes"] = _step_bands(docs.steps["steps"], start)
    return {"data": data, "layout": layout}


GIB = 2**30


def _level(name: str, x: list[float], y: list[float], line: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "lines",
        "name": name,
        "x": x,
        "y": y,
        "line": {**line, "shape": "hv"},
        "hovertemplate": "%{x:.3f} ms: %{y:.3f} GiB<extra>%{fullData.name}</extra>",
    }


def _peak_mark(name: str, x: list[float], y: list[float], color: str) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "markers",
        "name": name,
        "x": x,
        "y": y,
        "marker": {"symbol": "triangle-down", "size": 12, "color": color},
        "hovertemplate": "peak %{y:.3f} GiB at %{x:.3f} ms<extra>%{fullData.name}</extra>",
    }


def _step_bounds(
    steps: list[dict[str, Any]], start: float
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each step's CPU window start as a dashed line over the rows, labelled with its
    number at the top (ms from ``start``); the last step's end closes the last one."""
    at = [((s["cpu_start_us"] - start) / 1000, str(s["step"])) for s in steps]
    if steps:
        last = steps[-1]
        at.append(((last["cpu_start_us"] + last["cpu_dur_us"] - start) / 1000, ""))
    shapes = [
        {"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
         "line": {"color": "#636363", "width": 1, "dash": "dash"}}
        for x, _ in at
    ]  # fmt: skip
    notes = [
        {"x": x, "xref": "x", "y": 1, "yref": "paper", "yanchor": "bottom", "showarrow": False,
         "text": plotly_text(f"step {name}"), "xanchor": "left", "font": {"size": 10}}
        for x, name in at
        if name
    ]  # fmt: skip
    return shapes, notes


def _step_bands(steps: list[dict[str, Any]], start: float) -> list[dict[str, Any]]:
    """Every other step's CPU window as a grey band behind the lines (ms from ``start``)."""
    return [
        {"type": "rect", "xref": "x", "yref": "paper", "y0": 0, "y1": 1, "layer": "below",
         "x0": (s["cpu_start_us"] - start) / 1000,
         "x1": (s["cpu_start_us"] + s["cpu_dur_us"] - start) / 1000,
         "fillcolor": "#f0f0f0", "line": {"width": 0}}
        for s in steps[::2]
    ]  # fmt: skip

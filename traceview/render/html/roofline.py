"""The roofline and the GEMM heatmap, driven by the ``ops`` rows that carry FLOPs.

What is read from the ``ops`` JSON (the operator issue's fields, schema_version 2): per row
``name``, ``flops``, ``bytes``, ``tflops_per_s``, ``gpu_time_us``, ``kernels`` and, when
present, ``intensity`` (else flops / bytes), ``dtype``, ``shapes`` (``--group-by op+shapes``:
the Input Dims and types as one line, ``[[M, K], [K, N]] (float, float)``), ``pct_of_peak``,
``peak_tflops_per_s``; at the top, the ``device`` block: ``device``, ``peak_tflops_per_s``
(per dtype), ``peak_tb_per_s``, ``source``. Rows without ``flops`` are left out; with none,
each chart is replaced by one line saying why.
"""

from __future__ import annotations

import json
import math
from typing import Any

from traceview.render.escape import html_text, plotly_text
from traceview.render.html.charts import HOVER, PALETTE, Figure, _layout, label

GEMM_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear")
ABSENT = (
    "absent: no op in this trace has FLOPs (they come from op shapes: record_shapes=True, "
    "and from the FLOP counts of traceview ops)"
)
GEMM_ABSENT = "absent: no GEMM op (aten::mm, addmm, bmm, linear, …) with shapes and FLOPs"


def measured(ops: dict[str, Any]) -> list[dict[str, Any]]:
    """The ops rows with FLOPs, bytes and a rate."""
    return [
        r
        for r in ops.get("ops", [])
        if r.get("flops") and r.get("bytes") and r.get("tflops_per_s") is not None
    ]


def peaks(ops: dict[str, Any]) -> tuple[dict[str, float], float | None]:
    """The device's compute peaks (TFLOP/s per dtype, ``""`` when one for all) and its
    memory bandwidth (TB/s), from the ``ops`` document's ``device`` block; empty when the
    device's peaks are not known."""
    device = ops.get("device")
    if not isinstance(device, dict):
        return {}, None
    compute = device.get("peak_tflops_per_s")
    per_dtype = compute if isinstance(compute, dict) else {"": compute}
    clean = {str(k): float(v) for k, v in per_dtype.items() if isinstance(v, int | float) and v}
    bandwidth = device.get("peak_tb_per_s")
    return clean, float(bandwidth) if isinstance(bandwidth, int | float) and bandwidth else None


def notes(ops: dict[str, Any]) -> str:
    """Whose peaks draw the ceilings, or why there are none (when there are points)."""
    if not measured(ops):
        return ""
    device = ops.get("device")
    if isinstance(device, dict) and any(peaks(ops)):
        text = f"Ceilings: the peaks of {device.get('device')} ({device.get('source')})."
    else:
        text = (
            "No ceilings: the device's peaks are not known (traceview ops --peaks FILE gives "
            "them for a GPU not in the built-in table)."
        )
    return f'<p class="note">{html_text(text)}</p>'


def _intensity(row: dict[str, Any]) -> float:
    value = row.get("intensity")
    return float(value) if value else row["flops"] / row["bytes"]


def _dtype(row: dict[str, Any]) -> str:
    return str(row.get("dtype") or "unknown dtype")


def roofline(ops: dict[str, Any]) -> Figure | None:
    """One point per op row with FLOPs (op + shapes + dtype when the rows are grouped so);
    a trace per dtype (click the legend to filter), with the ceilings when peaks are known."""
    rows = measured(ops)
    if not rows:
        return None
    compute, bandwidth = peaks(ops)
    data: list[dict[str, Any]] = []
    for i, dtype in enumerate(sorted({_dtype(r) for r in rows})):
        mine = [r for r in rows if _dtype(r) == dtype]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": plotly_text(dtype),
                "x": [_intensity(r) for r in mine],
                "y": [r["tflops_per_s"] for r in mine],
                "hovertext": [_point_text(r) for r in mine],
                "hovertemplate": "%{hovertext}<br>%{x:.3g} FLOP/byte · %{y:.3g} TFLOP/s"
                "<extra>%{fullData.name}</extra>",
                "marker": {
                    "size": [_size(r) for r in mine],
                    "color": PALETTE[i % len(PALETTE)],
                    "opacity": 0.8,
                },
            }
        )
    data += _ceilings(rows, compute, bandwidth)
    layout = _layout(
        "", "arithmetic intensity (FLOP/byte, log scale)", "achieved TFLOP/s (log scale)", 460
    )
    layout["xaxis"]["type"] = "log"
    layout["yaxis"]["type"] = "log"
    return {"data": data, "layout": layout}


def _point_text(row: dict[str, Any]) -> str:
    shapes = row.get("shapes")
    text = label(row["name"], HOVER)
    if shapes is not None:
        text += "<br>shapes " + label(str(shapes), 120)
    return text + f"<br>{row['kernels']} kernels · {row['gpu_time_us'] / 1000:.3f} ms"


def _size(row: dict[str, Any]) -> float:
    """Marker size grows with the op's GPU time (6 to 24 px)."""
    return round(min(24.0, 6.0 + 2.0 * math.log10(1.0 + row["gpu_time_us"])), 1)


def _ceilings(
    rows: list[dict[str, Any]], compute: dict[str, float], bandwidth: float | None
) -> list[dict[str, Any]]:
    """The memory ceiling (TB/s × FLOP/byte) and a compute ceiling per dtype, each drawn up
    to where they meet over the x range of the points."""
    xs = [_intensity(r) for r in rows]
    lo, hi = min(xs) / 4, max(xs) * 4
    out = []
    for name, peak in sorted(_compute_ceilings(rows, compute).items()):
        ridge = peak / bandwidth if bandwidth else lo
        out.append(
            _line(
                [max(lo, ridge), max(hi, ridge * 2)],
                [peak, peak],
                f"compute peak {plotly_text(name)} {peak:g} TFLOP/s".replace("  ", " "),
            )
        )
    if bandwidth:
        top = max(compute.values()) if compute else max(r["tflops_per_s"] for r in rows) * 4
        out.append(
            _line(
                [lo, top / bandwidth], [bandwidth * lo, top], f"memory ceiling {bandwidth:g} TB/s"
            )
        )
    return out


def _compute_ceilings(rows: list[dict[str, Any]], compute: dict[str, float]) -> dict[str, float]:
    """The compute peak of each dtype the points have (the peak ``ops`` used for the row,
    else the device's peak for that dtype); every peak of the device when none is known."""
    mine: dict[str, float] = {}
    for r in rows:
        peak = r.get("peak_tflops_per_s") or compute.get(_dtype(r))
        if peak and _dtype(r) not in mine:
            mine[_dtype(r)] = float(peak)
    return mine or compute


def _line(x: list[float], y: list[float], name: str) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "lines",
        "name": name,
        "x": x,
        "y": y,
        "line": {"color": "#555", "dash": "dash", "width": 1.5},
        "hovertemplate": f"{name}<extra></extra>",
    }


def gemm_mnk(row: dict[str, Any]) -> tuple[int, int, int] | None:
    """(M, N, K) of a GEMM op row: its ``m``, ``n``, ``k`` fields, else from its shapes
    (mm [[M,K],[K,N]], addmm [bias,[M,K],[K,N]], bmm [[B,M,K],[B,K,N]] per batch, linear
    [[…,K],[N,K]] with the leading dims as M)."""
    if all(isinstance(row.get(k), int) for k in "mnk"):
        return row["m"], row["n"], row["k"]
    shapes = _dims(row.get("shapes"))
    name = str(row.get("name", "")).split(" ")[0]
    if name not in GEMM_OPS or shapes is None:
        return None
    dims = [s for s in shapes if isinstance(s, list) and len(s) >= 2]
    try:
        if name == "aten::linear":
            x, w = dims[0], dims[1]
            return math.prod(x[:-1]), w[0], x[-1]
        a, b = (dims[-2], dims[-1]) if len(dims) >= 2 else (None, None)
        if a is None or b is None:
            return None
        return a[-2], b[-1], a[-1]  # batched: per batch
    except (IndexError, TypeError):
        return None


def _dims(shapes: Any) -> list[Any] | None:
    """The Input Dims of a row: a list, or the list at the start of the shapes line
    (``[[M, K], [K, N]] (float, float)``); None when there are none."""
    if isinstance(shapes, str):
        try:
            shapes = json.loads(shapes.rsplit(" (", 1)[0])
        except ValueError:
            return None
    return shapes if isinstance(shapes, list) else None


def gemm_heatmap(ops: dict[str, Any]) -> Figure | None:
    """GEMMs as log2(M) × log2(N) cells coloured by % of peak; a menu picks dtype and K
    (``all K``: the cell's ops weighted by GPU time)."""
    cells = _gemm_cells(ops)
    if not cells:
        return None
    groups = _groups(cells)
    data, buttons = [], []
    for i, (title, members) in enumerate(groups):
        data.append(_heat(members, visible=i == 0))
        visible = [j == i for j in range(len(groups))]
        buttons.append({"label": title, "method": "restyle", "args": [{"visible": visible}]})
    layout = _layout("", "log2(N)", "log2(M)", 440)
    layout["xaxis"].update(dtick=1)
    layout["yaxis"].update(dtick=1)
    layout["updatemenus"] = [
        {
            "buttons": buttons,
            "x": 0,
            "y": 1.12,
            "xanchor": "left",
            "yanchor": "bottom",
            "showactive": True,
        }
    ]
    layout["margin"]["t"] = 60
    return {"data": data, "layout": layout}


def _gemm_cells(ops: dict[str, Any]) -> list[dict[str, Any]]:
    """GEMM rows with (M, N, K) and a % of peak (its ``pct_of_peak``, else its achieved
    TFLOP/s over its dtype's peak)."""
    compute, _ = peaks(ops)
    out = []
    for r in measured(ops):
        mnk = gemm_mnk(r)
        peak = r.get("peak_tflops_per_s") or compute.get(_dtype(r)) or compute.get("")
        pct = r.get("pct_of_peak")
        if pct is None and peak:
            pct = 100.0 * r["tflops_per_s"] / peak
        if mnk is None or pct is None or min(mnk) <= 0:
            continue
        out.append({"row": r, "m": mnk[0], "n": mnk[1], "k": mnk[2], "pct": float(pct)})
    return out


def _groups(cells: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Per dtype (most GPU time first): all K, then each K."""
    by_dtype: dict[str, list[dict[str, Any]]] = {}
    for c in cells:
        by_dtype.setdefault(_dtype(c["row"]), []).append(c)
    order = sorted(by_dtype, key=lambda d: -sum(c["row"]["gpu_time_us"] for c in by_dtype[d]))
    out = []
    for dtype in order:
        mine = by_dtype[dtype]
        out.append((f"{plotly_text(dtype)}, all K", mine))
        for k in sorted({c["k"] for c in mine}):
            out.append((f"{plotly_text(dtype)}, K={k}", [c for c in mine if c["k"] == k]))
    return out


def _heat(cells: list[dict[str, Any]], visible: bool) -> dict[str, Any]:
    """One heatmap: each (log2 M, log2 N) cell's % of peak, weighted by GPU time."""
    acc: dict[tuple[int, int], list[float]] = {}
    names: dict[tuple[int, int], list[str]] = {}
    for c in cells:
        key = (round(math.log2(c["m"])), round(math.log2(c["n"])))
        w = c["row"]["gpu_time_us"] or 1e-9
        a = acc.setdefault(key, [0.0, 0.0])
        a[0] += c["pct"] * w
        a[1] += w
        names.setdefault(key, []).append(
            f"{label(c['row']['name'], 60)} M={c['m']} N={c['n']} K={c['k']}: {c['pct']:.1f}%"
        )
    ys = list(range(min(k[0] for k in acc), max(k[0] for k in acc) + 1))  # every cell one size
    xs = list(range(min(k[1] for k in acc), max(k[1] for k in acc) + 1))
    z = [[acc[(y, x)][0] / acc[(y, x)][1] if (y, x) in acc else None for x in xs] for y in ys]
    text = [["<br>".join(names.get((y, x), [])[:8]) for x in xs] for y in ys]
    return {
        "type": "heatmap",
        "x": xs,
        "y": ys,
        "z": z,
        "text": text,
        "zmin": 0,
        "zmax": 100,
        "colorscale": "Viridis",
        "colorbar": {"title": {"text": "% of peak"}, "thickness": 12},
        "hovertemplate": "log2 M = %{y}, log2 N = %{x}: %{z:.1f}% of peak<br>%{text}"
        "<extra></extra>",
        "visible": visible,
    }

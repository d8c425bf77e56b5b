"""The report's flame (icicle) chart: GPU time by Python stack (``traceview source -f folded``
as a tree), outermost frame at the top, a kernel at the bottom of each stack."""

from __future__ import annotations

from typing import Any

from traceview.render.escape import plotly_text
from traceview.render.html.charts import HOVER, Figure, label
from traceview.render.html.documents import Documents

ABSENT = (
    "absent: no Python frames in this trace (record with torch.profiler.profile("
    "with_stack=True) or traceview record --stack)"
)
MIN_SHARE = 0.002  # stacks with less of the GPU time are left out of the chart
MAX_NODES = 3000


def flame(docs: Documents) -> Figure | None:
    """An icicle of the stacks' GPU time (ns; ms on hover), None without frames."""
    if not docs.stacks:
        return None
    total = sum(line.ns for line in docs.stacks)
    if total <= 0:
        return None
    value: dict[tuple[str, ...], int] = {}
    for line in docs.stacks:
        for depth in range(1, len(line.frames) + 1):
            key = line.frames[:depth]
            value[key] = value.get(key, 0) + line.ns
    kept = sorted(
        (k for k, v in value.items() if v >= MIN_SHARE * total), key=lambda k: (len(k), -value[k])
    )
    kept = kept[:MAX_NODES]
    ids = {key: str(i) for i, key in enumerate(kept)}
    kept = [k for k in kept if len(k) == 1 or k[:-1] in ids]
    trace: dict[str, Any] = {
        "type": "icicle",
        "ids": [ids[k] for k in kept],
        "labels": [label(k[-1]) for k in kept],
        "parents": [ids[k[:-1]] if len(k) > 1 else "" for k in kept],
        "values": [value[k] for k in kept],
        "branchvalues": "total",
        "hovertext": [
            f"{plotly_text(k[-1][:HOVER])}<br>{value[k] / 1e6:,.3f} ms "
            f"({100 * value[k] / total:.1f}% of GPU time)"
            for k in kept
        ],
        "hoverinfo": "text",
        "tiling": {"orientation": "v"},
        "root": {"color": "#f5f5f5"},
    }
    layout = {"height": 560, "margin": {"l": 10, "r": 10, "t": 10, "b": 10}}
    return {"data": [trace], "layout": layout}

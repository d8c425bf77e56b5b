"""The roofline and the GEMM heatmap, drawn from synthetic ``ops`` rows with FLOPs (the
operator issue's fields), and their one-line notes when no row has FLOPs."""

from __future__ import annotations

import math
from typing import Any

from traceview.render.html import roofline

# The ``device`` block of ``traceview ops --format json``.
DEVICE = {
    "device": "H100 SXM",
    "peak_tflops_per_s": {"bf16": 989.0, "fp32": 67.0},
    "peak_tb_per_s": 3.35,
    "source": "built-in table",
}


def gemm(name: str, shapes: list[list[int]], dtype: str, ms: float, b: int = 1) -> dict[str, Any]:
    """An op row as ``traceview ops`` gives it once FLOPs are known."""
    m, k, n = shapes[-2][-2], shapes[-2][-1], shapes[-1][-1]
    size = 2 if dtype == "bf16" else 4
    flops = 2 * m * n * k * b
    nbytes = (m * k + k * n + m * n) * size * b
    return {
        "name": name,
        "shapes": shapes,
        "dtype": dtype,
        "flops": flops,
        "bytes": nbytes,
        "tflops_per_s": flops / (ms * 1e-3) / 1e12,
        "gpu_time_us": ms * 1000,
        "kernels": 3,
    }


ROWS = [
    gemm("aten::mm", [[8944, 1024], [1024, 1024]], "bf16", 0.05),
    gemm("aten::addmm", [[4096], [4096, 1024], [1024, 4096]], "bf16", 0.04),
    gemm("aten::bmm", [[8, 512, 64], [8, 64, 512]], "fp32", 0.02, b=8),
    gemm("aten::mm", [[128, 4096], [4096, 128]], "fp32", 0.01),
    {
        "name": "aten::add",
        "flops": None,
        "bytes": None,
        "tflops_per_s": None,
        "gpu_time_us": 5.0,
        "kernels": 1,
    },
]


def test_a_point_per_row_with_flops_at_its_intensity_and_rate() -> None:
    fig = roofline.roofline({"ops": ROWS, "device": DEVICE})
    assert fig is not None
    points = [t for t in fig["data"] if t["mode"] == "markers"]
    assert [t["name"] for t in points] == ["bf16", "fp32"]
    got = sorted((x, y) for t in points for x, y in zip(t["x"], t["y"], strict=True))
    want = sorted((r["flops"] / r["bytes"], r["tflops_per_s"]) for r in ROWS if r["flops"])
    assert got == want
    lines = {t["name"]: t for t in fig["data"] if t["mode"] == "lines"}
    assert set(lines) == {
        "compute peak bf16 989 TFLOP/s",
        "compute peak fp32 67 TFLOP/s",
        "memory ceiling 3.35 TB/s",
    }
    memory = lines["memory ceiling 3.35 TB/s"]
    for x, y in zip(memory["x"], memory["y"], strict=True):
        assert math.isclose(y, 3.35 * x)  # TB/s × FLOP/byte = TFLOP/s
    assert fig["layout"]["xaxis"]["type"] == "log" and fig["layout"]["yaxis"]["type"] == "log"


def test_no_peaks_no_ceilings_and_no_flops_no_chart() -> None:
    fig = roofline.roofline({"ops": ROWS})
    assert fig is not None and all(t["mode"] == "markers" for t in fig["data"])
    assert roofline.roofline({"ops": ROWS[-1:]}) is None
    assert roofline.gemm_heatmap({"ops": ROWS[-1:], "device": DEVICE}) is None
    assert roofline.ABSENT.startswith("absent: ")


def test_gemm_shapes() -> None:
    assert roofline.gemm_mnk(ROWS[0]) == (8944, 1024, 1024)
    assert roofline.gemm_mnk(ROWS[1]) == (4096, 4096, 1024)
    assert roofline.gemm_mnk(ROWS[2]) == (512, 512, 64)
    linear = {"name": "aten::linear", "shapes": [[4, 256, 768], [3072, 768], [3072]]}
    assert roofline.gemm_mnk(linear) == (1024, 3072, 768)
    assert roofline.gemm_mnk({"name": "aten::mm", "m": 2, "n": 3, "k": 4}) == (2, 3, 4)
    assert roofline.gemm_mnk({"name": "aten::add", "shapes": [[2, 2], [2, 2]]}) is None
    # as ``ops --group-by op+shapes`` gives them: the Input Dims, then the Input types
    line = "[[8944, 1024], [1024, 1024]] (c10::BFloat16, c10::BFloat16)"
    assert roofline.gemm_mnk({"name": "aten::mm", "shapes": line}) == (8944, 1024, 1024)
    assert roofline.gemm_mnk({"name": "aten::mm", "shapes": "[[8944, 10"}) is None


def test_compute_ceilings_only_for_the_points_dtypes_at_the_peak_ops_used() -> None:
    device = {**DEVICE, "peak_tflops_per_s": {"bf16": 989.0, "fp8": 1979.0, "fp64": 67.0}}
    row = {**ROWS[0], "dtype": "c10::BFloat16", "peak_tflops_per_s": 989.0}
    fig = roofline.roofline({"ops": [row], "device": device})
    assert fig is not None
    lines = [t["name"] for t in fig["data"] if t["mode"] == "lines"]
    assert lines == ["compute peak c10::BFloat16 989 TFLOP/s", "memory ceiling 3.35 TB/s"]


def test_heatmap_takes_the_rows_pct_of_peak_and_notes_name_the_peaks() -> None:
    row = {**ROWS[0], "pct_of_peak": 42.0}
    fig = roofline.gemm_heatmap({"ops": [row], "device": None})
    assert fig is not None and fig["data"][0]["z"] == [[42.0]]
    assert "H100 SXM (built-in table)" in roofline.notes({"ops": ROWS, "device": DEVICE})
    assert "No ceilings" in roofline.notes({"ops": ROWS, "device": None})
    assert roofline.notes({"ops": ROWS[-1:], "device": DEVICE}) == ""


def test_heatmap_cells_are_percent_of_peak_with_a_dtype_and_k_menu() -> None:
    fig = roofline.gemm_heatmap({"ops": ROWS, "device": DEVICE})
    assert fig is not None
    labels = [b["label"] for b in fig["layout"]["updatemenus"][0]["buttons"]]
    assert labels == ["bf16, all K", "bf16, K=1024", "fp32, all K", "fp32, K=64", "fp32, K=4096"]
    k1024 = fig["data"][1]
    # log2 N, log2 M (rounded), every integer between so the cells are one size
    assert k1024["x"] == [10, 11, 12] and k1024["y"] == [12, 13]
    assert sum(v is not None for row in k1024["z"] for v in row) == 2
    pct = {
        (y, x): v
        for y, row in zip(k1024["y"], k1024["z"], strict=True)
        for x, v in zip(k1024["x"], row, strict=True)
        if v is not None
    }
    assert math.isclose(pct[(13, 10)], 100 * ROWS[0]["tflops_per_s"] / 989.0)
    assert math.isclose(pct[(12, 12)], 100 * ROWS[1]["tflops_per_s"] / 989.0)
    assert [t["visible"] for t in fig["data"]] == [True, False, False, False, False]

"""The ops an Inductor Triton kernel's name says it fused: read by tokens, aten names with
underscores kept whole; names that are not Inductor's give none."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from traceview.analyses.core.categories import TRITON_FAMILY, by_name
from traceview.analyses.core.fused import fused_ops
from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.columns.parallel import collect_events
from traceview.read.reader import TraceReader


@pytest.mark.parametrize(
    ("name", "ops"),
    [
        ("triton_poi_fused_add_native_layer_norm_3", ("add", "native_layer_norm")),
        ("triton_poi_fused__to_copy_1", ("_to_copy",)),
        ("triton_red_fused_add_mean_mul_pow_rsqrt_0", ("add", "mean", "mul", "pow", "rsqrt")),
        ("triton_poi_fused_native_dropout_relu_threshold_backward_view_11",
         ("native_dropout", "relu", "threshold_backward", "view")),
        ("triton_per_fused__to_copy_add_native_dropout_native_layer_norm_native_layer_norm_"
         "backward_transpose_view_8",
         ("_to_copy", "add", "native_dropout", "native_layer_norm",
          "native_layer_norm_backward", "transpose", "view")),
        ("triton_tem_fused_mm_0", ("mm",)),
        ("triton_poi_fused_max_pool2d_with_indices_2", ("max_pool2d_with_indices",)),
        ("triton_poi_fused_add_add_1", ("add",)),  # each op once
        ("triton_poi_fused_0", ()),  # fused, but the name names no op
    ],
)  # fmt: skip
def test_fused_ops_by_tokens(name: str, ops: tuple[str, ...]) -> None:
    assert fused_ops(name) == ops
    assert by_name(name) in TRITON_FAMILY


@pytest.mark.parametrize(
    "name",
    [
        "attn_fwd",  # a hand-written Triton kernel: names no fused ops
        "triton_poi_fusedx_add_0",
        "my_triton_poi_fused_add_0",
        "triton_kernel_add_0",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
        "fused_add_native_layer_norm",
    ],
)
def test_other_names_fuse_nothing(name: str) -> None:
    assert fused_ops(name) is None


def test_fused_op_shares_add_up(tmp_path: Path) -> None:
    """A fused kernel of 3 ops and 10,001 ns: 3,334 / 3,334 / 3,333 ns, in the name's order;
    a kernel launched by aten::add goes wholly to add, one with no op to (no op)."""

    def launch(corr: int, ts: float) -> dict[str, object]:
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                "tid": 1, "ts": ts, "dur": 1, "args": {"correlation": corr}}  # fmt: skip

    def kernel(name: str, corr: int, ts: float, dur: float) -> dict[str, object]:
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts,
                "dur": dur, "args": {"correlation": corr, "device": 0, "stream": 7}}  # fmt: skip

    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 5},
        launch(1, 1), kernel("vectorized_elementwise_kernel", 1, 10, 4),
        launch(2, 6), kernel("triton_red_fused_add_native_layer_norm_sum_0", 2, 20, 10.001),
        launch(3, 7), kernel("other_kernel", 3, 40, 2),
    ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    report = analyse_kernels(
        collect_events(TraceReader(path), keep_cpu=True), KernelOptions(group_by="fused-op")
    )
    got = {r.name: (r.count, r.total_ns) for r in report.rows}
    assert got == {
        "add": (2, 4_000 + 3_334),
        "native_layer_norm": (1, 3_334),
        "sum": (1, 3_333),
        "(no op)": (1, 2_000),
    }
    assert report.count == 3 and report.total_ns == 4_000 + 10_001 + 2_000
    assert sum(total for _, total in got.values()) == report.total_ns
    assert np.isclose(sum(r.pct_time for r in report.rows), 100.0)

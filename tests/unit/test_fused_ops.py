"""The ops an Inductor Triton kernel's name says it fused: read by tokens, aten names with
underscores kept whole; names that are not Inductor's give none."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview.analyses.core import fused
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


_NAMES = [
    "triton_poi_fused_add_native_layer_norm_3",
    "triton_red_fused_add_mean_mul_pow_rsqrt_0",
    "vectorized_elementwise_kernel",
    "aten::add_",
    "aten::mm",
    "triton_poi_fused__to_copy_1",
]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(-1, 5), st.integers(0, 10**6)), max_size=40),
    st.sampled_from([1, 3, 7, 1 << 16]),
)
def test_fused_op_shares_against_each_row(rows: list[tuple[int, int, int]], size: int) -> None:
    """Each row's pairs (a pass of rows at a time) against a plain reading of the rule: a
    fused kernel's ops in the name's order, the duration split with the remainder's ns to
    the first; any other kernel wholly to its op (its op_label), or (no op)."""
    name = np.array([r[0] for r in rows], dtype=np.int32)
    dur = np.array([r[2] for r in rows], dtype=np.int64)
    events = SimpleNamespace(names=_NAMES, gpu=SimpleNamespace(name=name, dur=dur))
    leaf = np.array([r[1] for r in rows], dtype=np.int64)
    picked = np.arange(len(rows))[::-1].copy()  # rows asked for in another order
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fused, "_PASS", size)
        got = fused.fused_op_shares(events, picked, leaf[picked])  # type: ignore[arg-type]
    want = []
    for i, row in enumerate(picked.tolist()):
        ops = fused_ops(_NAMES[rows[row][0]])
        if ops:
            k = len(ops)
            want += [
                (i, op, rows[row][2] // k + (j < rows[row][2] % k)) for j, op in enumerate(ops)
            ]
        else:
            op = rows[row][1]
            want.append(
                (i, fused.NO_OP_LABEL if op < 0 else fused.op_label(_NAMES[op]), rows[row][2])
            )
    pairs = zip(got.row.tolist(), got.label.tolist(), got.share.tolist(), strict=True)
    assert [(r, got.labels[x], s) for r, x, s in pairs] == want

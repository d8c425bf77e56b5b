"""Kernel categories: each name rule on real kernel names from ../shared/traces, the launching-op
override, and category times adding up exactly to the kernel time on every real trace."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import pytest
from conftest import SHARED_TRACES, RealTrace
from typer.testing import CliRunner

from traceview.analyses.core.categories import NAME_RULES, by_name, by_op
from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.cli import app
from traceview.columns.parallel import collect_events
from traceview.read.reader import TraceReader

# (category, a kernel name as it stands in a trace of ../shared/traces)
REAL = [
    ("communication", "ncclKernel_AllReduce"),
    ("communication", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
    ("triton pointwise", "triton_poi_fused__unsafe_view_add_3"),
    ("triton reduction", "triton_red_fused_add_mean_mul_pow_rsqrt_0"),
    ("attention", "attn_fwd"),
    ("attention", "kernel_unified_attention_2d"),
    ("convolution", "cudnn_infer_volta_scudnn_128x64_relu_small_nn_v1"),
    ("convolution", "cask_cudnn::computeBOffsetsKernel(cask_cudnn::ComputeBOffsetsParams)"),
    ("gemm", "ampere_sgemm_128x128_tt"),
    ("gemm", "nvjet_tst_144x128_64x6_2x1_v_bz_bias_TNN"),
    ("embedding", "void bounds_check_indices_kernel<long, false>"),
    ("reduction", "reduce_segments"),
    ("normalization", "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiii"),
    ("softmax", "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>"),
    ("pooling", "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>"),
    ("elementwise", "batched_transpose_32x16_half"),
    ("elementwise", "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>"),
    ("other", "_combined_routing_compute"),
]  # fmt: skip


@cache
def _real_names() -> str:
    text = []
    for path in SHARED_TRACES.glob("*.json.gz"):
        text.append(gzip.decompress(path.read_bytes()).decode("utf-8", "replace"))
    return "\n".join(text)


@pytest.mark.parametrize(("category", "name"), REAL, ids=[f"{c}:{n[:30]}" for c, n in REAL])
def test_real_kernel_names(category: str, name: str) -> None:
    assert by_name(name) == category
    if SHARED_TRACES.is_dir():  # the sample is a real name (a prefix of it, for long ones)
        assert json.dumps(name)[1:-1] in _real_names()


def test_every_rule_is_exercised() -> None:
    rules = {category for category, _ in NAME_RULES}
    assert rules - {c for c, _ in REAL} <= {
        "triton persistent",
        "triton template",
        "triton",
        "optimizer",
    }
    assert by_name("triton_per_fused_softmax_0") == "triton persistent"
    assert by_name("triton_tem_fused_mm_1") == "triton template"
    assert by_name("triton_kernel_0") == "triton"
    assert by_name("void multi_tensor_apply_kernel<...>") == "optimizer"


@pytest.mark.parametrize(
    ("op", "category"),
    [
        ("aten::mm", "gemm"), ("aten::addmm", "gemm"), ("aten::linear", "gemm"),
        ("aten::matmul", "gemm"), ("aten::mmx", None), ("aten::cudnn_convolution", "convolution"),
        ("aten::_scaled_dot_product_flash_attention", "attention"),
        ("aten::native_layer_norm", "normalization"), ("aten::_softmax", "softmax"),
        ("nccl:all_reduce", "communication"), ("aten::add", None),
    ],
)  # fmt: skip
def test_op_rules(op: str, category: str | None) -> None:
    assert by_op(op) == category


def test_a_kernel_launched_by_a_matmul_is_a_gemm(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 2, "dur": 1, "args": {"correlation": 5}},
        {"ph": "X", "cat": "kernel", "name": "my_kernel", "pid": 0, "tid": 7, "ts": 20,
         "dur": 4, "args": {"correlation": 5, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "my_kernel", "pid": 0, "tid": 7, "ts": 30,
         "dur": 6, "args": {"device": 0, "stream": 7}},
    ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    report = analyse_kernels(
        collect_events(TraceReader(path), keep_cpu=True), KernelOptions(group_by="category")
    )
    assert [(r.name, r.count, r.total_ns) for r in report.rows] == [
        ("other", 1, 6000),
        ("gemm", 1, 4000),
    ]
    r = CliRunner().invoke(app, ["kernels", str(path), "--group-by", "category", "--no-cache"])
    assert r.exit_code == 0, r.output
    assert "Category" in r.stdout and "gemm" in r.stdout


def test_category_times_add_up_to_the_kernel_time(real_trace: RealTrace) -> None:
    events = real_trace.events
    for include in (("kernel",), ("kernel", "memcpy", "memset")):
        by_category = analyse_kernels(
            events, KernelOptions(group_by="category", top=0, include=include)
        )
        by_kernel = analyse_kernels(events, KernelOptions(top=0, include=include))
        assert by_category.count == by_kernel.count
        total = sum(r.total_ns for r in by_category.rows)
        assert total == by_kernel.total_ns
        assert sum(r.count for r in by_category.rows) == by_kernel.count


@pytest.mark.parametrize(
    ("name", "category"),
    [
        # `lamb` is not `lambda`: a copy kernel of a lambda is elementwise, not optimizer
        ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda("
         "at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(float)#1}>",
         "elementwise"),
        # the reduce kernel of a .sum(): its lambdas made it an optimizer
        ("void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, "
         "at::native::func_wrapper_t<c10::BFloat16, at::native::sum_functor<c10::BFloat16, "
         "float, c10::BFloat16>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>",
         "reduction"),
        # `convert` is not `conv`
        ("void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*, unsigned int)",
         "other"),
        ("void fused_lamb_kernel<float>", "optimizer"),
        ("conv2d_grouped_direct_kernel", "convolution"),
        ("cublasGemmSmallNParams", "gemm"),
        ("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1>",
         "gemm"),
        ("void at::native::normal_kernel<float>", "other"),
    ],
)  # fmt: skip
def test_name_rules_match_words_not_substrings(name: str, category: str) -> None:
    assert by_name(name) == category


@pytest.mark.parametrize(
    ("op", "category"),
    [
        ("aten::_fused_adamw_", "optimizer"), ("aten::_foreach_add_", "optimizer"),
        ("aten::_foreach_copy_", "elementwise"), ("aten::_cudnn_attention_backward", "attention"),
        ("aten::embedding_dense_backward", "embedding"), ("aten::copy_", None),
    ],
)  # fmt: skip
def test_optimizer_and_other_op_rules(op: str, category: str | None) -> None:
    assert by_op(op) == category


def _launched(name: str, ts: int, correlation: int) -> list[dict[str, object]]:
    return [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": ts, "dur": 1, "args": {"correlation": correlation}},
        {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": 100 + ts,
         "dur": 4, "args": {"correlation": correlation, "device": 0, "stream": 7}},
    ]  # fmt: skip


def test_a_kernel_under_optimizer_step_is_optimizer(tmp_path: Path) -> None:
    """The step's annotation decides where no op rule does; an op rule still wins inside it."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step", "pid": 1,
         "tid": 1, "ts": 0, "dur": 50},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul_", "pid": 1, "tid": 1, "ts": 1, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mul_", "pid": 1, "tid": 1, "ts": 60,
         "dur": 5},
        *_launched("vectorized_elementwise_kernel<mul>", 2, 1),
        *_launched("my_kernel", 11, 2),
        *_launched("vectorized_elementwise_kernel<mul>", 61, 3),
    ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    report = analyse_kernels(
        collect_events(TraceReader(path), keep_cpu=True), KernelOptions(group_by="category")
    )
    assert sorted((r.name, r.count) for r in report.rows) == [
        ("elementwise", 1),
        ("gemm", 1),
        ("optimizer", 1),
    ]

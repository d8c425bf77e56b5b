"""Kernel categories: which part of the model a GPU activity belongs to.

Decided in this order (docs/metrics.md "Kernel categories"):
1. memcpy and memset activities are ``memcpy`` / ``memset`` (by their trace category);
2. a kernel whose launching (leaf) op is in OP_RULES takes that op's category — a kernel launched
   by ``aten::mm`` is a GEMM whatever its name;
3. else the first of NAME_RULES whose pattern is found in the kernel name (case-insensitive);
4. else ``other``.
Every activity gets exactly one category, so category times add up to the total exactly.
"""

from __future__ import annotations

import re

import numpy as np

from traceview.aggregate.order import distinct
from traceview.columns.model import TraceEvents
from traceview.columns.schema import KERNEL, MEMCPY, MEMSET

# (category, regular expression on the lower-cased kernel name); the first match wins.
NAME_RULES: tuple[tuple[str, str], ...] = (
    ("communication", r"nccl|rccl|hccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all"),
    ("triton pointwise", r"^triton_poi"),
    ("triton reduction", r"^triton_red"),
    ("triton persistent", r"^triton_per"),
    ("triton", r"^triton_"),
    ("attention", r"flash|fmha|attention|attn|sdpa|mha_|paged_kv"),
    ("convolution", r"conv|implicit_?gemm|igemm|winograd|scudnn|dgrad|wgrad|fprop|cask_cudnn"),
    ("gemm", r"gemm|gemv|cutlass|cublas|nvjet|cijk_|xmma|matmul|wgmma|splitkreduce|^bmm_"),
    ("embedding", r"embedding|embs_|linearize_index|bounds_check_indices"),
    ("optimizer", r"multi_tensor_apply|adam|adagrad|sgd|lamb|fused_optim"),
    ("reduction", r"reduce_kernel"),
    ("normalization", r"norm|bn_fw|bn_bw|gammabeta|rowwisemoments"),
    ("softmax", r"softmax"),
    ("pooling", r"pool"),
    ("reduction", r"reduc|cub::|scan|radixsort|argmax|argmin|topk|sum_kernel"),
    (
        "elementwise",
        r"elementwise|unrolled|vectorized|copy|fill|functor|act_and_mul|transpose|permute"
        r"|nchwtonhwc|nhwctonchw|scalepacked|subtensorop|rotary|kvcache|cat_?array",
    ),
)
# (category, regular expression on the launching op's name); the first match wins.
OP_RULES: tuple[tuple[str, str], ...] = (
    ("communication", r"^(c10d::|nccl:|record_param_comms)"),
    ("attention", r"^aten::(_?scaled_dot_product|_flash_attention|_efficient_attention)"),
    ("convolution", r"^aten::(_?convolution|conv\dd|cudnn_convolution|miopen_convolution)"),
    ("gemm", r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm|addmv|mv|dot)$"),
    ("normalization", r"^aten::(native_|cudnn_|_fused_)?(layer|batch|group|rms)_norm"),
    ("softmax", r"^aten::(_?log_)?_?softmax"),
)
CATEGORIES = (
    "communication", "attention", "gemm", "convolution", "normalization", "softmax",
    "reduction", "pooling", "embedding", "elementwise", "triton pointwise", "triton reduction",
    "triton persistent", "triton", "optimizer", "memcpy", "memset", "other",
)  # fmt: skip
_NAME = [(category, re.compile(pattern)) for category, pattern in NAME_RULES]
_OP = [(category, re.compile(pattern)) for category, pattern in OP_RULES]


def by_name(name: str) -> str:
    """The category of a kernel from its name alone."""
    lowered = name.lower()
    for category, pattern in _NAME:
        if pattern.search(lowered):
            return category
    return "other"


def by_op(op: str) -> str | None:
    """The category a launching op imposes on its kernels, if any."""
    for category, pattern in _OP:
        if pattern.search(op):
            return category
    return None


def categorize(events: TraceEvents, leaf: np.ndarray | None = None) -> np.ndarray:
    """Per GPU row, the index of its category in CATEGORIES. ``leaf`` holds each row's leaf
    op name id (oplinks.NO_OP when none), or is None when ops are not linked."""
    gpu = events.gpu
    index = {c: i for i, c in enumerate(CATEGORIES)}
    of_name = np.array([index[by_name(n)] for n in events.names], dtype=np.int64)
    out = of_name[gpu.name] if len(of_name) else np.zeros(0, dtype=np.int64)
    if leaf is not None:
        imposed = np.full(len(events.names), -1, dtype=np.int64)
        for op in distinct(leaf[leaf >= 0]).tolist():
            category = by_op(events.names[op])
            imposed[op] = -1 if category is None else index[category]
        linked = (leaf >= 0) & (gpu.kind == KERNEL)
        chosen = np.where(linked, imposed[np.maximum(leaf, 0)], -1) if len(imposed) else out
        out = np.where(chosen >= 0, chosen, out)
    out[gpu.kind == MEMCPY] = index["memcpy"]
    out[gpu.kind == MEMSET] = index["memset"]
    return out


__all__ = ["CATEGORIES", "NAME_RULES", "OP_RULES", "by_name", "by_op", "categorize"]

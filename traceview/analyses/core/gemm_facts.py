"""What each GEMM kernel computes in and on: its input precision and its M, N, K.

Precision comes from the launching op's ``Input type`` (record_shapes) — unless the op's
inputs are fp32 and the name states a narrower type the kernel runs in (TF32, bf16) — and,
only without it, from the kernel name's dtype tokens (docs/hints.md "low-precision"): cuBLAS,
cutlass and xmma names write the input type before the instruction (``bf16_s1688gemm``: bf16
inputs, an fp32 accumulator ``s``); ``sgemm`` / ``ffma`` / ``simt`` are plain fp32 FMA
kernels, ``tf32`` is TF32. Names that say no type (``nvjet_…``, ``cublasGemmSmallNParams``,
``gemmSN<float…>`` whose ``float`` is the compute type) give no precision.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.aggregate import sums
from traceview.aggregate.order import groups_in_order
from traceview.analyses.core.oplinks import NO_OP, OpLinks
from traceview.columns.cpu_rows import NO_SHAPE
from traceview.columns.model import TraceEvents

# The precision a GEMM's inputs have, by the type name kineto writes.
OP_PRECISION = {
    "double": "fp64",
    "float": "fp32",
    "c10::Half": "fp16",
    "c10::BFloat16": "bf16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
    "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8",
    "signed char": "int8",
}
BYTES = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}
# (precision, pattern on one token of the name: lower-cased, split at non-alphanumerics and
# lower→upper case changes); the first precision any token matches wins.
_NAME_TOKENS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (p, re.compile(pattern))
    for p, pattern in (
        ("fp8", r".*(e4m3|e5m2).*|fp8|f8(f8)*"),
        ("bf16", r".*bf16.*"),
        ("fp16", r"f16(f16)*|fp16|half|h\d*gemm|hgemm|h\d{3,}"),
        ("int8", r"i8(i8)*|int8|s8(s8)*|imma|i\d+gemm"),
        ("tf32", r".*tf32.*"),
        ("fp64", r"dgemm|d\d+gemm|f64(f64)*|dmma"),
        ("fp32", r"sgemm|ffma|simt|f32(f32)*"),
    )
)
_TENSOROP_FP32 = re.compile(r"s\d{3,}gemm")  # cutlass tensorop_s1688gemm without a type: TF32
_SPLIT = re.compile(r"[^a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_ALIGN = re.compile(r"(?<![a-z])align[ac]?[12](?![0-9])")


def kernel_precision(name: str) -> str | None:
    """The input precision a GEMM kernel's name states, or None when it states none."""
    tokens = [t for t in _SPLIT.split(_CAMEL.sub(" ", name).lower()) if t]
    for precision, pattern in _NAME_TOKENS:
        if any(pattern.fullmatch(t) for t in tokens):
            return precision
    if "tensorop" in tokens and any(_TENSOROP_FP32.fullmatch(t) for t in tokens):
        return "tf32"
    return None


def narrow_aligned(name: str) -> bool:
    """The kernel name says it was picked for operands aligned to 1 or 2 elements only."""
    return _ALIGN.search(name.lower()) is not None


@dataclass(frozen=True)
class OpGemm:
    """One GEMM call's M, N, K (batch folded into nothing: per-matrix dims) and the precision
    of its inputs (None when the type is not a known float / int8 type)."""

    m: int
    n: int
    k: int
    precision: str | None


def op_gemm(op: str, dims_text: bytes, types_text: bytes) -> OpGemm | None:
    """The OpGemm of a call of ``op`` with these raw Input Dims / Input type, if a GEMM."""
    rule = _GEMM_DIMS.get(op)
    if rule is None:
        return None
    try:
        dims, types = json.loads(dims_text), json.loads(types_text) if types_text else []
        (m, n, k), at = rule(dims)
    except (ValueError, TypeError, IndexError, KeyError, UnicodeDecodeError):
        return None
    if not all(type(x) is int and x >= 0 for x in (m, n, k)):
        return None
    kind = types[at] if isinstance(types, list) and at < len(types) else None
    return OpGemm(m, n, k, OP_PRECISION.get(kind) if isinstance(kind, str) else None)


def _plain(a: int, b: int) -> Any:
    return lambda d: ((d[a][-2], d[b][-1], d[a][-1]), a)


def _linear(d: Any) -> Any:
    return (math.prod(d[0][:-1]), d[1][0], d[0][-1]), 0


def _matmul(d: Any) -> Any:
    if len(d[0]) < 2 or len(d[1]) < 2:
        raise ValueError
    return (d[0][-2], d[1][-1], d[0][-1]), 0


_GEMM_DIMS = {
    "aten::mm": _plain(0, 1),
    "aten::bmm": _plain(0, 1),
    "aten::_scaled_mm": _plain(0, 1),
    "aten::addmm": _plain(1, 2),
    "aten::baddbmm": _plain(1, 2),
    "aten::linear": _linear,
    "aten::matmul": _matmul,
}


@dataclass(frozen=True)
class GemmKernels:
    """Of the GEMM kernels, per distinct (kernel name, leaf op, leaf op shape), in order of
    first appearance: its kernels (``count``) and their time (``ns``, exact), its kernel name
    id, input precision (None: unknown), whether the op said it (else the name), its
    launching op's GEMM (None: unknown) and that op's name. No array a kernel: only these
    are held through the hints."""

    count: list[int]
    ns: list[int]
    name: list[int]
    precision: list[str | None]
    from_op: list[bool]
    gemm: list[OpGemm | None]
    op: list[str | None]


def gemm_kernels(events: TraceEvents, links: OpLinks, rows: np.ndarray) -> GemmKernels:
    """The GemmKernels of ``rows`` (the GEMM category's kernels), worked out once per
    distinct (kernel name, leaf op, leaf op shape)."""
    leaf = links.leaf[rows] if len(links.leaf) else np.full(len(rows), NO_OP)
    shape = (
        links.leaf_shape[rows]
        if links.leaf_shape is not None and len(links.leaf_shape)
        else np.full(len(rows), NO_SHAPE)
    )
    name = events.gpu.name[rows]
    first, group = groups_in_order([name, leaf, shape])
    keys = list(zip(name[first].tolist(), leaf[first].tolist(), shape[first].tolist(), strict=True))
    del leaf, shape, name
    count = np.bincount(group, minlength=len(first)).tolist()
    ns = sums.by_group(group, events.gpu.dur[rows], len(first)).tolist()
    del group
    found = [_one(events, *key) for key in keys]
    return GemmKernels(
        count,
        ns,
        [key[0] for key in keys],
        [o[0] for o in found],
        [o[1] for o in found],
        [o[2] for o in found],
        [o[3] for o in found],
    )


def _one(
    events: TraceEvents, name: int, leaf: int, shape: int
) -> tuple[str | None, bool, OpGemm | None, str | None]:
    op = events.names[leaf] if leaf != NO_OP else None
    gemm = None
    if op is not None and shape != NO_SHAPE:
        dims, types, _ = events.shapes[shape]
        gemm = op_gemm(op, dims, types)
    by_name = kernel_precision(events.names[name])
    if gemm is not None and gemm.precision is not None:
        if gemm.precision == "fp32" and by_name not in (None, "fp32", "fp64"):
            return by_name, False, gemm, op  # fp32 inputs the kernel runs in TF32 / bf16 / …
        return gemm.precision, True, gemm, op
    return by_name, False, gemm, op


def padded(size: int, multiple: int) -> int:
    """``size`` rounded up to a multiple of ``multiple``."""
    return -(-size // multiple) * multiple

"""FLOPs and bytes of one operator call from its Input Dims, Input type and Concrete Inputs.

Only the definitions of docs/metrics.md ("FLOPs and bytes of an op call"): GEMMs (mm, addmm,
bmm, baddbmm, linear, matmul), attention (scaled_dot_product_attention and its flash /
efficient / cudnn variants, flash_attn forward) and convolutions whose stride, padding and
dilation the trace gives. Anything else, or shapes that do not fit, is unknown (None): a
figure is never guessed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from traceview.analyses.core.gemm_facts import OP_PRECISION

# Bytes per element, by the type name kineto writes.
ELEMENT_SIZE = {
    "double": 8,
    "float": 4,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "long int": 8,
    "long": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
}
# The peak-table column a computation in that type runs at (fp32 GEMMs: fp32, not tf32).
PEAK_DTYPE = OP_PRECISION

Dims = list[list[int]]


@dataclass(frozen=True)
class Work:
    """What one call computes: FLOPs, bytes moved (inputs + output), the dtype of its inputs
    (as kineto names it) and the kind of op (gemm, attention, convolution)."""

    flops: int
    bytes: int
    dtype: str
    kind: str


def op_work(name: str, dims_text: bytes, types_text: bytes, concrete_text: bytes) -> Work | None:
    """The Work of a call of op ``name`` with these raw shape fields, or None if unknown."""
    return _applied(_RULES.get(name), dims_text, types_text, concrete_text)


def model_work(name: str, dims_text: bytes, types_text: bytes, concrete_text: bytes) -> Work | None:
    """The Work of a call at the model-FLOPs convention (docs/metrics.md "Model FLOPs"):
    GEMMs and convolutions as ``op_work``; attention dense (4·B·H·S_q·S_kv·D forward, no
    causal discount, backward 2× forward); convolution backward 2× forward. None if unknown."""
    return _applied(_MODEL_RULES.get(name), dims_text, types_text, concrete_text)


def _applied(
    rule: Callable[[Dims, list[str], Any], Work] | None,
    dims_text: bytes,
    types_text: bytes,
    concrete_text: bytes,
) -> Work | None:
    """``rule`` on the parsed shape fields; None without a rule or for shapes that do not fit."""
    if rule is None:
        return None
    try:
        dims, types = json.loads(dims_text), json.loads(types_text) if types_text else []
        concrete = json.loads(concrete_text) if concrete_text else None
    except (ValueError, UnicodeDecodeError):
        return None
    if not _well_formed(dims, types):
        return None
    try:
        return rule(dims, types, concrete)
    except (IndexError, TypeError, ValueError):  # shapes that do not fit the op
        return None


def model_rule_names() -> frozenset[str]:
    """The op names whose model FLOPs are defined."""
    return frozenset(_MODEL_RULES)


def rule_names() -> frozenset[str]:
    """The op names whose FLOPs and bytes are defined."""
    return frozenset(_RULES)


def _well_formed(dims: Any, types: Any) -> bool:
    return (
        isinstance(dims, list)
        and isinstance(types, list)
        and all(isinstance(d, list) and all(_is_size(x) for x in d) for d in dims)
        and all(isinstance(t, str) for t in types)
    )


def _is_size(x: Any) -> bool:
    return type(x) is int and x >= 0


def _size(types: Sequence[str], i: int) -> int:
    """Bytes per element of input ``i``; ValueError when its type is not a known one."""
    size = ELEMENT_SIZE.get(types[i]) if i < len(types) else None
    if size is None:
        raise ValueError
    return size


def _gemm(batch: int, m: int, n: int, k: int, types: Sequence[str], a: int, b: int) -> Work:
    """2·B·M·N·K FLOPs; bytes (B·MK·size_a + B·KN·size_b + B·MN·size_a)."""
    sa, sb = _size(types, a), _size(types, b)
    moved = batch * (m * k * sa + k * n * sb + m * n * sa)
    return Work(2 * batch * m * n * k, moved, types[a], "gemm")


def _mm(dims: Dims, types: list[str], concrete: Any) -> Work:
    (m, k), (k2, n) = dims[0], dims[1]
    _same(k, k2)
    return _gemm(1, m, n, k, types, 0, 1)


def _addmm(dims: Dims, types: list[str], concrete: Any) -> Work:
    (m, k), (k2, n) = dims[1], dims[2]
    _same(k, k2)
    work = _gemm(1, m, n, k, types, 1, 2)
    return _plus_bytes(work, math.prod(dims[0]) * _size(types, 0))


def _bmm(dims: Dims, types: list[str], concrete: Any) -> Work:
    (b, m, k), (b2, k2, n) = dims[0], dims[1]
    _same(k, k2)
    _same(b, b2)
    return _gemm(b, m, n, k, types, 0, 1)


def _baddbmm(dims: Dims, types: list[str], concrete: Any) -> Work:
    (b, m, k), (b2, k2, n) = dims[1], dims[2]
    _same(k, k2)
    _same(b, b2)
    work = _gemm(b, m, n, k, types, 1, 2)
    return _plus_bytes(work, math.prod(dims[0]) * _size(types, 0))


def _linear(dims: Dims, types: list[str], concrete: Any) -> Work:
    """input [..., K], weight [N, K], bias [N] or absent: M = the product of input[:-1]."""
    x, (n, k) = dims[0], dims[1]
    _same(x[-1], k)
    work = _gemm(1, math.prod(x[:-1]), n, k, types, 0, 1)
    if len(dims) > 2 and dims[2]:
        work = _plus_bytes(work, math.prod(dims[2]) * _size(types, 2))
    return work


def _matmul(dims: Dims, types: list[str], concrete: Any) -> Work:
    """torch.matmul: 1-D operands as a row / column, batch dimensions broadcast."""
    a, b = dims[0], dims[1]
    if not a or not b:
        raise ValueError
    a2 = [1, a[0]] if len(a) == 1 else a
    b2 = [b[0], 1] if len(b) == 1 else b
    (m, k), (k2, n) = a2[-2:], b2[-2:]
    _same(k, k2)
    batch_a, batch_b = a2[:-2], b2[:-2]
    batch = math.prod(_broadcast(batch_a, batch_b))
    sa, sb = _size(types, 0), _size(types, 1)
    moved = math.prod(batch_a) * m * k * sa + math.prod(batch_b) * k * n * sb + batch * m * n * sa
    return Work(2 * batch * m * n * k, moved, types[0], "gemm")


def _broadcast(a: list[int], b: list[int]) -> list[int]:
    """Broadcast two batch shapes (ValueError when they do not broadcast)."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise ValueError
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return out


def _attention(heads_first: bool, causal_at: int) -> Callable[[Dims, list[str], Any], Work]:
    """Attention over q, k, v laid out [B, H, N, d] (``heads_first``) or [B, N, H, d];
    ``causal_at``: the position of the is_causal argument in Concrete Inputs."""

    def rule(dims: Dims, types: list[str], concrete: Any) -> Work:
        q, k, v = dims[0], dims[1], dims[2]
        if not (len(q) == len(k) == len(v) == 4):
            raise ValueError
        causal = _flag(concrete, causal_at)
        if heads_first:
            (b, h, nq, d), nkv = q, k[2]
        else:
            (b, nq, h, d), nkv = q, k[1]
        flops = 4 * b * h * nq * nkv * d
        flops = flops // 2 if causal else flops
        size = _size(types, 0)
        out = math.prod(q[:-1]) * v[-1]
        moved = (math.prod(q) + math.prod(k) + math.prod(v) + out) * size
        return Work(flops, moved, types[0], "attention")

    return rule


def _dense_attention(
    heads_first: bool, q_at: int, times: int
) -> Callable[[Dims, list[str], Any], Work]:
    """Attention at the dense convention: q, k, v at ``q_at``… laid out [B, H, N, d]
    (``heads_first``) or [B, N, H, d]; ``times`` × 4·B·H·N_q·N_kv·d (2 for a backward)."""

    def rule(dims: Dims, types: list[str], concrete: Any) -> Work:
        q, k, v = dims[q_at], dims[q_at + 1], dims[q_at + 2]
        if not (len(q) == len(k) == len(v) == 4):
            raise ValueError
        if heads_first:
            (b, h, nq, d), nkv = q, k[2]
        else:
            (b, nq, h, d), nkv = q, k[1]
        size = _size(types, q_at)
        out = math.prod(q[:-1]) * v[-1]
        moved = (math.prod(q) + math.prod(k) + math.prod(v) + out) * size
        return Work(times * 4 * b * h * nq * nkv * d, moved, types[q_at], "attention")

    return rule


def _convolution_backward(dims: Dims, types: list[str], concrete: Any) -> Work:
    """``aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
    dilation, transposed, output_padding, groups, output_mask)``: 2× the forward's FLOPs."""
    if not isinstance(concrete, list):
        raise ValueError
    # as aten::convolution's (input, weight, bias, stride, padding, dilation, transposed,
    # output_padding, groups)
    as_forward = ["", "", "", *concrete[4:10]]
    forward = _convolution(3, 4, 5, 8, 6)([dims[1], dims[2]], types[1:3], as_forward)
    return Work(2 * forward.flops, forward.bytes, forward.dtype, forward.kind)


def _convolution(
    stride_at: int, padding_at: int, dilation_at: int, groups_at: int, transposed_at: int | None
) -> Callable[[Dims, list[str], Any], Work]:
    """A convolution over input [N, C, *spatial] and weight [K, C/groups, *kernel], with
    stride, padding, dilation and groups at these positions of Concrete Inputs."""

    def rule(dims: Dims, types: list[str], concrete: Any) -> Work:
        x, w = dims[0], dims[1]
        spatial = len(x) - 2
        if spatial < 1 or len(w) != len(x) or not isinstance(concrete, list):
            raise ValueError
        if transposed_at is not None and _flag(concrete, transposed_at):
            raise ValueError  # transposed convolutions: not defined here
        stride = _ints(concrete[stride_at], spatial)
        padding = _ints(concrete[padding_at], spatial)
        dilation = _ints(concrete[dilation_at], spatial)
        groups = int(concrete[groups_at])
        if groups < 1 or x[1] != w[1] * groups or min(stride) < 1:
            raise ValueError
        out = [
            (size + 2 * p - dl * (kern - 1) - 1) // s + 1
            for size, p, dl, kern, s in zip(x[2:], padding, dilation, w[2:], stride, strict=True)
        ]
        if min(out) < 1:
            raise ValueError
        n, k = x[0], w[0]
        flops = 2 * n * k * w[1] * math.prod(w[2:]) * math.prod(out)
        size = _size(types, 0)
        moved = (math.prod(x) + math.prod(w) + n * k * math.prod(out)) * size
        if len(dims) > 2 and dims[2]:
            moved += math.prod(dims[2]) * _size(types, 2)
        return Work(flops, moved, types[0], "convolution")

    return rule


def _ints(text: Any, n: int) -> list[int]:
    """A Concrete Inputs int list ('[1, 1]'), one int repeated, as n ints."""
    value = json.loads(text) if isinstance(text, str) else text
    values = value if isinstance(value, list) else [value]
    if len(values) == 1:
        values = values * n
    if len(values) != n or not all(type(v) is int and v >= 0 for v in values):
        raise ValueError
    return values


def _flag(concrete: Any, at: int) -> bool:
    """A boolean from Concrete Inputs ('True' / 'False'); ValueError when the trace does not say."""
    if not isinstance(concrete, list) or at >= len(concrete) or concrete[at] not in _FLAGS:
        raise ValueError
    return _FLAGS[concrete[at]]


_FLAGS = {"True": True, "False": False, "true": True, "false": False, "1": True, "0": False}


def _same(a: int, b: int) -> None:
    if a != b:
        raise ValueError


def _plus_bytes(work: Work, extra: int) -> Work:
    return Work(work.flops, work.bytes + extra, work.dtype, work.kind)


_RULES: dict[str, Callable[[Dims, list[str], Any], Work]] = {
    "aten::mm": _mm,
    "aten::addmm": _addmm,
    "aten::bmm": _bmm,
    "aten::baddbmm": _baddbmm,
    "aten::linear": _linear,
    "aten::matmul": _matmul,
    # (query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
    "aten::scaled_dot_product_attention": _attention(True, 5),
    # (query, key, value, dropout_p, is_causal, return_debug_mask, scale)
    "aten::_scaled_dot_product_flash_attention": _attention(True, 4),
    # (query, key, value, attn_bias, compute_log_sumexp, dropout_p, is_causal, scale)
    "aten::_scaled_dot_product_efficient_attention": _attention(True, 6),
    # (query, key, value, attn_bias, compute_log_sumexp, dropout_p, is_causal, ...)
    "aten::_scaled_dot_product_cudnn_attention": _attention(True, 6),
    # (query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal, ...),
    # query [B, N, H, d]
    "aten::_flash_attention_forward": _attention(False, 8),
    # (query, key, value, bias, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
    # dropout_p, custom_mask_type (0 none, 1 causal), ...), query [B, N, H, d]
    "aten::_efficient_attention_forward": _attention(False, 9),
    # flash-attn 2: (q, k, v, dropout_p, softmax_scale, causal, ...), q [B, N, H, d]
    "flash_attn::_flash_attn_forward": _attention(False, 5),
    # (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    "aten::convolution": _convolution(3, 4, 5, 8, 6),
    "aten::_convolution": _convolution(3, 4, 5, 8, 6),
    # (input, weight, bias, stride, padding, dilation, groups)
    "aten::conv1d": _convolution(3, 4, 5, 6, None),
    "aten::conv2d": _convolution(3, 4, 5, 6, None),
    "aten::conv3d": _convolution(3, 4, 5, 6, None),
    # (input, weight, bias, padding, stride, dilation, groups, ...)
    "aten::miopen_convolution": _convolution(4, 3, 5, 6, None),
    # (input, weight, padding, stride, dilation, groups, ...): no bias
    "aten::cudnn_convolution": _convolution(3, 2, 4, 5, None),
}

_HEADS_FIRST_FORWARD = (
    "aten::scaled_dot_product_attention",
    "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention",
    "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_fused_attention_overrideable",
    "aten::_scaled_dot_product_flash_attention_for_cpu",
    "aten::_cudnn_attention_forward",
)
_SEQ_FIRST_FORWARD = (
    "aten::_flash_attention_forward",
    "aten::_efficient_attention_forward",
    "flash_attn::_flash_attn_forward",
    "flash_attn::_flash_attn_varlen_forward",
)
# Backward ops: (grad_out, query, key, value, ...), query at 1.
_HEADS_FIRST_BACKWARD = (
    "aten::_scaled_dot_product_flash_attention_backward",
    "aten::_scaled_dot_product_efficient_attention_backward",
    "aten::_scaled_dot_product_cudnn_attention_backward",
    "aten::_scaled_dot_product_fused_attention_overrideable_backward",
    "aten::_cudnn_attention_backward",
)
_SEQ_FIRST_BACKWARD = (
    "aten::_flash_attention_backward",
    "aten::_efficient_attention_backward",
    "flash_attn::_flash_attn_backward",
    "flash_attn::_flash_attn_varlen_backward",
)
_MODEL_RULES: dict[str, Callable[[Dims, list[str], Any], Work]] = {
    **{n: r for n, r in _RULES.items() if n.startswith("aten::") and "attention" not in n},
    **dict.fromkeys(_HEADS_FIRST_FORWARD, _dense_attention(True, 0, 1)),
    **dict.fromkeys(_SEQ_FIRST_FORWARD, _dense_attention(False, 0, 1)),
    **dict.fromkeys(_HEADS_FIRST_BACKWARD, _dense_attention(True, 1, 2)),
    **dict.fromkeys(_SEQ_FIRST_BACKWARD, _dense_attention(False, 1, 2)),
    "aten::convolution_backward": _convolution_backward,
}

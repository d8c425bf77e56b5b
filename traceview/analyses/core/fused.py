"""The ops a Triton kernel of TorchInductor says it fused: Inductor names a kernel
``triton_<kind>_fused_<op>_<op>…_<n>`` (kind ``poi`` pointwise, ``red`` reduction, ``per``
persistent reduction, ``tem`` template) from the aten ops of the graph nodes it fused, sorted
and joined by ``_`` (docs/metrics.md, "Fused ops"). Op names hold underscores themselves
(``native_layer_norm``, ``_to_copy``), so the name is read token by token, the longest known
aten name first."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from traceview.aggregate.order import dense_ids, positions_where
from traceview.analyses.core.oplinks import OpLinks, ops_around
from traceview.columns.model import TraceEvents

TRITON_KERNEL = re.compile(r"^triton_(?:poi|red|per|tem)_fused(?P<ops>_.*)?$")
_INDEX = re.compile(r"_\d+$")

# aten (and Inductor prims) op names of more than one ``_``-token that Inductor's names carry;
# an op of one token needs no entry. The longest match wins: ``native_layer_norm_backward``
# before ``native_layer_norm``.
KNOWN_OPS = frozenset(
    {
        "_to_copy", "_unsafe_view", "_softmax", "_log_softmax", "_softmax_backward_data",
        "_log_softmax_backward_data", "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward",
        "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
        "_native_batch_norm_legit_no_training", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
        "_fused_rms_norm", "_weight_norm_interface",
        "native_layer_norm", "native_layer_norm_backward", "native_batch_norm",
        "native_batch_norm_backward", "native_group_norm", "native_group_norm_backward",
        "native_dropout", "native_dropout_backward", "threshold_backward", "gelu_backward",
        "silu_backward", "sigmoid_backward", "tanh_backward", "hardtanh_backward",
        "leaky_relu_backward", "elu_backward", "softplus_backward", "mish_backward",
        "hardswish_backward", "hardsigmoid_backward", "select_backward", "slice_backward",
        "index_select_backward", "embedding_dense_backward", "avg_pool2d_backward",
        "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "avg_pool2d",
        "convolution_backward", "nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward",
        "nll_loss2d_backward", "mse_loss", "mse_loss_backward", "binary_cross_entropy",
        "index_select", "index_put", "index_add", "index_copy", "scatter_add", "scatter_reduce",
        "masked_fill", "masked_scatter", "constant_pad_nd", "reflection_pad2d", "split_with_sizes",
        "as_strided", "as_strided_scatter", "select_scatter", "slice_scatter", "diagonal_scatter",
        "scalar_tensor", "full_like", "zeros_like", "ones_like", "empty_like", "new_zeros",
        "new_ones", "new_empty", "new_full", "bitwise_and", "bitwise_or", "bitwise_not",
        "bitwise_xor", "logical_and", "logical_or", "logical_not", "logical_xor", "clamp_min",
        "clamp_max", "var_mean", "upsample_nearest2d", "upsample_bilinear2d",
        "upsample_nearest2d_backward", "upsample_bilinear2d_backward", "grid_sampler_2d",
        "convert_element_type", "inductor_random", "inductor_seeds", "inductor_lookup_seed",
        "_fused_moving_avg_obs_fq_helper", "rand_like",
        "randn_like", "apply_rotary_pos_emb", "_foreach_add", "_foreach_mul",
        "topk", "cumsum", "logsumexp", "log1p", "expm1", "bucketize",
    }
)  # fmt: skip


def _by_first_token() -> dict[str, list[tuple[str, ...]]]:
    """KNOWN_OPS as tokens, by their first token, longest first."""
    out: dict[str, list[tuple[str, ...]]] = {}
    for op in KNOWN_OPS:
        tokens = tuple(_tokens(op))
        out.setdefault(tokens[0], []).append(tokens)
    for found in out.values():
        found.sort(key=lambda t: (-len(t), t))
    return out


def fused_ops(name: str) -> tuple[str, ...] | None:
    """The ops an Inductor Triton kernel's name says it fused, in the name's order, each once;
    None for a name that is not such a kernel's."""
    return _fused_ops(name) if name.startswith("triton_") else None  # most names: no look-up


@lru_cache(maxsize=4096)
def _fused_ops(name: str) -> tuple[str, ...] | None:
    found = TRITON_KERNEL.match(name)
    if found is None:
        return None
    tokens = _tokens(_INDEX.sub("", found["ops"] or "").removeprefix("_"))
    ops: list[str] = []
    i = 0
    while i < len(tokens):
        size = next(
            (len(t) for t in _BY_FIRST.get(tokens[i], ()) if tuple(tokens[i : i + len(t)]) == t),
            1,
        )
        op = "_".join(tokens[i : i + size])
        if op not in ops:
            ops.append(op)
        i += size
    return tuple(ops)


def _tokens(text: str) -> list[str]:
    """``_to_copy_add`` → ``["_to", "copy", "add"]``: an empty token (a double ``_``) marks
    the leading underscore of the next op."""
    out: list[str] = []
    lead = False
    for token in text.split("_"):
        if not token:
            lead = True
            continue
        out.append("_" + token if lead else token)
        lead = False
    return out


_BY_FIRST = _by_first_token()
NO_OP_LABEL = "(no op)"


@dataclass(frozen=True)
class FusedOpShares:
    """Kernels split among the ops they ran: ``label[i]`` is the op of pair i, ``row[i]``
    its kernel (an index into the rows asked for), ``share[i]`` its part of the kernel's
    duration (ns; a kernel's shares add up to its duration exactly)."""

    labels: list[str]
    row: np.ndarray
    label: np.ndarray
    share: np.ndarray


def op_label(name: str) -> str:
    """An op's name as fused kernels spell it: ``aten::native_layer_norm`` →
    ``native_layer_norm``, an in-place op as its functional form (``aten::add_`` → ``add``:
    Inductor names none in place); other namespaces kept."""
    if name.startswith("aten::"):
        name = name.removeprefix("aten::")
        return name[:-1] if name.endswith("_") and not name.endswith("__") else name
    return name


# Ops eager PyTorch runs as the implementation of the op that called them, which Inductor's
# names call by the caller's name: the copy of ``aten::_to_copy`` (a cast) or of
# ``aten::clone``, the ``clamp_min`` of ``aten::relu``, the ``fill_`` of ``aten::zero_``.
IMPLEMENTATION_OPS = frozenset({"aten::copy_", "aten::clamp_min", "aten::fill_"})


def fusion_leaf(events: TraceEvents, links: OpLinks, rows: np.ndarray) -> np.ndarray:
    """The leaf op of each of ``rows`` as fused-op grouping takes it: its leaf op, or where
    that is one of IMPLEMENTATION_OPS called by another op, the innermost such caller (name
    ids; < 0 for none)."""
    leaf: np.ndarray = links.leaf[rows]
    skip = np.array([n in IMPLEMENTATION_OPS for n in events.names] + [False])
    inner = positions_where(skip[np.where(leaf < 0, len(events.names), leaf)])
    if len(inner) == 0:
        return leaf
    at = rows[inner]
    caller = ops_around(events, links.thread[at], links.launch[at], skip)
    leaf = leaf.copy()
    leaf[inner] = np.where(caller >= 0, caller, leaf[inner])
    return leaf


def fused_op_shares(events: TraceEvents, rows: np.ndarray, leaf: np.ndarray) -> FusedOpShares:
    """The GPU ``rows`` by op: a Triton kernel whose name says which ops it fused is shared
    equally among them (the remainder's ns to the first ones); any other row goes wholly to
    its launching op (``leaf``: its leaf op name id per row, < 0 for none). The pairs are
    made a pass of rows at a time into their arrays (rows and labels int32 where they fit):
    only those are pair-sized."""
    names = events.names
    used, inverse = dense_ids(events.gpu.name[rows], len(names), narrow=True)
    labels: dict[str, int] = {}
    flat: list[int] = []
    start, size = [], []
    for name in used.tolist():
        ops = fused_ops(names[name]) or ()
        start.append(len(flat))
        size.append(len(ops))
        flat += [labels.setdefault(op, len(labels)) for op in ops]
    op_used, op_inverse = dense_ids(
        np.where(leaf < 0, len(names), leaf), len(names) + 1, narrow=True
    )
    of_op = np.array(
        [labels.setdefault(NO_OP_LABEL if i == len(names) else op_label(names[i]), len(labels))
         for i in op_used.tolist()],
        dtype=np.int64,
    )  # fmt: skip
    size_of = np.array(size, dtype=np.int64)
    start_of = np.array(start, dtype=np.int64)
    fused_label = np.array(flat or [0], dtype=np.int64)
    parts_of = np.maximum(size_of, 1)  # a row's pairs, by its name
    pairs = sum(int(parts_of[inverse[lo : lo + _PASS]].sum()) for lo in range(0, len(rows), _PASS))
    row = np.empty(pairs, dtype=np.int32 if len(rows) < 2**31 else np.int64)
    label = np.empty(pairs, dtype=np.int32 if len(labels) < 2**31 else np.int64)
    share = np.empty(pairs, dtype=np.int64)
    dur_of, done = events.gpu.dur, 0
    for lo in range(0, len(rows), _PASS):
        name = inverse[lo : lo + _PASS]
        n = parts_of[name]
        local = np.repeat(np.arange(len(name)), n)  # each pair's row in the pass
        pos = np.arange(len(local)) - np.repeat(np.cumsum(n) - n, n)
        at = start_of[name][local] + pos
        fused = fused_label[np.minimum(at, max(len(flat) - 1, 0))]
        by_op = of_op[op_inverse[lo : lo + _PASS]][local]
        upto = done + len(local)
        label[done:upto] = np.where(size_of[name][local] > 0, fused, by_op)
        row[done:upto] = local + lo
        dur, parts = dur_of[rows[lo : lo + _PASS]][local], n[local]
        share[done:upto] = dur // parts + (pos < dur % parts)
        done = upto
    return FusedOpShares(list(labels), row, label, share)


_PASS = 1 << 16  # rows a pass


COMPILED_REGION = "(torch.compile region)"
# The ops torch.compile records around the work it compiled: Inductor's per-kernel ranges
# (``triton_…``), its graph call, Dynamo's region and the compiled autograd functions.
_COMPILED = re.compile(
    r"^(?:triton_\w+|## Call CompiledFxGraph .*|Torch-Compiled Region: .*"
    r"|CompiledFunction(?:Backward)?)$"
)


def launching_op(name: str) -> str:
    """The op a kernel is compared under: its launching op, or COMPILED_REGION for every op
    that torch.compile itself records (a compiled region is one op, whatever it fused)."""
    return COMPILED_REGION if _COMPILED.match(name) else name


def op_groups(
    events: TraceEvents, rows: np.ndarray, leaf: np.ndarray
) -> tuple[list[str], np.ndarray]:
    """Labels (launching ops, ``(no op)``) and each of ``rows``' group (``leaf``: its leaf
    op name id per row, < 0 for none)."""
    names = events.names
    used, group = dense_ids(np.where(leaf < 0, len(names), leaf), len(names) + 1, narrow=True)
    labels: dict[str, int] = {}
    of_used = np.array(
        [labels.setdefault(NO_OP_LABEL if i == len(names) else launching_op(names[i]), len(labels))
         for i in used.tolist()],
        dtype=np.int32 if len(used) < 2**31 else np.int64,
    )  # fmt: skip
    return list(labels), of_used[group]

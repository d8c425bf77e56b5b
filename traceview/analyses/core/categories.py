"""Kernel categories: which part of the model a GPU activity belongs to.

Decided in this order (docs/metrics.md "Kernel categories"):
1. memcpy and memset activities are ``memcpy`` / ``memset`` (by their trace category);
2. a kernel whose launching (leaf) op is in OP_RULES takes that op's category — a kernel launched
   by ``aten::mm`` is a GEMM whatever its name, one launched by ``aten::_fused_adamw_`` or a
   ``_foreach_*`` op is ``optimizer``;
3. else a kernel launched inside an ``Optimizer.step#…`` annotation is ``optimizer``;
4. else the first of NAME_RULES whose pattern matches the kernel name's words (``words``);
5. else ``other``.
Every activity gets exactly one category, so category times add up to the total exactly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from traceview.aggregate.order import distinct, present
from traceview.columns.cpu_rows import ANNOTATION, ROW, Windows
from traceview.columns.model import TraceEvents
from traceview.columns.schema import KERNEL, MEMCPY, MEMSET

if TYPE_CHECKING:
    from traceview.analyses.core.oplinks import OpLinks

# (category, regular expression on the kernel name's words); the first match wins. Each pattern
# matches whole words (it is wrapped in \b…\b): ``lamb`` is not ``lambda``, ``conv`` not
# ``convert``; ``[a-z]*`` spells a word's other letters.
NAME_RULES: tuple[tuple[str, str], ...] = (
    (
        "communication",
        r"(nccl|rccl|hccl)[a-z]*|all ?reduce|all ?gather|reduce ?scatter|all ?to ?all",
    ),
    ("triton pointwise", r"^triton poi"),
    ("triton reduction", r"^triton red"),
    ("triton persistent", r"^triton per"),
    ("triton template", r"^triton tem"),
    ("triton", r"^triton"),
    ("attention", r"flash|fmha|[a-z]*attention|attn|sdpa|mha|paged ?kv"),
    (
        "convolution",
        r"conv|convolution|convolve|implicit ?gemm|igemm|winograd|scudnn|dgrad|wgrad|fprop"
        r"|cask cudnn",
    ),
    (
        "gemm",
        r"(?!fbgemm)[a-z]*gemm[a-z]*|[a-z]*gemv[a-z]*|cutlass|cublas[a-z]*|nvjet|cijk|xmma|matmul|wgmma"
        r"|split ?k ?reduce|^bmm",
    ),
    ("embedding", r"embedding[a-z]*|embs|linearize index|bounds check indices"),
    ("optimizer", r"multi tensor apply|adam[a-z]*|adagrad|sgd|lamb|fused optim[a-z]*"),
    ("reduction", r"reduce kernel"),
    ("normalization", r"[a-z]*norm|bn fw|bn bw|gamma ?beta|rowwise ?moments"),
    ("softmax", r"[a-z]*softmax|soft max"),
    ("pooling", r"[a-z]*pool|pooling"),
    ("reduction", r"reduc[a-z]*|cub|scan|radix ?sort|argmax|argmin|top ?k|sum kernel"),
    (
        "elementwise",
        r"elementwise|unrolled|vectorized|copy|fill|functor|act and mul|transpose|permute"
        r"|nchw ?to ?nhwc|nhwc ?to ?nchw|scale ?packed|sub ?tensor ?op|rotary|kv ?cache"
        r"|cat ?array|dropout",
    ),
)
# (category, regular expression on the launching op's name); the first match wins.
OP_RULES: tuple[tuple[str, str], ...] = (
    ("communication", r"^(c10d::|nccl:|record_param_comms)"),
    (
        "attention",
        r"^aten::(_?scaled_dot_product|_flash_attention|_efficient_attention|_cudnn_attention)",
    ),
    ("convolution", r"^aten::(_?convolution|conv\dd|cudnn_convolution|miopen_convolution)"),
    ("gemm", r"^aten::(mm|addmm|bmm|baddbmm|matmul|linear|_scaled_mm|addmv|mv|dot)$"),
    ("normalization", r"^aten::(native_|cudnn_|_fused_)?(layer|batch|group|rms)_norm"),
    ("softmax", r"^aten::(_?log_)?_?softmax"),
    ("elementwise", r"^aten::_foreach_copy_$"),  # CUDA graphs' input copies, not a step
    ("optimizer", r"^aten::(_foreach_|_fused_(adam|adamw|sgd|adagrad)_|_amp_foreach_)"),
    ("embedding", r"^aten::(embedding|_embedding_bag|embedding_bag|embedding_dense_backward)"),
)
# The annotation torch.optim records around ``optimizer.step()``.
OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")
CATEGORIES = (
    "communication", "attention", "gemm", "convolution", "normalization", "softmax",
    "reduction", "pooling", "embedding", "elementwise", "triton pointwise", "triton reduction",
    "triton persistent", "triton template", "triton", "optimizer", "memcpy", "memset", "other",
)  # fmt: skip
# The Triton family: kernels Triton compiled (TorchInductor's ``triton_<kind>_…``, other
# ``triton_…``), whose names say which ops they fused (analyses.core.fused).
TRITON_FAMILY = tuple(c for c in CATEGORIES if c.startswith("triton"))
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_NOT_LETTERS = re.compile(r"[^a-z]+")
_NAME = [(category, re.compile(rf"\b(?:{pattern})\b")) for category, pattern in NAME_RULES]
_OP = [(category, re.compile(pattern)) for category, pattern in OP_RULES]


def words(name: str) -> str:
    """A kernel name as lower-case words, one space apart: split at every character that is not
    a letter and where a lower-case letter meets an upper-case one (``cublasGemmSmallNParams``
    → ``cublas gemm small nparams``, ``s1688gemm_bf16`` → ``s gemm bf``)."""
    return _NOT_LETTERS.sub(" ", _CAMEL.sub(" ", name).lower()).strip()


def by_name(name: str) -> str:
    """The category of a kernel from its name alone."""
    text = words(name)
    for category, pattern in _NAME:
        if pattern.search(text):
            return category
    return "other"


def by_op(op: str) -> str | None:
    """The category a launching op imposes on its kernels, if any."""
    for category, pattern in _OP:
        if pattern.search(op):
            return category
    return None


def categorize(
    events: TraceEvents,
    links: OpLinks | None = None,
    spans: np.ndarray | None = None,
    dtype: type[np.integer[Any]] = np.int64,
) -> np.ndarray:
    """Per GPU row, the index of its category in CATEGORIES. ``links``: the rows' op links
    (analyses.oplinks), or None when ops are not linked (name rules only); ``spans``: the
    ``optimizer_spans`` when a caller gathered them in a pass of its own; ``dtype``: of the
    result (np.int8 holds every index). A pass of rows at a time: the result is the only
    row-sized array."""
    gpu = events.gpu
    index = {c: i for i, c in enumerate(CATEGORIES)}
    names = len(events.names)
    of_name = np.zeros(names, dtype=np.int8)
    for i in present(gpu.name, names).tolist():  # the GPU rows' names only: no CPU op's
        of_name[i] = index[by_name(events.names[i])]
    n = len(gpu.ts)
    out = np.empty(n, dtype=dtype)
    imposed = stepped = None
    if links is not None and n:
        imposed = np.full(names + 1, -1, dtype=np.int8)  # the last: no op
        for op in present(links.leaf, names).tolist():
            category = by_op(events.names[op])
            imposed[op] = -1 if category is None else index[category]
        stepped = OptimizerSteps(links, spans if spans is not None else _spans_of(events))
    for lo in range(0, n, _PASS):
        at = slice(lo, lo + _PASS)
        part = of_name[gpu.name[at]]
        kind = gpu.kind[at]
        if imposed is not None and stepped is not None:
            assert links is not None
            leaf = links.leaf[at]
            kernel = kind == KERNEL
            chosen = np.where((leaf >= 0) & kernel, imposed[np.maximum(leaf, 0)], -1)
            within = kernel & (chosen < 0)
            within &= stepped.hits(at)
            chosen[within] = index["optimizer"]
            part = np.where(chosen >= 0, chosen, part)
        part[kind == MEMCPY] = index["memcpy"]
        part[kind == MEMSET] = index["memset"]
        out[at] = part
    return out


_PASS = 1 << 16  # GPU rows a pass


def optimizer_step_names(names: Sequence[str]) -> np.ndarray:
    """Mask per name id (one more, False, at the end): an ``Optimizer.step#…`` name."""
    return np.array([bool(OPTIMIZER_STEP.match(n)) for n in names] + [False])


def optimizer_spans(block: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The ``Optimizer.step#…`` annotations of a block of CPU rows (``wanted``:
    ``optimizer_step_names``)."""
    picked: np.ndarray = block[(block["correlation"] == ANNOTATION) & wanted[block["name"]]]
    return picked


def _spans_of(events: TraceEvents) -> np.ndarray:
    """The ``Optimizer.step#…`` annotations of the CPU rows, in a pass of its own."""
    wanted = optimizer_step_names(events.names)
    if not wanted.any() or len(events.cpu) == 0:
        return np.zeros(0, dtype=ROW)
    parts = [optimizer_spans(block, wanted) for block in events.cpu.blocks()]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=ROW)


class OptimizerSteps:
    """The ``Optimizer.step#…`` annotations by thread, each thread's merged, asked a slice
    of GPU rows at a time whether their launch lies in one on their launch's thread."""

    def __init__(self, links: OpLinks, spans: np.ndarray) -> None:
        self.links = links
        thread = spans["thread"]
        self.windows = {
            t: Windows.union_of(spans["ts"][thread == t], spans["end"][thread == t])
            for t in distinct(thread).tolist()  # a thread or two
        }

    def hits(self, at: slice) -> np.ndarray:
        """Mask over the rows of ``at``."""
        thread = self.links.thread[at]
        out = np.zeros(len(thread), dtype=bool)
        for t, windows in self.windows.items():
            rows = np.flatnonzero(thread == t)
            if len(rows):
                launch = self.links.launch[at][rows]
                out[rows] = windows.hits(launch, launch)
        return out


__all__ = [
    "CATEGORIES",
    "NAME_RULES",
    "OPTIMIZER_STEP",
    "OP_RULES",
    "TRITON_FAMILY",
    "by_name",
    "by_op",
    "categorize",
    "optimizer_spans",
    "optimizer_step_names",
    "words",
]

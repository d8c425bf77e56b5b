"""Rule-based optimisation hints, each printed with the evidence that fired it.

Every rule is a function of the trace's facts returning a Hint or None; the rules and their
thresholds are documented in docs/hints.md (the ``doc`` field links there).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from traceview.analyses.core.breakdown import Breakdown
from traceview.analyses.core.categories import CATEGORIES
from traceview.analyses.core.cpu_context import GapQuery, cpu_contexts
from traceview.analyses.core.devices import DeviceUsage, GapSet
from traceview.analyses.core.oplinks import NO_OP, OpLinks
from traceview.analyses.memory import HEADROOM_PCT, SLACK_SHARE, MemoryReport
from traceview.columns.model import TraceEvents
from traceview.columns.schema import KERNEL, MEMCPY

if TYPE_CHECKING:
    from traceview.analyses.ops.view import OpRow

DOC = "docs/hints.md"
SHORT_KERNEL_NS = 20_000  # "short kernels": median duration below 20 µs
HOST_WAIT_SHARE = 0.10  # ... with host wait at least 10% of a device's window
EXPOSED_COMM_SHARE = 0.10
FP32_GEMM_SHARE = 0.10
DATALOADER_SHARE = 0.05
LOADER_GAPS = 50  # the CPU context is looked up for this many of the longest cpu-caused gaps
_FP32_GEMM = re.compile(r"sgemm|s1688|s884|f32f32_f32|gemm_f32|_f32_f32", re.IGNORECASE)


@dataclass(frozen=True)
class Hint:
    """What to try (``action``), why (``evidence``: the numbers and names that fired it)."""

    rule: str
    title: str
    evidence: str
    action: str

    @property
    def doc(self) -> str:
        return f"{DOC}#{self.rule}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "title": self.title,
            "evidence": self.evidence,
            "action": self.action,
            "doc": self.doc,
        }


@dataclass(frozen=True)
class Facts:
    """What the rules look at: the trace, each GPU row's op links and category, the devices'
    breakdowns, usage and gaps, and the top operators."""

    events: TraceEvents
    links: OpLinks
    category: np.ndarray
    devices: tuple[Breakdown, ...]
    usage: list[DeviceUsage]
    gaps: GapSet
    ops: Sequence[OpRow]
    memory: MemoryReport | None = None  # the allocator's peaks, when worked out

    def time_of(self, name: str) -> int:
        """GPU time (ns) of the activities in a category."""
        rows = self.category == CATEGORIES.index(name)
        return int(self.events.gpu.dur[rows].sum())

    def leaf_time(self, pattern: str) -> tuple[int, int]:
        """(kernels, GPU time in ns) of the kernels whose leaf op name matches ``pattern``."""
        names = self.events.names
        regex = re.compile(pattern)
        ops = np.array([bool(regex.search(n)) for n in names] + [False], dtype=bool)
        leaf = np.where(self.links.leaf == NO_OP, len(names), self.links.leaf)
        rows = ops[leaf] & (self.events.gpu.kind == KERNEL)
        return int(rows.sum()), int(self.events.gpu.dur[rows].sum())


def evaluate(facts: Facts) -> list[Hint]:
    """Every rule that fires, in the order of RULES."""
    return [hint for rule in RULES if (hint := rule(facts)) is not None]


def _ms(ns: int) -> str:
    return f"{ns / 1e6:,.1f} ms" if ns >= 1_000_000 else f"{ns / 1000:,.1f} µs"


def fused_attention(f: Facts) -> Hint | None:
    """bmm/matmul + softmax kernels and no fused attention kernel."""
    softmax = f.time_of("softmax")
    bmm_kernels, bmm_ns = f.leaf_time(r"^aten::(bmm|baddbmm|matmul)$")
    if f.time_of("attention") > 0 or softmax == 0 or bmm_kernels == 0:
        return None
    return Hint(
        "fused-attention",
        "attention computed as separate matmul + softmax kernels",
        f"{bmm_kernels} kernels launched by aten::bmm/matmul ({_ms(bmm_ns)}) and softmax "
        f"kernels ({_ms(softmax)}), no fused attention kernel",
        "use torch.nn.functional.scaled_dot_product_attention (FlashAttention / "
        "memory-efficient kernels)",
    )


def fused_norm(f: Facts) -> Hint | None:
    """A norm computed by many small kernels: rsqrt with pow/mean/var_mean as separate ops."""
    rsqrt, rsqrt_ns = f.leaf_time(r"^aten::rsqrt$")
    parts, parts_ns = f.leaf_time(r"^aten::(pow|mean|var_mean|var)$")
    if rsqrt == 0 or parts == 0:
        return None
    return Hint(
        "fused-norm",
        "a layer/RMS norm spread over separate elementwise kernels",
        f"aten::rsqrt ({rsqrt} kernels, {_ms(rsqrt_ns)}) with aten::pow/mean/var "
        f"({parts} kernels, {_ms(parts_ns)})",
        "use a fused norm (torch.nn.RMSNorm / LayerNorm, apex or Triton fused norm) or "
        "torch.compile",
    )


def low_precision(f: Facts) -> Hint | None:
    """fp32 GEMM kernels on a GPU with tensor cores (compute capability 7.0 or newer)."""
    major = _compute_major(f.events.header)
    gemm = f.category == CATEGORIES.index("gemm")
    if major is None or major < 7 or not gemm.any():
        return None
    names = f.events.names
    fp32 = np.array([bool(_FP32_GEMM.search(n)) and "tf32" not in n for n in names], dtype=bool)
    rows = gemm & fp32[f.events.gpu.name]
    fp32_ns, gemm_ns = int(f.events.gpu.dur[rows].sum()), int(f.events.gpu.dur[gemm].sum())
    if gemm_ns == 0 or fp32_ns < FP32_GEMM_SHARE * gemm_ns:
        return None
    top = names[int(np.bincount(f.events.gpu.name[rows]).argmax())]
    return Hint(
        "low-precision",
        "fp32 GEMMs on a GPU with tensor cores",
        f"{_ms(fp32_ns)} of {_ms(gemm_ns)} GEMM time in fp32 kernels (e.g. {top}); "
        f"compute capability {major}.x",
        "enable bf16/fp16 autocast (torch.autocast) or TF32 "
        "(torch.backends.cuda.matmul.allow_tf32 = True)",
    )


def cuda_graphs(f: Facts) -> Hint | None:
    """Short kernels and a GPU waiting on the CPU."""
    gpu = f.events.gpu
    kernels = gpu.dur[gpu.kind == KERNEL]
    if len(kernels) == 0:
        return None
    median = int(np.sort(kernels)[(len(kernels) + 1) // 2 - 1])
    waiting = [
        d for d in f.devices if d.window_ns and d.host_wait_ns >= HOST_WAIT_SHARE * d.window_ns
    ]
    if median >= SHORT_KERNEL_NS or not waiting:
        return None
    d = waiting[0]
    return Hint(
        "cuda-graphs",
        "many short kernels and a GPU waiting for the CPU to launch them",
        f"median kernel {_ms(median)}; host wait {_ms(d.host_wait_ns)} = "
        f"{100 * d.host_wait_ns / d.window_ns:.1f}% of device {d.device}'s window",
        'capture the step in CUDA graphs, or torch.compile(mode="reduce-overhead")',
    )


def dataloader(f: Facts) -> Hint | None:
    """Device gaps the CPU held in the data loader."""
    cpu = np.flatnonzero(f.gaps.host_wait > 0)
    if len(cpu) == 0 or len(f.events.cpu) == 0:
        return None
    longest = cpu[np.argsort(-(f.gaps.end - f.gaps.start)[cpu], kind="stable")[:LOADER_GAPS]]
    window = sum(u.window_ns for u in f.usage)
    if int(f.gaps.host_wait[longest].sum()) < DATALOADER_SHARE * window:
        return None  # an op holds a gap for at most its host wait: no need to look (a scan)
    chosen = f.gaps.take(longest)
    contexts = cpu_contexts(
        f.events,
        GapQuery(
            f.events.gpu.correlation[chosen.after],
            f.links.launch[chosen.after],
            chosen.start,
            chosen.end,
            chosen.host_wait,
        ),
    )
    held = sum(c.ops[0].overlap_ns for c in contexts if c.ops and "DataLoader" in c.ops[0].name)
    if window == 0 or held < DATALOADER_SHARE * window:
        return None
    return Hint(
        "dataloader",
        "the GPU waits for the data loader",
        f"the data loader holds {_ms(held)} of device gaps "
        f"({100 * held / window:.1f}% of the devices' windows)",
        "more DataLoader workers (num_workers), pin_memory=True, persistent_workers=True, "
        "prefetch_factor",
    )


def overlap_communication(f: Facts) -> Hint | None:
    """Communication not hidden behind compute."""
    exposed = [
        d for d in f.devices
        if d.window_ns and d.exposed_communication_ns > EXPOSED_COMM_SHARE * d.window_ns
    ]  # fmt: skip
    if not exposed:
        return None
    d = exposed[0]
    return Hint(
        "overlap-communication",
        "communication is not overlapped with compute",
        f"exposed communication {_ms(d.exposed_communication_ns)} = "
        f"{100 * d.exposed_communication_ns / d.window_ns:.1f}% of device {d.device}'s window "
        f"(communication {_ms(d.communication_ns)} in all)",
        "overlap it: DDP/FSDP bucket sizes (bucket_cap_mb), async collectives, "
        "communication on its own stream",
    )


def pinned_memory(f: Facts) -> Hint | None:
    """Host-to-device copies (pageable ones above all)."""
    gpu = f.events.gpu
    names = f.events.names
    htod = np.array(["HtoD" in n or "H2D" in n for n in names], dtype=bool)
    rows = (gpu.kind == MEMCPY) & htod[gpu.name] if len(names) else np.zeros(0, dtype=bool)
    if not rows.any():
        return None
    pageable = np.array(["Pageable" in n for n in names], dtype=bool)[gpu.name] & rows
    return Hint(
        "pinned-memory",
        "host-to-device copies during the run",
        f"{int(rows.sum())} memcpy HtoD ({_ms(int(gpu.dur[rows].sum()))}), "
        f"{int(pageable.sum())} of them from pageable memory",
        "pin host memory (DataLoader pin_memory=True, tensor.pin_memory()), copy with "
        "non_blocking=True, prefetch the next batch",
    )


def memory_headroom(f: Facts) -> Hint | None:
    """A device whose peak reserve nears its memory, or holds far more than is allocated."""
    if f.memory is None:
        return None
    found = []
    for d in f.memory.devices:
        pct = d.peak_reserved_pct
        if pct is not None and pct >= HEADROOM_PCT:
            found.append(
                f"device {d.device}: peak reserved {_gib(d.peak_reserved_bytes)} = "
                f"{pct:.1f}% of {_gib(d.total_memory_bytes or 0)}"
            )
        if d.slack >= SLACK_SHARE:
            found.append(
                f"device {d.device}: at the peak {_gib(d.reserved_at_peak_bytes)} reserved for "
                f"{_gib(d.peak_allocated_bytes)} allocated (+{100 * d.slack:.0f}%)"
            )
    if not found:
        return None
    return Hint(
        "memory-headroom",
        "GPU memory near its limit or reserved but unused",
        "; ".join(found),
        "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (less fragmentation); lower the "
        "peak with a smaller batch, activation checkpointing or freeing what the step no longer "
        "needs (traceview memory shows which ops hold it)",
    )


def _gib(n: int) -> str:
    return f"{n / (1 << 30):,.2f} GiB"


def _compute_major(header: dict[str, Any]) -> int | None:
    props = header.get("deviceProperties")
    if not isinstance(props, list):
        return None
    majors = [p.get("computeMajor") for p in props if isinstance(p, dict)]
    known = [m for m in majors if isinstance(m, int) and not isinstance(m, bool)]
    return max(known) if known else None


RULES: tuple[Callable[[Facts], Hint | None], ...] = (
    fused_attention,
    fused_norm,
    low_precision,
    cuda_graphs,
    dataloader,
    overlap_communication,
    pinned_memory,
    memory_headroom,
)

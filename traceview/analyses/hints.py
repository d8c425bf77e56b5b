"""Rule-based optimisation hints, each printed with the evidence that fired it.

Every rule is a function of the trace's facts returning a Hint or None; the rules and their
thresholds are documented in docs/hints.md (the ``doc`` field links there).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from traceview.aggregate import sums
from traceview.aggregate.order import distinct, groups_in_order
from traceview.analyses.core.categories import CATEGORIES
from traceview.analyses.core.cpu_context import CpuContext, GapQuery, cpu_contexts
from traceview.analyses.core.devices import DeviceUsage, GapSet
from traceview.analyses.core.gemm_facts import (
    BYTES,
    GemmKernels,
    OpGemm,
    gemm_kernels,
    narrow_aligned,
    padded,
)
from traceview.analyses.core.graphs import replayed
from traceview.analyses.core.names import display_names, short_names
from traceview.analyses.core.oplinks import NO_OP, OpLinks
from traceview.analyses.core.stacks import build_stacks, covering_frame, frame_names
from traceview.analyses.core.stall import STALL_FRAME_MIN_NS, STALL_MIN_NS
from traceview.analyses.memory import HEADROOM_PCT, SLACK_SHARE, MemoryReport
from traceview.columns.frames import long_frames
from traceview.columns.model import TraceEvents
from traceview.columns.schema import KERNEL, MEMCPY, FrameColumns, arrays_of, from_arrays
from traceview.humanize import duration

if TYPE_CHECKING:
    from traceview.analyses.core.breakdown import Breakdown

DOC = "docs/hints.md"
SHORT_KERNEL_NS = 20_000  # "short kernels": median duration below 20 µs
HOST_WAIT_SHARE = 0.10  # ... with host wait at least 10% of a device's window
EXPOSED_COMM_SHARE = 0.10
FP32_GEMM_SHARE = 0.10
DATALOADER_SHARE = 0.05
MATERIAL_SHARE = 0.01  # a hint's time at stake: at least 1% of the devices' windows
ALIGNMENT_SHARE = 0.05  # misaligned GEMMs: at least 5% of the GEMM time
STALL_STEP_SHARE = 0.25  # a host stall: uncovered host wait ≥ 25% of the median step ...
STALL_WINDOW_SHARE = 0.01  # ... or, without steps, ≥ 1% of the device's window ...
# ... and at least STALL_MIN_NS (1 ms)
LOADER_GAPS = 50  # the CPU context is looked up for this many of the longest cpu-caused gaps
STALL_GAPS = 200  # ... and for this many when looking for host stalls
CPU_BOUND_STEP_SHARE = 0.10  # a host-bound step: short host wait ≥ 10% of its window ...
CPU_BOUND_MIN_GAPS = 20  # ... in at least 20 host-held gaps shorter than a stall


@dataclass(frozen=True)
class Hint:
    """What to try (``action``), why (``evidence``: the numbers and names that fired it);
    ``stake_ns``: the GPU time at stake (None: the rule states none, e.g. memory);
    ``finding``: the hint in one sentence with its evidence, ``brief``: what to try, short
    (the Findings that open ``summary`` and the report)."""

    rule: str
    title: str
    evidence: str
    action: str
    stake_ns: int | None = None
    finding: str = ""
    brief: str = ""

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
            "stake_us": None if self.stake_ns is None else self.stake_ns / 1000,
        }


@dataclass(frozen=True)
class Finding:
    """A hint ranked by its time at stake (1: the most), as the Findings show it."""

    rank: int
    hint: Hint

    @property
    def sentence(self) -> str:
        h = self.hint
        return h.finding or f"{h.title}: {h.evidence}"

    @property
    def action(self) -> str:
        return self.hint.brief or self.hint.action

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "rule": self.hint.rule,
            "finding": self.sentence,
            "try": self.action,
            "stake_us": None if self.hint.stake_ns is None else self.hint.stake_ns / 1000,
            "doc": self.hint.doc,
        }


def rank(hints: Sequence[Hint]) -> tuple[Finding, ...]:
    """The hints as findings, the most time at stake first (those stating none last, in
    RULES order)."""
    order = sorted(
        range(len(hints)),
        key=lambda i: (hints[i].stake_ns is None, -(hints[i].stake_ns or 0), i),
    )
    return tuple(Finding(n, hints[i]) for n, i in enumerate(order, 1))


@dataclass(frozen=True)
class Facts:
    """What the rules look at: the trace, each GPU row's op links and category, the devices'
    breakdowns, usage and gaps."""

    events: TraceEvents
    links: OpLinks
    category: np.ndarray
    devices: tuple[Breakdown, ...]
    usage: list[DeviceUsage]
    gaps: GapSet
    memory: MemoryReport | None = None  # the allocator's peaks, when worked out
    graphs: np.ndarray | None = None  # the graph launches' correlation ids (None: none)
    # the gaps' CPU contexts looked up so far, by gap index (_contexts)
    contexts: dict[int, CpuContext] = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def gemms(self) -> GemmKernels:
        """The GemmKernels of the gemm category's GPU rows (two rules use them)."""
        rows = np.flatnonzero(self.category == CATEGORIES.index("gemm"))
        return gemm_kernels(self.events, self.links, rows)

    @cached_property
    def loader_gaps(self) -> np.ndarray:
        """The gaps dataloader looks at: the LOADER_GAPS longest held by the host."""
        return _longest_held(self.gaps, GapSet.length, LOADER_GAPS)

    @cached_property
    def stall_gaps(self) -> np.ndarray:
        """The gaps host_stall looks at: the STALL_GAPS longest host waits, those ≥ the
        floor."""
        longest = _longest_held(self.gaps, lambda g: g.host_wait, STALL_GAPS)
        held: np.ndarray = longest[self.gaps.host_wait[longest] >= _stall_floor(self)]
        return held

    @property
    def host_held(self) -> bool:
        """Whether any gap has a host wait."""
        return bool((self.gaps.host_wait > 0).any())

    @cached_property
    def host_bound(self) -> _HostBound | None:
        """The host-bound steps and their short host-held gaps (cuda-graphs and cpu-bound
        word them)."""
        return _host_bound(self)

    @cached_property
    def graphs_hint(self) -> Hint | None:
        """The cuda-graphs hint (cpu-bound gives way to it)."""
        return _cuda_graphs(self)

    def time_of(self, name: str) -> int:
        """GPU time (ns) of the activities in a category."""
        rows = self.category == CATEGORIES.index(name)
        return sums.total(self.events.gpu.dur[rows])

    @property
    def window_ns(self) -> int:
        """The devices' windows, summed: what a hint's time at stake is a share of."""
        return sum(u.window_ns for u in self.usage)

    def material(self, stake_ns: int) -> bool:
        """The time at stake is at least MATERIAL_SHARE of the devices' windows."""
        return self.window_ns > 0 and stake_ns >= MATERIAL_SHARE * self.window_ns

    def share(self, stake_ns: int) -> str:
        """``stake`` as time and % of the devices' windows, for an evidence line."""
        window = self.window_ns
        pct = 100 * stake_ns / window if window else 0.0
        whose = "the device window" if len(self.usage) == 1 else "the devices' windows"
        return f"{_ms(stake_ns)} ({pct:.1f}% of {whose})"

    def leaf_time(self, pattern: str) -> tuple[int, int]:
        """(kernels, GPU time in ns) of the kernels whose leaf op name matches ``pattern``."""
        names = self.events.names
        regex = re.compile(pattern)
        ops = np.array([bool(regex.search(n)) for n in names] + [False], dtype=bool)
        gpu, count, time = self.events.gpu, 0, sums.GroupSums(1)
        for lo in range(0, len(gpu.kind), _PASS):  # a pass of rows at a time
            at = slice(lo, lo + _PASS)
            leaf = self.links.leaf[at]
            rows = ops[np.where(leaf == NO_OP, len(names), leaf)] & (gpu.kind[at] == KERNEL)
            count += int(np.count_nonzero(rows))
            time.add(np.zeros(int(rows.sum()), dtype=np.int64), gpu.dur[at][rows])
        return count, int(time.out[0])


def evaluate(facts: Facts) -> list[Hint]:
    """Every rule that fires, in the order of RULES."""
    return [hint for rule in RULES if (hint := rule(facts)) is not None]


def _ms(ns: int) -> str:
    """A duration as every other line of a report words it (``2.10 s``, never ``2,102.8 ms``)."""
    return duration(ns / 1000)


def fused_attention(f: Facts) -> Hint | None:
    """bmm/matmul + softmax kernels and no fused attention kernel."""
    softmax = f.time_of("softmax")
    bmm_kernels, bmm_ns = f.leaf_time(r"^aten::(bmm|baddbmm|matmul)$")
    if f.time_of("attention") > 0 or softmax == 0 or bmm_kernels == 0:
        return None
    if not f.material(bmm_ns + softmax):
        return None
    return Hint(
        "fused-attention",
        "attention computed as separate matmul + softmax kernels",
        f"{bmm_kernels} kernels launched by aten::bmm/matmul ({_ms(bmm_ns)}) and softmax "
        f"kernels ({_ms(softmax)}), no fused attention kernel; at stake "
        f"{f.share(bmm_ns + softmax)}",
        "use torch.nn.functional.scaled_dot_product_attention (FlashAttention / "
        "memory-efficient kernels)",
        bmm_ns + softmax,
        f"{_ms(bmm_ns + softmax)} of attention runs as separate matmul and softmax kernels "
        f"({bmm_kernels} aten::bmm/matmul kernels), with no fused attention kernel.",
        "torch.nn.functional.scaled_dot_product_attention",
    )


def fused_norm(f: Facts) -> Hint | None:
    """A norm computed by many small kernels: rsqrt with pow/mean/var_mean as separate ops."""
    rsqrt, rsqrt_ns = f.leaf_time(r"^aten::rsqrt$")
    parts, parts_ns = f.leaf_time(r"^aten::(pow|mean|var_mean|var)$")
    if rsqrt == 0 or parts == 0 or not f.material(rsqrt_ns + parts_ns):
        return None
    return Hint(
        "fused-norm",
        "a layer/RMS norm spread over separate elementwise kernels",
        f"aten::rsqrt ({rsqrt} kernels, {_ms(rsqrt_ns)}) with aten::pow/mean/var "
        f"({parts} kernels, {_ms(parts_ns)}); at stake {f.share(rsqrt_ns + parts_ns)}",
        "use a fused norm (torch.nn.RMSNorm / LayerNorm, apex or Triton fused norm) or "
        "torch.compile",
        rsqrt_ns + parts_ns,
        f"A norm is written out op by op: aten::rsqrt and aten::pow/mean/var launch "
        f"{rsqrt + parts} kernels ({_ms(rsqrt_ns + parts_ns)}).",
        "torch.nn.RMSNorm / LayerNorm, or torch.compile",
    )


def low_precision(f: Facts) -> Hint | None:
    """fp32 GEMM kernels on a GPU with tensor cores (compute capability 7.0 or newer); a
    kernel's precision is its launching op's input type, else its name's (gemm_facts)."""
    major = _compute_major(f.events.header)
    if major is None or major < 7:
        return None
    facts = f.gemms
    if not facts.count:
        return None
    fp32 = [i for i, p in enumerate(facts.precision) if p == "fp32"]
    fp32_ns, gemm_ns = sum(facts.ns[i] for i in fp32), sum(facts.ns)
    if gemm_ns == 0 or fp32_ns < FP32_GEMM_SHARE * gemm_ns or not f.material(fp32_ns):
        return None
    kernels = sum(facts.count[i] for i in fp32)
    by_name: dict[int, int] = {}  # the fp32 kernels by name id
    for i in fp32:
        by_name[facts.name[i]] = by_name.get(facts.name[i], 0) + facts.count[i]
    top = f.events.names[max(sorted(by_name), key=by_name.__getitem__)]  # the least id of ties
    by_op = sum(facts.count[i] for i in fp32 if facts.from_op[i])
    return Hint(
        "low-precision",
        "fp32 GEMMs on a GPU with tensor cores",
        f"{_ms(fp32_ns)} of {_ms(gemm_ns)} GEMM time in fp32 kernels, at stake "
        f"{f.share(fp32_ns)}: {kernels} kernels ({by_op} fp32 by their op's input "
        f"types, {kernels - by_op} by their name; e.g. {top}); compute capability "
        f"{major}.x",
        "enable bf16/fp16 autocast (torch.autocast) or TF32 "
        "(torch.backends.cuda.matmul.allow_tf32 = True)",
        fp32_ns,
        f"{kernels} GEMM kernels run in fp32 ({_ms(fp32_ns)} of {_ms(gemm_ns)} GEMM "
        f"time, e.g. {short_names([top])[0]}) on a GPU with tensor cores (compute "
        f"capability {major}.x).",
        "torch.autocast(dtype=torch.bfloat16), or torch.backends.cuda.matmul.allow_tf32 = True",
    )


def cuda_graphs(f: Facts) -> Hint | None:
    """Short kernels launched on their own and a GPU waiting on the CPU; never when CUDA-graph
    replays ran half the kernel time or more (one launch call runs all a replay's kernels)."""
    return f.graphs_hint


def _cuda_graphs(f: Facts) -> Hint | None:
    gpu = f.events.gpu
    graphs = np.empty(0, dtype=np.int64) if f.graphs is None else f.graphs
    kernels = np.empty(int(np.count_nonzero(gpu.kind == KERNEL)), dtype=np.int64)
    own = replays = 0  # kernels launched on their own (their durations in ``kernels``)
    graph_ns, every_ns = sums.GroupSums(1), sums.GroupSums(1)
    for lo in range(0, len(gpu.kind), _PASS):  # a pass of rows at a time
        rows = np.flatnonzero(gpu.kind[lo : lo + _PASS] == KERNEL)
        rows += lo
        graph = replayed(f.events, rows, graphs)
        dur = gpu.dur[rows]
        mine = dur[~graph]
        kernels[own : own + len(mine)] = mine
        own += len(mine)
        replays += len(dur) - len(mine)
        graph_ns.add(np.zeros(len(dur) - len(mine), dtype=np.int64), dur[graph])
        every_ns.add(np.zeros(len(dur), dtype=np.int64), dur)
    kernels = kernels[:own]
    if own == 0 or 2 * int(graph_ns.out[0]) >= int(every_ns.out[0]):
        return None
    kernels.partition((own + 1) // 2 - 1)  # in place: the array is this function's
    median = int(kernels[(own + 1) // 2 - 1])
    waiting = [
        d for d in f.devices if d.window_ns and d.host_wait_ns >= HOST_WAIT_SHARE * d.window_ns
    ]
    if median >= SHORT_KERNEL_NS or not waiting:
        return None
    d = waiting[0]
    h = f.host_bound  # where (steps) and before what (ops) the CPU falls behind
    where = "" if h is None else f"; {h.named} ({h.shares}), before work launched by {h.top}"
    return Hint(
        "cuda-graphs",
        "many short kernels and a GPU waiting for the CPU to launch them",
        f"median kernel {_ms(median)}{_replays_left_out(replays)}; host wait "
        f"{_ms(d.host_wait_ns)} = "
        f"{100 * d.host_wait_ns / d.window_ns:.1f}% of device {d.device}'s window{where}",
        'capture the step in CUDA graphs, or torch.compile(mode="reduce-overhead")',
        d.host_wait_ns,
        f"The GPU waits for the CPU to launch short kernels: median kernel {_ms(median)}, "
        f"host wait {_ms(d.host_wait_ns)} "
        f"({100 * d.host_wait_ns / d.window_ns:.1f}% of device {d.device}'s window)"
        + ("." if h is None else f", {h.named}, before work launched by {h.top}."),
        'CUDA graphs, or torch.compile(mode="reduce-overhead")',
    )


def _replays_left_out(kernels: int) -> str:
    """Words for the kernels of graph replays the median leaves out."""
    return (
        f" (launched on their own; {kernels} kernels of graph replays left out)" if kernels else ""
    )


def _loader_gaps(f: Facts) -> np.ndarray:
    """The gaps dataloader looks at: the LOADER_GAPS longest held by the host."""
    return f.loader_gaps


def _stall_gaps(f: Facts) -> np.ndarray:
    """The gaps host_stall looks at: the STALL_GAPS longest host waits, those ≥ the floor."""
    return f.stall_gaps


def _longest_held(gaps: GapSet, by: Callable[[GapSet], np.ndarray], top: int) -> np.ndarray:
    """The indices of the ``top`` gaps with a host wait that are largest ``by`` (ties: the
    first), largest first; a pass of gaps at a time, the best so far carried."""
    at, value = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    for lo in range(0, len(gaps), _PASS):
        held = np.flatnonzero(gaps.host_wait[lo : lo + _PASS] > 0)
        held += lo
        at = np.concatenate([at, held])
        value = np.concatenate([value, by(gaps.take(held))])
        best = np.lexsort((at, -value))[:top]
        at, value = at[best], value[best]
    return at


_PASS = 1 << 16


def dataloader(f: Facts) -> Hint | None:
    """Device gaps the CPU held in the data loader."""
    if not f.host_held or len(f.events.cpu) == 0:
        return None
    longest = _loader_gaps(f)
    window = sum(u.window_ns for u in f.usage)
    if sums.total(f.gaps.host_wait[longest]) < DATALOADER_SHARE * window:
        return None  # an op holds a gap for at most its host wait: no need to look (a scan)
    _, contexts = _contexts(f, longest)
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
        held,
        f"The GPU waits {_ms(held)} for the data loader ({100 * held / window:.1f}% of the "
        "devices' windows).",
        "DataLoader(num_workers>0, pin_memory=True, persistent_workers=True)",
    )


def _contexts(f: Facts, gaps: np.ndarray) -> tuple[GapSet, list[CpuContext]]:
    """The device gaps at ``gaps`` (indices into f.gaps) and what held each on the CPU.
    A gap's context depends on it alone, and each lookup passes over every CPU row: the
    first one looks up the gaps of both rules that use them (dataloader, host_stall)."""
    if any(g not in f.contexts for g in gaps.tolist()):
        # np.union1d's sorted distinct values, without its 10-20 ms import of numpy.ma
        wanted = distinct(np.concatenate([gaps, _loader_gaps(f), _stall_gaps(f)]))
        wanted = np.array([g for g in wanted.tolist() if g not in f.contexts], dtype=np.int64)
        chosen = f.gaps.take(wanted)
        query = GapQuery(
            f.events.gpu.correlation[chosen.after],
            f.links.launch[chosen.after],
            chosen.start,
            chosen.end,
            chosen.host_wait,
        )
        f.contexts.update(zip(wanted.tolist(), cpu_contexts(f.events, query), strict=True))
    return f.gaps.take(gaps), [f.contexts[g] for g in gaps.tolist()]


def host_stall(f: Facts) -> Hint | None:
    """Device gaps held by host time that no CPU op covers: Python the profiler does not
    record (an input pipeline, a busy-wait) between two ops."""
    if not f.host_held or len(f.events.cpu) == 0 or not (f.links.leaf != NO_OP).any():
        return None  # without CPU ops, no op could have covered anything
    floor = _stall_floor(f)
    longest = _stall_gaps(f)
    if not f.material(sums.total(f.gaps.host_wait[longest])):
        return None  # the uncovered time is at most the host wait: no need to scan
    chosen, contexts = _contexts(f, longest)
    uncovered = np.array(
        [0 if c.thread is None else c.host_wait_ns - c.covered_ns for c in contexts] + [0]
    )[: len(contexts)]
    stall = np.flatnonzero(uncovered >= floor)
    stake = sums.total(uncovered[stall])
    if len(stall) == 0 or not f.material(stake):
        return None
    before, after = _op_or_name(f, chosen.before[stall]), _op_or_name(f, chosen.after[stall])
    pair = Counter(zip(before, after, strict=True)).most_common(1)[0][0]
    frame = _stall_frame(f, chosen, stall)
    look = (
        "look at the Python that runs there (record_function ranges, or with_stack=True for "
        "its frames)"
    )
    if frame is not None:
        name, held, stalls = frame
        look = f"look at {name}, where the host is for {_ms(held)} of {stalls} of these stalls"
    return Hint(
        "host-stall",
        "the GPU waits while the host runs code no CPU op covers",
        f"{len(stall)} device gaps held {f.share(stake)} by host time that no CPU op or "
        f"sync call covers (the longest {_ms(int(uncovered[stall].max()))}), "
        f"{_steps_of(f, (chosen.start + chosen.host_wait)[stall])}; between {pair[0]} and "
        f"{pair[1]}",
        f"{look}: an input pipeline on the training thread → DataLoader(num_workers>0, "
        "pin_memory=True, prefetch_factor), a prefetching iterator or a CUDA-side data pipeline",
        stake,
        f"The GPU stalls {_ms(stake)} in {len(stall)} gaps (the longest "
        f"{_ms(int(uncovered[stall].max()))}) while the host runs Python no CPU op records, "
        f"{_steps_of(f, (chosen.start + chosen.host_wait)[stall])}, between {pair[0]} and "
        f"{pair[1]}.",
        "record_function / with_stack=True to see that code; then DataLoader workers or a "
        "prefetching iterator",
    )


def _stall_frame(f: Facts, chosen: GapSet, stall: np.ndarray) -> tuple[str, int, int] | None:
    """The python frame the host is in during the stalls (trace read with its frames), among
    the frames of at least STALL_FRAME_MIN_NS: only those can hold half of a stall, and a read
    for ``summary`` keeps only those (the answer is the same from either read)."""
    frames = f.events.frames
    if len(frames.ts) == 0 or len(f.links.thread) == 0:
        return None
    frames = from_arrays(FrameColumns, long_frames(arrays_of(frames), STALL_FRAME_MIN_NS))
    name, names = frame_names(frames.name, f.events.names)
    stacks = build_stacks(frames.thread, name, frames.ts, frames.end)
    thread = f.links.thread[chosen.after[stall]]
    start = chosen.start[stall]
    return covering_frame(stacks, names, thread, start, start + chosen.host_wait[stall])


@dataclass(frozen=True)
class _HostBound:
    """The host-bound steps' short host-held gaps: how many, their median and total host
    wait, the three ops launching most of what they wait for, each step's share (words)."""

    count: int
    median_ns: int
    stake_ns: int
    top: str
    shares: str
    named: str


def _host_bound(f: Facts) -> _HostBound | None:
    """The host-bound steps (docs/hints.md "cpu-bound") and their short host-held gaps; the
    gaps taken a pass at a time, twice (the steps' sums, then the bound steps' gaps): of
    each gap counted, only its row after and host wait are held."""
    steps = _cpu_steps(f)
    if not steps:
        return None
    summed = np.zeros(len(steps), dtype=np.float64)
    counts = np.zeros(len(steps), dtype=np.int64)
    for _, step, wait in _short_held(f, steps):
        keep = step >= 0
        summed += np.bincount(step[keep], weights=wait[keep], minlength=len(steps))
        counts += np.bincount(step[keep], minlength=len(steps))
    wait_by_step, gaps_by_step = [int(x) for x in summed.tolist()], counts.tolist()
    bound = [
        i for i, s in enumerate(steps)
        if gaps_by_step[i] >= CPU_BOUND_MIN_GAPS
        and wait_by_step[i] >= CPU_BOUND_STEP_SHARE * (s.end_ns - s.start_ns)
    ]  # fmt: skip
    if not bound:
        return None
    parts = [
        (f.gaps.after[held[inside]], wait[inside])
        for held, step, wait in _short_held(f, steps)
        if (inside := np.isin(step, bound)).any()
    ]
    after = np.concatenate([p[0] for p in parts])
    wait = np.concatenate([p[1] for p in parts])
    del parts
    count = len(wait)
    ops = Counter[str]()  # in order of first appearance, as most_common breaks ties
    words, group = _op_or_name_groups(f, after)
    for name, w in zip(words, sums.by_group(group, wait, len(words)).tolist(), strict=True):
        ops[name] += w
    shares = ", ".join(
        f"#{steps[i].step} {100 * wait_by_step[i] / (steps[i].end_ns - steps[i].start_ns):.0f}%"
        for i in bound[:8]
    ) + (", …" if len(bound) > 8 else "")
    return _HostBound(
        count=count,
        median_ns=int(np.sort(wait)[(count + 1) // 2 - 1]),
        stake_ns=sums.total(wait),
        top=", ".join(f"{name} {_ms(ns)}" for name, ns in ops.most_common(3)),
        shares=shares,
        named=_step_words([steps[i].step for i in bound], len(steps)),
    )


def cpu_bound(f: Facts) -> Hint | None:
    """Steps in which the CPU falls behind: many short host-held gaps (each shorter than a
    host stall) add up to a material share of the step (docs/hints.md "cpu-bound")."""
    if cuda_graphs(f) is not None:
        return None  # that hint names the same host wait, with its cause: short kernels
    h = f.host_bound
    if h is None or not f.material(h.stake_ns):
        return None
    return Hint(
        "cpu-bound",
        "the CPU falls behind inside ordinary steps",
        f"{h.count:,} host-held gaps shorter than a stall (median {_ms(h.median_ns)}) hold "
        f"{f.share(h.stake_ns)} {h.named}, host wait per step {h.shares}; the work they wait "
        f"for is launched by {h.top}",
        'fewer launches per step: CUDA graphs or torch.compile(mode="reduce-overhead"), fewer '
        "small ops (fuse elementwise work, foreach/fused optimizers), larger batches so each "
        "launch carries more work",
        h.stake_ns,
        f"The CPU falls behind inside ordinary steps: {h.count:,} short gaps (median "
        f"{_ms(h.median_ns)}) leave the GPU waiting {_ms(h.stake_ns)} {h.named}, before work "
        f"launched by {h.top}.",
        'CUDA graphs or torch.compile(mode="reduce-overhead"), fewer small ops, larger batches',
    )


def _cpu_steps(f: Facts) -> list[Any]:
    """The steps hints judge by: CPU-side ProfilerStep windows, else GPU-side ones, by start."""
    steps = [s for s in f.events.steps if not s.on_gpu] or list(f.events.steps)
    return sorted(steps, key=lambda s: s.start_ns)


def _short_held(
    f: Facts, steps: Sequence[Any]
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """A pass of gaps at a time, the gaps held by the host for less than a stall: their
    positions, the index of the step whose window holds the end of that host wait (the
    gap's start + its wait; -1: none) and the host wait."""
    floor = _stall_floor(f)
    starts = np.array([s.start_ns for s in steps], dtype=np.int64)
    ends = np.array([s.end_ns for s in steps], dtype=np.int64)
    gaps = f.gaps
    for lo in range(0, len(gaps), _PASS):
        wait = gaps.host_wait[lo : lo + _PASS]
        held = np.flatnonzero((wait > 0) & (wait < floor))
        wait = wait[held]
        held += lo
        at = gaps.take(held).start
        at += wait
        step = np.searchsorted(starts, at, side="right")
        step -= 1
        inside = step >= 0
        inside[inside] &= at[inside] <= ends[step[inside]]
        step[~inside] = -1
        yield held, step, wait


def _step_words(found: Sequence[int], of: int) -> str:
    shown = ", ".join(f"#{s}" for s in found[:8]) + (", …" if len(found) > 8 else "")
    return f"in ProfilerStep {shown} ({len(found)} of {of} steps)"


def _stall_floor(f: Facts) -> int:
    """The uncovered host wait that makes a gap a stall: STALL_STEP_SHARE of the median
    step (CPU-side ProfilerStep windows, else GPU-side), else STALL_WINDOW_SHARE of the mean
    device window."""
    steps = [s for s in f.events.steps if not s.on_gpu] or list(f.events.steps)
    if steps:
        lengths = sorted(s.end_ns - s.start_ns for s in steps)
        return max(int(STALL_STEP_SHARE * lengths[(len(lengths) - 1) // 2]), STALL_MIN_NS)
    return max(int(STALL_WINDOW_SHARE * f.window_ns / max(len(f.usage), 1)), STALL_MIN_NS)


def _op_or_name(f: Facts, rows: np.ndarray) -> list[str]:
    """Per GPU row, its launching (leaf) op's name, else its own short name."""
    words, group = _op_or_name_groups(f, rows)
    return [words[g] for g in group.tolist()]


def _op_or_name_groups(f: Facts, rows: np.ndarray) -> tuple[list[str], np.ndarray]:
    """``_op_or_name`` worked out once per distinct (leaf op, name): the words per distinct
    pair, in order of first appearance, and each row's index into them."""
    names = f.events.names
    leaf = f.links.leaf[rows] if len(f.links.leaf) else np.full(len(rows), NO_OP)
    name = np.where(leaf == NO_OP, f.events.gpu.name[rows], -1)  # the name only without an op
    first, group = groups_in_order([leaf, name])
    words = [
        names[op] if op != NO_OP else short_names([names[n]])[0]
        for op, n in zip(leaf[first].tolist(), name[first].tolist(), strict=True)
    ]
    return words, group


def _steps_of(f: Facts, starts: np.ndarray) -> str:
    """Which ProfilerSteps the times ``starts`` fall in (a stall's end: the launch the host
    held back, whose step is the one the stalled work belongs to), as words."""
    steps = [s for s in f.events.steps if not s.on_gpu] or list(f.events.steps)
    found = sorted({s.step for t in starts.tolist() for s in steps if s.start_ns <= t <= s.end_ns})
    if not found:
        return "outside any ProfilerStep" if steps else "in a trace without steps"
    shown = ", ".join(f"#{s}" for s in found[:8]) + (", …" if len(found) > 8 else "")
    return f"in ProfilerStep {shown} ({len(found)} of {len(steps)} steps)"


@dataclass(frozen=True)
class _Misaligned:
    """The misaligned GEMMs one dimension causes: their time, FLOPs (of those with shapes),
    and per distinct GEMM (op, M, K, N) its time and a kernel's name id."""

    size: int
    multiple: int
    ns: int = 0
    flops: int = 0
    flops_ns: int = 0
    gemms: dict[tuple[str, int, int, int], list[int]] | None = None
    letters: frozenset[str] = frozenset()

    @property
    def dimension(self) -> str:
        """``N/K = 50257``: the GEMM dimensions of this size that are misaligned."""
        return f"{'/'.join(x for x in 'MNK' if x in self.letters)} = {self.size}"


def gemm_alignment(f: Facts) -> Hint | None:
    """GEMMs on dimensions tensor cores cannot load aligned: N or K not a multiple of 8
    (16-bit inputs) / 16 (8-bit), or kernels picked for 1- or 2-element alignment; grouped
    by the dimension that causes them, the saving estimated from the aligned GEMMs' rate."""
    facts = f.gemms  # per distinct kernel, in order of rows
    if not facts.count:
        return None
    ns, count = facts.ns, facts.count
    groups: dict[tuple[int, int], _Misaligned] = {}
    stake = aligned_flops = aligned_ns = 0
    narrow = {n: narrow_aligned(f.events.names[n]) for n in set(facts.name)}
    for i, (name, precision, g) in enumerate(
        zip(facts.name, facts.precision, facts.gemm, strict=True)
    ):
        multiple = _ALIGN_MULTIPLE.get(BYTES.get(precision or "", 0))
        bad = [] if g is None or multiple is None else _misaligned(g, multiple)
        if not bad and not narrow[name]:
            if g is not None:
                aligned_flops += 2 * g.m * g.n * g.k * count[i]
                aligned_ns += ns[i]
            continue
        stake += ns[i]
        found_cause = (bad[0][1:], bad[0][0]) if bad else _narrow_cause(g, multiple or 8)
        if found_cause is None or g is None:
            continue
        cause, letter = found_cause
        group = groups.setdefault(cause, _Misaligned(*cause, gemms={}))
        groups[cause] = group = replace(
            group,
            letters=group.letters | {letter},
            ns=group.ns + ns[i],
            flops=group.flops + 2 * g.m * g.n * g.k * count[i],
            flops_ns=group.flops_ns + ns[i],
        )
        assert group.gemms is not None
        found = group.gemms.setdefault((facts.op[i] or "", g.m, g.k, g.n), [0, name])
        found[0] += ns[i]
    gemm_ns = sum(ns)
    if stake < ALIGNMENT_SHARE * gemm_ns or not f.material(stake):
        return None
    evidence = (
        f"{_ms(stake)} of {_ms(gemm_ns)} GEMM time ({100 * stake / gemm_ns:.1f}%), at stake "
        f"(an upper bound: these GEMMs' whole time) {f.share(stake)}, in GEMMs with a "
        "dimension that is not a multiple of 8 elements (16 for 8-bit types) or run as "
        "align1/align2 kernels"
    )
    finding = (
        f"{_ms(stake)} of GEMMs ({100 * stake / gemm_ns:.0f}% of GEMM time; an upper bound "
        "at stake) run on misaligned dimensions."
    )
    if not groups:
        return Hint(
            "gemm-alignment", "GEMMs on misaligned dimensions", evidence, _PAD_ACTION, stake,
            finding, "make N and K multiples of 8 (16 for 8-bit types)",
        )  # fmt: skip
    rate = aligned_flops / aligned_ns if aligned_ns else None
    top = max(groups.values(), key=lambda m: m.ns)
    parts = [_group_words(f, m, rate) for m in sorted(groups.values(), key=lambda m: -m.ns)]
    saving = _saving(top, rate)
    n = len(top.gemms or {})
    finding = (
        f"{n} GEMM{'s' if n != 1 else ''} with {top.dimension} (not a multiple of "
        f"{top.multiple}) run as misaligned kernels: {_ms(top.ns)} "
        f"({_gemm_list(f, top, 3)}); at stake {_ms(stake)} in all, an upper bound"
        + (f", likely saving ~{_ms(saving)} at the aligned GEMMs' rate." if saving else ".")
    )
    return Hint(
        "gemm-alignment",
        "GEMMs on misaligned dimensions",
        f"{evidence}; by the dimension that causes them: " + "; ".join(parts),
        f"pad {top.size} to {padded(top.size, top.multiple)} (a multiple of {top.multiple}) or "
        f"{padded(top.size, 64)} (of 64), e.g. a vocabulary or hidden size; {_PAD_ACTION}",
        stake,
        finding,
        f"pad {top.size} to {padded(top.size, 64)} (a multiple of 64), e.g. the vocabulary",
    )


def _narrow_cause(g: OpGemm | None, multiple: int) -> tuple[tuple[int, int], str] | None:
    """For a kernel its name calls narrow-aligned: the first of the op's N, K, M that is
    not a multiple (the transposed cases make M a leading dimension too), and its letter."""
    if g is None:
        return None
    for letter, size in (("N", g.n), ("K", g.k), ("M", g.m)):
        if size % multiple and size > multiple:
            return (size, multiple), letter
    return None


def _saving(m: _Misaligned, rate: float | None) -> int:
    """The time these GEMMs would save at ``rate`` (FLOP/ns of the aligned GEMMs), ≥ 0."""
    if rate is None or rate <= 0 or m.flops_ns == 0:
        return 0
    return max(int(m.flops_ns - m.flops / rate), 0)


def _gemm_list(f: Facts, m: _Misaligned, top: int) -> str:
    """The group's GEMMs, the longest first: ``aten::mm 8192×768·768×50257 53.4 ms``."""
    gemms = sorted((m.gemms or {}).items(), key=lambda kv: -kv[1][0])
    words = [f"{op} {mm}×{k}·{k}×{n} {_ms(ns)}" for (op, mm, k, n), (ns, _) in gemms[:top]]
    return ", ".join(words) + (f", {len(gemms) - top} more" if len(gemms) > top else "")


def _group_words(f: Facts, m: _Misaligned, rate: float | None) -> str:
    """One dimension's misaligned GEMMs as evidence: each GEMM, its time and a kernel."""
    gemms = sorted((m.gemms or {}).items(), key=lambda kv: -kv[1][0])
    kernels = sorted({f.events.names[name] for _, (_, name) in gemms})
    shown = display_names(kernels)  # same-named templates told apart by their arguments
    kernel = shown.get(f.events.names[gemms[0][1][1]], "") if gemms else ""
    achieved = f"{m.flops / m.flops_ns / 1000:,.1f} TFLOP/s" if m.flops_ns else "-"
    aligned = (
        f"against the aligned GEMMs' {rate / 1000:,.1f} TFLOP/s"
        if rate
        else "no aligned GEMM in the trace to compare with"
    )
    saving = _saving(m, rate)
    return (
        f"{len(gemms)} GEMM(s) with {m.dimension} (not a multiple of {m.multiple}) "
        f"{_ms(m.ns)}: {_gemm_list(f, m, 8)}, e.g. {kernel}; {achieved} {aligned}"
        + (f", ~{_ms(saving)} to save at that rate" if saving else "")
    )


_ALIGN_MULTIPLE = {2: 8, 1: 16}  # elements, by bytes per element: 16-byte aligned rows
_PAD_ACTION = (
    "make N and K (and M where an operand is transposed) multiples of 8 elements (16 for "
    "8-bit types) so cuBLAS can pick aligned tensor-core kernels"
)


def _misaligned(g: OpGemm, multiple: int) -> list[tuple[str, int, int]]:
    """The (letter, size, multiple) of N and K (the leading dimensions of contiguous
    operands; M never is) when not a multiple."""
    return [
        (letter, size, multiple)
        for letter, size in (("N", g.n), ("K", g.k))
        if size % multiple and size > multiple  # a smaller one is a batch of rows, not a pad
    ]


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
        d.exposed_communication_ns,
        f"{_ms(d.exposed_communication_ns)} of communication on device {d.device} is not "
        f"overlapped with compute ({100 * d.exposed_communication_ns / d.window_ns:.1f}% of "
        "its window).",
        "DDP/FSDP bucket_cap_mb, async collectives, a communication stream",
    )


def pinned_memory(f: Facts) -> Hint | None:
    """Host-to-device copies from pageable memory that take a material share of the time."""
    gpu = f.events.gpu
    names = f.events.names
    if not len(names):
        return None
    htod = np.array(["HtoD" in n or "H2D" in n for n in names], dtype=bool)
    rows = (gpu.kind == MEMCPY) & htod[gpu.name]
    pageable = np.array(["Pageable" in n for n in names], dtype=bool)[gpu.name] & rows
    pageable_ns = sums.total(gpu.dur[pageable])
    if not pageable.any() or not f.material(pageable_ns):
        return None
    return Hint(
        "pinned-memory",
        "host-to-device copies from pageable memory",
        f"{int(pageable.sum())} of {int(rows.sum())} memcpy HtoD come from pageable memory: "
        f"{f.share(pageable_ns)} of copies the driver stages through a bounce buffer",
        "pin host memory (DataLoader pin_memory=True, tensor.pin_memory()), copy with "
        "non_blocking=True, prefetch the next batch",
        pageable_ns,
        f"{int(pageable.sum())} host-to-device copies ({_ms(pageable_ns)}) come from "
        "pageable memory.",
        "pin_memory=True and non_blocking=True copies",
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
        None,
        f"GPU memory near its limit or reserved but unused: {found[0]}.",
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, then a lower peak",
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
    host_stall,
    cpu_bound,
    overlap_communication,
    pinned_memory,
    gemm_alignment,
    memory_headroom,
)

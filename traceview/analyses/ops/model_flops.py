"""Model FLOPs, MFU and tokens per step from the shapes the trace recorded (definitions:
docs/metrics.md "Model FLOPs and MFU").

Model FLOPs count matmul work only: GEMMs, attention's two batched matmuls at the dense
convention (forward 4·B·H·S_q·S_kv·D, backward 2× forward, no causal discount) and
convolutions (backward 2× forward), from each op call's shapes (analyses.ops.flops
``model_work``). An op call that contains another such call on its thread is a wrapper of it
(autocast ``aten::addmm`` → ``aten::addmm``, ``aten::linear`` → ``aten::addmm``, SDPA → its
cuDNN variant → ``aten::_cudnn_attention_forward``): only the innermost calls count, so each
computation counts once. A call belongs to the step whose window holds its start.

Coverage: the share of a step's kernel time whose model FLOPs are known: kernels launched by
an op whose model FLOPs its shapes give, and kernels of categories that do no matmul work
(elementwise, normalization, …: 0 by the convention). Below MIN_COVERAGE, or without shapes
or peaks, no MFU is given, and ``why`` says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from traceview.aggregate.order import dense_ids, joined, lex_order
from traceview.analyses.core.categories import (
    CATEGORIES,
    categorize,
    optimizer_spans,
    optimizer_step_names,
)
from traceview.analyses.core.devices import launch_times_of
from traceview.analyses.core.oplinks import OpLinks, link_ops
from traceview.analyses.core.phase_figures import counted
from traceview.analyses.core.steps import Launches, StepRow, StepRows, Window, step_table
from traceview.analyses.ops.flops import PEAK_DTYPE, Work, model_rule_names, model_work
from traceview.analyses.ops.peaks import Peaks, device_peaks, load_peaks_file
from traceview.columns.cpu_rows import FIELDS, NO_SHAPE, OP, ROW
from traceview.columns.model import TraceEvents
from traceview.columns.schema import KERNEL

MIN_COVERAGE = 0.8
CONVENTION = (
    "dense: GEMMs 2·M·N·K, attention forward 4·B·H·S_q·S_kv·D (no causal discount), "
    "backward 2× forward, convolutions 2·N·K·C·R·S·P·Q; matmul work only"
)
# Categories whose kernels may do matmul work: their model FLOPs are known only through the
# op that launched them. Every other category does none (0 by the convention).
MATMUL_CATEGORIES = frozenset(
    {"gemm", "attention", "convolution", "triton template", "triton", "other"}
)
EMBEDDING = "aten::embedding"


@dataclass(frozen=True)
class StepFlops:
    """One step's model FLOPs (of the calls whose shapes give them), the kernel time and the
    part of it whose FLOPs are known, the dtype most of the FLOPs ran in (peak-table name),
    the tokens and how they were found, and the step time used (ns)."""

    step: int
    model_flops: int
    kernel_ns: int
    known_ns: int
    dtype: str | None
    tokens: int | None
    tokens_source: str | None
    step_ns: int
    peak_tflops_per_s: float | None

    @property
    def coverage(self) -> float | None:
        return self.known_ns / self.kernel_ns if self.kernel_ns else None

    @property
    def tflops_per_s(self) -> float | None:
        """Achieved model TFLOP/s over the step time."""
        return self.model_flops / self.step_ns / 1e3 if self.step_ns > 0 else None

    @property
    def mfu(self) -> float | None:
        """Model FLOPs / (step time × dense peak), a fraction; None without the peak or below
        MIN_COVERAGE."""
        achieved, peak = self.tflops_per_s, self.peak_tflops_per_s
        coverage = self.coverage
        if achieved is None or peak is None or coverage is None or coverage < MIN_COVERAGE:
            return None
        return achieved / peak if achieved <= peak else None  # above the peak: cannot be

    def as_dict(self) -> dict[str, Any]:
        return {
            "model_flops": self.model_flops,
            "mfu": self.mfu,
            "tflops_per_s": self.tflops_per_s,
            "flops_coverage": self.coverage,
            "tokens": self.tokens,
            "tokens_source": self.tokens_source,
        }


@dataclass(frozen=True)
class Mfu:
    """Over the counted steps: MFU (a fraction; None, with ``why``, when it cannot be
    given), the peak used and where it comes from, the dtype, the coverage, the model FLOPs
    a step, achieved TFLOP/s and tokens/s."""

    value: float | None
    peak_tflops_per_s: float | None
    peak_source: str | None
    dtype: str | None
    coverage: float | None
    flops_per_step: float | None
    tflops_per_s: float | None
    tokens_per_s: float | None
    tokens_source: str | None
    steps: int
    why: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "peak_tflops_per_s": self.peak_tflops_per_s,
            "peak_source": self.peak_source,
            "dtype": self.dtype,
            "coverage": self.coverage,
            "convention": CONVENTION,
            "model_flops_per_step": self.flops_per_step,
            "tflops_per_s": self.tflops_per_s,
            "tokens_per_s": self.tokens_per_s,
            "tokens_source": self.tokens_source,
            "steps": self.steps,
            "why_not": self.why,
        }


@dataclass(frozen=True)
class ModelFlops:
    """Per step its StepFlops (in the order of the step table), whether the trace recorded
    shapes, and the peaks (None with ``peak_note`` saying why)."""

    steps: tuple[StepFlops, ...]
    shapes: bool
    peaks: Peaks | None
    peak_note: str | None

    def of(self, step: int) -> StepFlops | None:
        return next((s for s in self.steps if s.step == step), None)

    def summary(self, counted: Sequence[StepRow]) -> Mfu:
        """The Mfu over the ``counted`` steps: FLOPs, step times, kernel and known time and
        tokens summed over them."""
        chosen = {r.step for r in counted}
        steps = [s for s in self.steps if s.step in chosen]
        flops = sum(s.model_flops for s in steps)
        time_ns = sum(s.step_ns for s in steps)
        kernel_ns = sum(s.kernel_ns for s in steps)
        coverage = sum(s.known_ns for s in steps) / kernel_ns if kernel_ns else None
        dtype = _main_dtype([(s.dtype, s.model_flops) for s in steps])
        peak = None if self.peaks is None or dtype is None else self.peaks.tflops.get(dtype)
        tflops = flops / time_ns / 1e3 if time_ns > 0 else None
        tokens = [s.tokens for s in steps]
        per_s = (
            sum(t or 0 for t in tokens) / time_ns * 1e9
            if steps and time_ns > 0 and None not in tokens
            else None
        )
        why = self._why(steps, coverage, dtype, peak) or _above_peak(tflops, peak, dtype)
        return Mfu(
            value=None if why or tflops is None or peak is None else tflops / peak,
            peak_tflops_per_s=peak,
            peak_source=None if self.peaks is None else _short_source(self.peaks.source),
            dtype=dtype,
            coverage=coverage,
            flops_per_step=flops / len(steps) if steps and self.shapes else None,
            tflops_per_s=tflops if self.shapes else None,
            tokens_per_s=per_s,
            tokens_source=steps[0].tokens_source if per_s is not None else None,
            steps=len(steps),
            why=why,
        )

    def _why(
        self, steps: list[StepFlops], coverage: float | None, dtype: str | None, peak: float | None
    ) -> str | None:
        if not steps and self.steps:
            return "no counted step (degenerate and warm-up steps are left out)"
        if not steps:
            return "no steps: MFU is per step (ProfilerStep#N or serving step markers)"
        if not self.shapes:
            return "no shapes recorded: profile with record_shapes=True for model FLOPs"
        if coverage is None or coverage < MIN_COVERAGE:
            pct = 0.0 if coverage is None else 100 * coverage
            return (
                f"model FLOPs known for only {pct:.1f}% of the kernel time (below "
                f"{MIN_COVERAGE:.0%}): matmul kernels whose op gives no shapes"
            )
        if dtype is None:
            return "no matmul work with known FLOPs in these steps"
        if self.peaks is None:
            return self.peak_note or "no peaks for this GPU: give them with --peaks FILE"
        if peak is None:
            return f"no {dtype} peak for {self.peaks.device} ({self.peaks.source}); use --peaks"
        return None


def _above_peak(tflops: float | None, peak: float | None, dtype: str | None) -> str | None:
    """Why an MFU above 100% is not given: it cannot be."""
    if tflops is None or peak is None or tflops <= peak:
        return None
    return (
        f"{tflops:,.1f} TFLOP/s is above the {dtype} peak ({peak:,.1f}): the work ran in "
        "another dtype than its inputs (fp32 on TF32 tensor cores), or the peaks are not "
        "this GPU's (--peaks)"
    )


def _short_source(source: str) -> str:
    """``table, by name 'NVIDIA H200'`` → ``table``."""
    return source.split(", by ", 1)[0]


def _main_dtype(pairs: Sequence[tuple[str | None, int]]) -> str | None:
    """The dtype holding the most FLOPs (the first of equals), None without any."""
    by: dict[str, int] = {}
    for dtype, flops in pairs:
        if dtype is not None and flops > 0:
            by[dtype] = by.get(dtype, 0) + flops
    return max(by, key=lambda d: by[d]) if by else None


def trace_peaks(events: TraceEvents, peaks_file: Path | None) -> tuple[Peaks | None, str | None]:
    """The device's peaks (a ``--peaks`` file's entries first) and the note when none."""
    extra = load_peaks_file(peaks_file) if peaks_file is not None else None
    return device_peaks(events.header, extra)


@dataclass(frozen=True)
class Calls:
    """The counted calls (innermost of each nest): start, and (name, shape) pair index into
    ``works``; ``shapes``: whether any call of a model-FLOPs op recorded shapes."""

    ts: np.ndarray
    pair: np.ndarray
    works: list[Work | None]
    shapes: bool


@dataclass(frozen=True)
class Linked:
    """What ``steps_model_flops`` needs from the CPU rows, all of it found in the one pass
    that links the ops' launches: the links (without the top ops, and without the launches'
    threads and ends but for ``summary``, see ``linked``), the categories, the model-FLOPs
    ops' counted calls (16 B a call, not their CPU rows' 36; or their rows as gathered, to
    be counted later: ``counted``) and the ``aten::embedding`` calls' rows."""

    links: OpLinks
    category: np.ndarray
    calls: Calls | Picked
    embeddings: np.ndarray

    def counted(self, events: TraceEvents) -> Calls:
        """The counted calls (the gathered rows let go of as they are)."""
        if isinstance(self.calls, Calls):
            return self.calls
        return _counted_calls(events, self.calls.rows())


@dataclass(frozen=True)
class Known:
    """What ``steps_model_flops`` keeps of a Linked once the op links are done with: per GPU
    row whether its FLOPs are known (``known_rows``, 1 B a row, instead of the links' and
    categories' 9), and the model-FLOPs ops' and ``aten::embedding`` calls' rows."""

    known: np.ndarray
    calls: Calls | np.ndarray | None  # the counted calls, or their rows; None: read when needed
    embeddings: np.ndarray | None

    @classmethod
    def of(cls, events: TraceEvents, found: Linked) -> Known:
        known = known_rows(events, found.links, found.category)
        return cls(known, found.counted(events), found.embeddings)


def linked(
    events: TraceEvents,
    on_block: Callable[[np.ndarray], None] | None = None,
    rank: np.ndarray | None = None,
    with_ends: bool = False,
    count: bool = True,
) -> Linked:
    """The Linked of ``events``, with the leaf ops alone (int32, ``link_ops``); ``on_block``:
    given every block of CPU rows of that pass too (a caller's own pass, saved; a block is
    valid only during the call); ``rank``: ``name_rank(events.names)`` when the caller has
    it; ``with_ends``: the launches' threads and ends kept (summary); without them the links
    keep no launch threads (all −1) nor ends (steps). The categories are int8.
    ``count=False``: the model-FLOPs ops' rows as gathered, counted later (``counted``),
    by a caller that lets go of more first (summary: the runtime calls)."""
    calls = Picked(events, model_rule_names())
    embeddings = Picked(events, {EMBEDDING})
    wanted = optimizer_step_names(events.names)
    spans: list[np.ndarray] = []
    # the names any of them wants: each block's few such rows are picked first
    either = calls.wanted | embeddings.wanted | wanted

    def seen(block: np.ndarray) -> None:  # one pass over the CPU rows for all of them
        if on_block is not None:
            on_block(block)
        few = block[either[block["name"]]]
        if len(few):
            calls.add(few)
            embeddings.add(few)
            spans.append(optimizer_spans(few, wanted))

    links = link_ops(events, rank, on_block=seen, with_top=False, with_end=with_ends)
    optimizer = np.concatenate(spans) if spans else np.zeros(0, ROW)
    category = categorize(events, links, optimizer, np.int8)  # CATEGORIES: fewer than 128
    if not with_ends:  # the leaf ops alone: what steps keep to the end
        links = replace(links, thread=np.broadcast_to(np.int32(-1), links.thread.shape))
    found = Linked(links, category, calls, embeddings.rows())
    return replace(found, calls=found.counted(events)) if count else found


def steps_model_flops(
    events: TraceEvents,
    rows: Sequence[StepRow],
    peaks_file: Path | None = None,
    found: Linked | Known | None = None,
    launch: Launches | None = None,
) -> ModelFlops:
    """The ModelFlops of ``rows`` with the op links, categories and launch times worked out
    here (``summary`` passes its own to ``model_flops``); ``found``: ``linked(events)`` (or
    its Known), when the caller has it; ``launch``: ``launch_times(events)``, when the
    caller has it."""
    own = found is None  # worked out here: its links let go of once the Known is taken
    if found is None:
        found = linked(events)
    if launch is None:
        assert isinstance(found, Linked), "a Known comes with the launch times"
        # filled into the links' own launches when they are this call's: no copy
        launch = launch_times_of(events.gpu.ts, found.links.launch, copy=not own)
    known = found if isinstance(found, Known) else Known.of(events, found)
    del found
    peaks = trace_peaks(events, peaks_file)
    return _model_flops(events, known, rows, launch, peaks)


def has_mfu(events: TraceEvents) -> bool:
    """Whether ``summary`` gives ``events`` an MFU value (its default peaks, warm-up and
    degenerate steps left out): then ``audit`` gives MFU a verdict."""
    rows = step_table(events)
    return steps_model_flops(events, rows).summary(counted(rows, False)).value is not None


def model_flops(
    events: TraceEvents,
    links: OpLinks,
    category: np.ndarray,
    rows: Sequence[StepRow],
    launch: Launches,
    peaks: tuple[Peaks | None, str | None],
    call_rows: Calls | np.ndarray | None = None,
    embedding_rows: np.ndarray | None = None,
) -> ModelFlops:
    """The ModelFlops of the steps ``rows`` (the step table of ``events``, read with its CPU
    rows); ``links``, ``category`` and ``launch``: the GPU rows' op links, categories and
    launch times; ``peaks``: the device's peaks and the note when there are none;
    ``call_rows``, ``embedding_rows``: the model-FLOPs ops' counted calls (``Linked``) or
    their CPU rows, and the CPU rows of ``aten::embedding`` (``Picked``) when the caller
    gathered them, else read here."""
    known = Known(known_rows(events, links, category), call_rows, embedding_rows)
    return _model_flops(events, known, rows, launch, peaks)


def _model_flops(
    events: TraceEvents,
    rows_known: Known,
    rows: Sequence[StepRow],
    launch: Launches,
    peaks: tuple[Peaks | None, str | None],
) -> ModelFlops:
    """``model_flops`` from the rows' Known."""
    windows = [
        Window(r.cpu_start_ns, r.cpu_end_ns, r.gpu_only) for r in rows
    ]  # CPU windows: the calls' starts lie in them
    calls = rows_known.calls
    if not isinstance(calls, Calls):
        calls = _counted_calls(events, calls)
    step_of = _step_of(calls.ts, windows)
    dtypes = sorted({d for w in calls.works if w is not None and (d := PEAK_DTYPE.get(w.dtype))})
    pair_flops = np.array([0 if w is None else w.flops for w in calls.works] + [0], np.int64)
    pair_dtype = np.array(
        [
            -1 if w is None or w.dtype not in PEAK_DTYPE else dtypes.index(PEAK_DTYPE[w.dtype])
            for w in calls.works
        ]
        + [-1],
        dtype=np.int64,
    )
    inside = step_of >= 0
    step, pair = step_of[inside], calls.pair[inside]
    flops = np.zeros(len(rows), dtype=np.int64)
    np.add.at(flops, step, pair_flops[pair])
    by_dtype = np.zeros((len(rows), max(len(dtypes), 1)), dtype=np.int64)
    typed = pair_dtype[pair] >= 0
    np.add.at(by_dtype, (step[typed], pair_dtype[pair][typed]), pair_flops[pair][typed])
    kernel_ns, known_ns = _coverage(events, rows_known.known, windows, launch)
    tokens = _tokens(events, windows, rows_known.embeddings)
    device_peaks, note = peaks
    out = []
    for i, r in enumerate(rows):
        dtype = _main_dtype(list(zip(dtypes, by_dtype[i].tolist(), strict=False)))
        found, source = (r.tokens, "serving step marker") if r.tokens else tokens[i]
        out.append(
            StepFlops(
                step=r.step,
                model_flops=int(flops[i]),
                kernel_ns=int(kernel_ns[i]),
                known_ns=int(known_ns[i]),
                dtype=dtype,
                tokens=found,
                tokens_source=source,
                step_ns=r.step_ns,
                peak_tflops_per_s=(
                    None
                    if device_peaks is None or dtype is None or not calls.shapes
                    else device_peaks.tflops.get(dtype)
                ),
            )
        )
    return ModelFlops(tuple(out), calls.shapes, device_peaks, note)


# A picked op's fields: a CPU row's but its correlation (always OP here), 28 bytes not 36.
_PICKED_FIELDS = tuple(name for name in FIELDS if name != "correlation")
PICKED = np.dtype([(name, ROW[name]) for name in _PICKED_FIELDS])


class Picked:
    """The CPU ops named one of ``names``, gathered block by block (PICKED's fields)."""

    def __init__(self, events: TraceEvents, names: Collection[str]) -> None:
        self.wanted = np.array([n in names for n in events.names] + [False])
        self.any = bool(self.wanted.any())
        self.parts: list[np.ndarray] = []
        self.taken = False

    def add(self, block: np.ndarray) -> None:
        if self.any:
            rows = block[(block["correlation"] == OP) & self.wanted[block["name"]]]
            part = np.empty(len(rows), dtype=PICKED)
            for name in _PICKED_FIELDS:
                part[name] = rows[name]
            self.parts.append(part)

    def rows(self) -> np.ndarray:
        """The rows gathered, the parts let go of as they are copied (not both held): once."""
        if self.taken:
            raise RuntimeError("the picked rows were taken already")
        self.taken = True
        return joined(self.parts, PICKED)

    @classmethod
    def read(cls, events: TraceEvents, names: Collection[str]) -> np.ndarray:
        """The rows of a pass of its own."""
        picked = cls(events, names)
        if picked.any:
            for block in events.cpu.blocks():
                picked.add(block)
        return picked.rows()


def _counted_calls(events: TraceEvents, rows: np.ndarray | None = None) -> Calls:
    """Every call of an op with a model-FLOPs rule, less those that contain another such call
    on their thread (wrappers: the innermost calls carry the work); ``rows``: those ops' CPU
    rows, else read here."""
    if rows is None:
        rows = Picked.read(events, model_rule_names())
    width = len(events.shapes) + 1
    # by (thread, ts, −end), each column taken in that order only while it is needed
    order = lex_order((-rows["end"], rows["ts"], rows["thread"]))
    thread, end = rows["thread"][order], rows["end"][order]
    wraps = np.zeros(len(order), dtype=bool)
    if len(order) > 1:
        wraps[:-1] = (thread[1:] == thread[:-1]) & (end[1:] <= end[:-1])
    del thread, end
    kept = order[~wraps]
    del order, wraps
    ts = rows["ts"][kept]
    key = rows["name"][kept].astype(np.int64) * width
    key += rows["shape"][kept]
    key += 1
    del kept
    used, pair = dense_ids(key, int(len(events.names) * width) or 1)
    works: list[Work | None] = []
    for k in used.tolist():
        name, shape = divmod(k, width)
        shape -= 1
        works.append(
            None if shape == NO_SHAPE else model_work(events.names[name], *events.shapes[shape])
        )
    shapes = bool((rows["shape"] != NO_SHAPE).any())  # a key's shape part: shape + 1
    return Calls(ts, pair, works, shapes)


def _step_of(ts: np.ndarray, windows: list[Window]) -> np.ndarray:
    """Per start, the index of the window holding it (the first by start), −1 for none."""
    if not windows or len(ts) == 0:
        return np.full(len(ts), -1, dtype=np.int64)
    starts = np.array([w.start_ns for w in windows], dtype=np.int64)
    ends = np.array([w.end_ns for w in windows], dtype=np.int64)
    order = np.argsort(starts, kind="stable")
    at = np.searchsorted(starts[order], ts, side="right") - 1
    inside = (at >= 0) & (ts <= ends[order][np.maximum(at, 0)])
    return np.where(inside, order[np.maximum(at, 0)], -1)


def known_rows(events: TraceEvents, links: OpLinks, category: np.ndarray) -> np.ndarray:
    """Per GPU row: whether its model FLOPs are known (its kernel time counts in the
    coverage): its category does no matmul work, or its leaf op's shapes give its FLOPs.
    Made a pass of rows at a time."""
    n = len(events.gpu.ts)
    out = np.empty(n, dtype=bool)
    if n == 0:
        return out
    matmul = np.array([c in MATMUL_CATEGORIES for c in CATEGORIES])
    leaf_known = _LeafKnown(events, links)
    for lo in range(0, n, _SLICE_ROWS):
        at = slice(lo, lo + _SLICE_ROWS)
        np.logical_not(matmul[category[at]], out=out[at])
        out[at] |= leaf_known(np.arange(lo, min(lo + _SLICE_ROWS, n)))
    return out


def _coverage(
    events: TraceEvents, known: np.ndarray, windows: list[Window], launch: Launches
) -> tuple[np.ndarray, np.ndarray]:
    """Per step: its kernel time, and the part whose model FLOPs are known (``known``:
    ``known_rows``)."""
    gpu = events.gpu
    n = len(gpu.ts)
    kernel_ns = np.zeros(len(windows), dtype=np.int64)
    known_ns = np.zeros(len(windows), dtype=np.int64)
    if not windows or n == 0:
        return kernel_ns, known_ns
    if _in_slices(events, windows):
        return _coverage_in_slices(events, windows, launch, known)
    member, owner = StepRows(events, np.arange(n, dtype=np.int64), launch).members(windows)
    kernel = gpu.kind[member] == KERNEL
    member, owner = member[kernel], owner[kernel]
    known_member = known[member]
    dur = gpu.dur[member]
    kernel_ns += np.bincount(owner, weights=dur, minlength=len(windows)).astype(np.int64)
    known_ns += np.bincount(
        owner[known_member], weights=dur[known_member], minlength=len(windows)
    ).astype(np.int64)
    return kernel_ns, known_ns


_SLICE_ROWS = 1 << 16  # GPU rows at once in _coverage_in_slices


def _in_slices(events: TraceEvents, windows: list[Window]) -> bool:
    """Whether ``_coverage_in_slices`` gives ``_coverage``'s figures: windows of one kind,
    in strictly increasing starts, each ending no later than the next starts (ProfilerSteps,
    serving markers one after another), so a point lies in one window, or two back to back;
    and durations small enough that every sum in float64 is exact whatever its order."""
    if len({w.gpu_only for w in windows}) != 1:
        return False
    starts = np.array(sorted(w.start_ns for w in windows), dtype=np.int64)
    ends = np.array([w.end_ns for w in sorted(windows, key=lambda w: w.start_ns)], np.int64)
    if not (bool((starts[1:] > starts[:-1]).all()) and bool((ends[:-1] <= starts[1:]).all())):
        return False
    dur = events.gpu.dur
    largest = max(abs(int(dur.min())), abs(int(dur.max())))
    return largest * (len(dur) + 1) < 2**53


def _coverage_in_slices(
    events: TraceEvents, windows: list[Window], launch: Launches, known: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``_coverage`` when ``_in_slices``: the GPU rows a slice at a time, each placed by a
    binary search among the windows' starts (and in the window before too when it lies on
    its end), so no array as long as the GPU rows is made."""
    gpu = events.gpu
    order = np.argsort([w.start_ns for w in windows], kind="stable")
    starts = np.array([windows[i].start_ns for i in order], dtype=np.int64)
    ends = np.array([windows[i].end_ns for i in order], dtype=np.int64)
    source = gpu.ts if windows[0].gpu_only else launch
    kernel_ns = np.zeros(len(windows), dtype=np.int64)
    known_ns = np.zeros(len(windows), dtype=np.int64)
    for start in range(0, len(gpu.ts), _SLICE_ROWS):
        stop = start + _SLICE_ROWS
        point = source[start:stop]
        at = np.searchsorted(starts, point, side="right") - 1  # the last start <= point
        kernel = (gpu.kind[start:stop] == KERNEL) & (at >= 0)
        np.maximum(at, 0, out=at)
        inside = np.flatnonzero(kernel & (point <= ends[at]))
        # on the end of the window before (which ends as this one starts): in both
        edge = np.flatnonzero(kernel & (at >= 1) & (point == ends[np.maximum(at - 1, 0)]))
        for rows, owner in ((inside, order[at[inside]]), (edge, order[at[edge] - 1])):
            if len(rows) == 0:
                continue
            dur = gpu.dur[start:stop][rows]
            counted = known[start:stop][rows]
            kernel_ns += np.bincount(owner, weights=dur, minlength=len(windows)).astype(np.int64)
            known_ns += np.bincount(
                owner[counted], weights=dur[counted], minlength=len(windows)
            ).astype(np.int64)
    return kernel_ns, known_ns


class _LeafKnown:
    """Per GPU row (of those asked): its leaf op's model FLOPs are known from the op's
    shapes; each (op, shape) pair worked out once."""

    def __init__(self, events: TraceEvents, links: OpLinks) -> None:
        self.events, self.links = events, links
        self.usable = links.leaf_shape is not None and len(links.leaf) == len(events.gpu.ts)
        self.rule = Picked(events, model_rule_names()).wanted  # per name id (and −1: False)
        self.width = len(events.shapes) + 1
        self.known: dict[int, bool] = {}

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rows), dtype=bool)
        if not self.usable or len(rows) == 0:
            return out
        assert self.links.leaf_shape is not None
        leaf, shape = self.links.leaf[rows], self.links.leaf_shape[rows]
        has = np.flatnonzero(self.rule[leaf] & (shape >= 0))  # a rule's op, with shapes
        key = leaf[has].astype(np.int64) * self.width + shape[has]
        used, inverse = np.unique(key, return_inverse=True)
        good = np.array([self._known(k) for k in used.tolist()], dtype=bool)
        out[has] = good[inverse.reshape(-1)]
        return out

    def _known(self, key: int) -> bool:
        if key not in self.known:
            name, shape = divmod(key, self.width)
            op = self.events.names[name]
            self.known[key] = model_work(op, *self.events.shapes[shape]) is not None
        return self.known[key]


def _tokens(
    events: TraceEvents, windows: list[Window], rows: np.ndarray | None = None
) -> list[tuple[int | None, str | None]]:
    """Per step: the tokens its ``aten::embedding`` calls looked up — per embedding table
    (weight shape) the indices' elements summed, the largest table's sum (a position table
    looks up fewer) — and how they were found; (None, None) without such calls. ``rows``:
    those calls' CPU rows, else read here."""
    out: list[tuple[int | None, str | None]] = [(None, None)] * len(windows)
    if not windows:
        return out
    if rows is None:
        rows = Picked.read(events, {EMBEDDING})
    if len(rows) == 0:
        return out
    step = _step_of(rows["ts"].astype(np.int64), windows)
    counted = (step >= 0) & (rows["shape"] != NO_SHAPE)
    # each distinct shape parsed once, each (step, shape) pair counted once
    shapes, shape_of = np.unique(rows["shape"][counted], return_inverse=True)
    looked = [_looked_up(events.shapes[shape][0]) for shape in shapes.tolist()]
    pairs, calls = np.unique(
        step[counted].astype(np.int64) * len(shapes) + shape_of.reshape(-1), return_counts=True
    )
    per_step: list[dict[str, int]] = [{} for _ in windows]
    for pair, n in zip(pairs.tolist(), calls.tolist(), strict=True):
        s, shape = divmod(pair, len(shapes))
        if looked[shape] is not None:
            table, count = looked[shape]
            per_step[s][table] = per_step[s].get(table, 0) + count * n
    for i, tables in enumerate(per_step):
        if tables:
            out[i] = (max(tables.values()), "aten::embedding indices")
    return out


def _looked_up(dims_text: bytes) -> tuple[str, int] | None:
    """An embedding call's (weight shape, indices' elements), None when the shapes do not say."""
    try:
        dims = json.loads(dims_text)
        weight, indices = dims[0], dims[1]
    except (ValueError, IndexError, TypeError, UnicodeDecodeError):
        return None
    if not (isinstance(weight, list) and isinstance(indices, list) and indices):
        return None
    if not all(type(x) is int and x >= 0 for x in [*weight, *indices]):
        return None
    return json.dumps(weight), math.prod(indices)

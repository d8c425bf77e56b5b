"""Steps of serving traces: the frameworks' own step markers, and each step's phase.

A trace without ``ProfilerStep#N`` takes its steps from the first marker style of MARKERS
that its CPU ranges hold (numbered 0, 1, ... in start order). A step's phase comes from its
marker's words; where they say nothing, from what the step records (``step_phases``).
Definitions: docs/metrics.md, "Serving steps and phases".
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from traceview.aggregate.grouped import place_counts
from traceview.analyses.core.devices import launch_times
from traceview.analyses.core.steps import in_steps, step_windows
from traceview.columns.cpu_rows import FRAME, UNCORRELATED, is_op
from traceview.columns.model import StepWindow, TraceEvents
from traceview.columns.schema import KERNEL, CommColumns, GpuColumns
from traceview.errors import UsageError

PREFILL, DECODE, MIXED, CAPTURE, WARMUP, UNKNOWN = (
    "prefill", "decode", "mixed", "capture", "warmup", "unknown",
)  # fmt: skip
PHASES = (PREFILL, DECODE, MIXED, CAPTURE, WARMUP, UNKNOWN)
WARMUP_PHASES = (CAPTURE, WARMUP)  # left out of medians unless --include-warmup


@dataclass(frozen=True)
class Words:
    """What a marker's name says: the phase, and the batch size and tokens when it has them."""

    phase: str
    batch: int | None = None
    tokens: int | None = None


@dataclass(frozen=True)
class Marker:
    """One framework's step marker: a pattern the whole range name matches, and its reading."""

    framework: str
    example: str
    hint: str  # a substring every match holds: most names are passed over without a match
    pattern: re.Pattern[str]
    read: Callable[[re.Match[str]], Words]


# SGLang's ForwardMode names (srt/model_executor/forward_batch_info.py) in step[MODE ...].
_SGLANG_MODES = {
    "EXTEND": PREFILL, "PREFILL": PREFILL, "SPLIT_PREFILL": PREFILL, "DRAFT_EXTEND": PREFILL,
    "DECODE": DECODE, "TARGET_VERIFY": DECODE, "MIXED": MIXED, "DUMMY_FIRST": WARMUP,
}  # fmt: skip


MAX_COUNT = 2**63 - 1  # a count is int64 in the columns and the JSON
_LONG_NUMBER = re.compile(r"[0-9]{19,}")


def _count(text: str) -> int | None:
    """A count as a name writes it (ASCII digits); None beyond int64: read as absent, which
    ``unread_counts`` says."""
    value = int(text)
    return value if value <= MAX_COUNT else None


def unread_counts(name: str) -> bool:
    """Whether a marker's name holds a number beyond int64 (a count read as absent)."""
    return any(int(d) > MAX_COUNT for d in _LONG_NUMBER.findall(name))


def _number(pattern: str, text: str) -> int | None:
    m = re.search(pattern, text)
    return _count(m.group(1)) if m else None


def _sglang(m: re.Match[str]) -> Words:
    """``step[DECODE bs=32]``, ``step[EXTEND bs=15 toks=15360]``: a decode step makes one
    token per sequence, so its tokens are its batch size."""
    phase = _SGLANG_MODES.get(m["mode"], UNKNOWN)
    batch = _number(r"\bbs=([0-9]+)", m["rest"])
    tokens = _number(r"\btoks=([0-9]+)", m["rest"])
    if tokens is None and phase == DECODE:
        tokens = batch
    return Words(phase, batch, tokens)


def _execute(m: re.Match[str]) -> Words:
    """``execute_<n>_context_<c>(sq…)_generation_<g>(sq…)`` (or without ``<n>_``, and
    ``(<tokens>_…)``): c sequences in prefill, g in decode, n = c + g; each part's first
    number is its query tokens."""
    context, generation = int(m["c"]), int(m["g"])
    phase = {(True, False): PREFILL, (False, True): DECODE, (True, True): MIXED}.get(
        (context > 0, generation > 0), UNKNOWN
    )
    parts = [_number(r"^(?:sq)?([0-9]+)", m[k]) for k in ("cs", "gs")]
    tokens = None if None in parts else _count(str(sum(p for p in parts if p is not None)))
    return Words(phase, _count(m["n"]) if m["n"] else _count(str(context + generation)), tokens)


MARKERS: tuple[Marker, ...] = (
    Marker(
        "SGLang",
        "step[DECODE bs=32]",
        "step[",
        re.compile(r"step\[(?P<mode>[A-Z_]+)(?P<rest>(?: [a-z_]+=[0-9]+)*)\]"),
        _sglang,
    ),
    Marker(
        "serving images (execute ranges)",
        "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32785sqsq32sqsk32785)",
        "_generation_",
        re.compile(
            r"execute_(?:(?P<n>[0-9]+)_)?context_(?P<c>[0-9]+)\((?P<cs>[a-z0-9_]*)\)"
            r"_generation_(?P<g>[0-9]+)\((?P<gs>[a-z0-9_]*)\)"
        ),
        _execute,
    ),
    Marker(
        "vLLM",
        "vllm/v1/worker/gpu_model_runner.py(3380): execute_model",
        ": execute_model",
        re.compile(r"(?:[\w.-]+/)*gpu_model_runner\.py\([0-9]+\): execute_model"),
        lambda m: Words(UNKNOWN),
    ),
    Marker(
        "a causal LM's forward (HF generate, vLLM; recorded with with_modules or with_stack)",
        "nn.Module: GPT2LMHeadModel_0",
        "nn.Module: ",
        re.compile(r"nn\.Module: \w+(?:ForCausalLM|LMHeadModel)_[0-9]+"),
        lambda m: Words(UNKNOWN),
    ),
)


def marker_steps(events: TraceEvents) -> list[StepWindow]:
    """The steps of the first marker style (in MARKERS' order) whose ranges the CPU rows
    hold, numbered in start order; none when no style is found."""
    names = events.names
    for marker in MARKERS:
        words = {
            i: marker.read(m)
            for i, n in enumerate(names)
            if marker.hint in n and (m := marker.pattern.fullmatch(n))
        }
        if words:
            found = _ranges(events, list(words))
            if found:
                found.sort(key=lambda r: (r[1], -r[2]))
                return [
                    StepWindow(i, ts, end, False, names[n], *_fields(words[n]))
                    for i, (n, ts, end) in enumerate(found)
                ]
    return []


def _fields(w: Words) -> tuple[str, int | None, int | None]:
    return w.phase, w.batch, w.tokens


def _ranges(events: TraceEvents, ids: list[int]) -> list[tuple[int, int, int]]:
    """(name id, ts, end) of the CPU ranges (ops, annotations, frames) named by ``ids``."""
    wanted = np.zeros(len(events.names), dtype=bool)
    wanted[ids] = True
    out: list[tuple[int, int, int]] = []
    for block in events.cpu.blocks():
        marker = is_op(block["correlation"]) | (block["correlation"] == FRAME)
        rows = block[marker & wanted[block["name"]]]
        out += zip(rows["name"].tolist(), rows["ts"].tolist(), rows["end"].tolist(), strict=True)
    return out


# What a step records that tells its phase when its marker says nothing.
_ATTENTION = frozenset({"aten::scaled_dot_product_attention"})  # query: [..., Nq, d]
_BACKWARD = re.compile(r"(?:(?<![A-Za-z])[Bb]ackward|(?<=[a-z])Backward)")
_CAPTURE = re.compile(r"(?:cuda|hip)(?:StreamBeginCapture|GraphInstantiate)\w*")
# Runtime calls that launch kernels (a copy or a fill may make no activity: 0 bytes).
_LAUNCH = re.compile(r"(?:cuda|hip|cu)\w*Launch\w*")
_CAPTURES, _BACKWARDS, _ATTENTIONS, _LAUNCHES = 0, 1, 2, 3
_PREFILLS, _DECODES = 2, 3  # rows of the counts: attention ops by their query length
_KINDS = 4


def step_phases(events: TraceEvents, evidence: PhaseEvidence | None = None) -> TraceEvents:
    """``events`` with every step's phase set: its marker's word, else from the step's CPU
    rows (a graph-capture call: capture; a backward op: unknown, training; else the
    attention ops' query length per sequence: all 1 decode, all more prefill, both mixed),
    else from the one-phase attention kernel families it launched; and the last step
    marked cut when launches in it ran no GPU activity (the trace ended first). Without
    CPU rows, a step whose marker says nothing stays unknown. ``evidence``: gathered in
    a caller's pass over the CPU rows (else in one here)."""
    steps = events.steps
    if not steps:
        return events
    last = max(s.end_ns for s in steps)
    found = None
    if len(events.cpu):
        found = PhaseEvidence.of(events) if evidence is None else evidence.found()
    families: _Families | None = None
    lost: dict[int, bool] = {}  # by start: steps of one span (a trace's copies), one look
    out = []
    for i, s in enumerate(steps):
        phase: str | None = s.phase if s.phase not in ("", UNKNOWN) else UNKNOWN
        cut = False
        if found is not None and not s.on_gpu:
            if phase == UNKNOWN:
                phase = found.phase(i)
            if phase is None:
                families = _families(events) if families is None else families
                phase = families.phase(s.start_ns, s.end_ns)
            if s.end_ns == last:
                if s.start_ns not in lost:
                    lost[s.start_ns] = _lost_launches(events, found, s.start_ns, last)
                cut = lost[s.start_ns]
        out.append(replace(s, phase=phase or UNKNOWN, cut=cut))
    return replace(events, steps=out)


@dataclass(frozen=True)
class _Evidence:
    """What the CPU rows tell of each step (``events.steps``' order): how many of the rows
    starting in it are of each kind (``count[kind, step]``; _PREFILLS, _DECODES: attention
    ops by their query length); and the start and correlation id of the launch calls in
    the steps that end last (for the cut)."""

    count: np.ndarray
    launch_ts: np.ndarray
    launch_correlation: np.ndarray

    def phase(self, step: int) -> str | None:
        """The phase the step's CPU rows tell; None when they tell nothing."""
        if self.count[_CAPTURES, step]:
            return CAPTURE
        if self.count[_BACKWARDS, step]:
            return UNKNOWN
        return _both(bool(self.count[_PREFILLS, step]), bool(self.count[_DECODES, step]))


def _kinds(names: Sequence[str]) -> np.ndarray:
    kind = np.full(len(names), -1, dtype=np.int8)
    for i, n in enumerate(names):
        if n in _ATTENTION:
            kind[i] = _ATTENTIONS
        elif _CAPTURE.fullmatch(n):
            kind[i] = _CAPTURES
        elif _LAUNCH.fullmatch(n):
            kind[i] = _LAUNCHES
        elif _BACKWARD.search(n):
            kind[i] = _BACKWARDS
    return kind


class PhaseEvidence:
    """The _Evidence of ``events``' steps, gathered block by block: in a pass over the CPU
    rows of its own (``of``) or in a caller's (``add`` each block, then ``found``). Per
    block, the rows of a kind are counted into the steps holding their start (a step holds
    the rows with start <= ts <= end: those up to its end less those before its start), so
    no row is kept but the last steps' launches."""

    def __init__(self, events: TraceEvents) -> None:
        self.kind = _kinds(events.names)
        self.shapes = events.shapes
        steps = events.steps
        self.start = np.array([s.start_ns for s in steps], dtype=np.int64)
        self.end = np.array([s.end_ns for s in steps], dtype=np.int64)
        last = max(steps, key=lambda s: s.end_ns).end_ns if steps else 0
        final = self.end == last
        # the launches the cut may look at
        self.lo, self.hi = (int(self.start[final].min()), last) if steps else (1, 0)
        # per kind, how many rows start after 0, 1, ... of the sorted starts and ends
        self.by_start = np.argsort(self.start, kind="stable")
        self.by_end = np.argsort(self.end, kind="stable")
        self.sorted_start, self.sorted_end = self.start[self.by_start], self.end[self.by_end]
        self.after_starts = np.zeros((_KINDS, len(steps) + 1), dtype=np.int64)
        self.after_ends = np.zeros((_KINDS, len(steps) + 1), dtype=np.int64)
        self.queries: dict[int, int] = {}  # shape id -> an SDPA call's query length
        self.launch_ts: list[np.ndarray] = []
        self.launch_correlation: list[np.ndarray] = []

    @classmethod
    def of(cls, events: TraceEvents) -> _Evidence:
        evidence = cls(events)
        for block in events.cpu.blocks():
            evidence.add(block)
        return evidence.found()

    def add(self, block: np.ndarray) -> None:
        if len(self.start) == 0:
            return
        k = self.kind[block["name"]]
        at = np.flatnonzero(k >= 0)
        if len(at) == 0:
            return
        k = k[at]
        correlation = block["correlation"][at]
        ts = block["ts"][at]
        op = is_op(correlation)
        call = correlation >= 0
        launch = (k == _LAUNCHES) & call & (ts >= self.lo) & (ts <= self.hi)
        if launch.any():
            self.launch_ts.append(ts[launch].astype(np.int64))
            self.launch_correlation.append(correlation[launch].astype(np.int64))
        runtime = call | (correlation == UNCORRELATED)
        self._count(_CAPTURES, ts[(k == _CAPTURES) & runtime])
        self._count(_BACKWARDS, ts[(k == _BACKWARDS) & op])
        attention = (k == _ATTENTIONS) & op
        if attention.any():
            ids, inverse = np.unique(block["shape"][at][attention], return_inverse=True)
            query = np.array([self._query(i) for i in ids.tolist()], np.int64)[inverse]
            ts = ts[attention]
            self._count(_PREFILLS, ts[query > 1])
            self._count(_DECODES, ts[query == 1])

    def _query(self, shape: int) -> int:
        """``_query`` of a shape id, worked out once."""
        if shape not in self.queries:
            self.queries[shape] = _query(self.shapes, shape)
        return self.queries[shape]

    def _count(self, kind: int, ts: np.ndarray) -> None:
        """Count the rows of ``kind`` starting at ``ts`` by how many step starts are at or
        before each (of the sorted starts) and how many step ends are before it."""
        if len(ts):
            self.after_starts[kind] += place_counts(self.sorted_start, ts, "right")
            self.after_ends[kind] += place_counts(self.sorted_end, ts, "left")

    def found(self) -> _Evidence:
        """A step holds the rows up to its end (those counted before its place among the
        ends, inclusive) less those before its start (counted before its place among the
        starts, inclusive); none when it ends before it starts."""
        count = np.zeros((_KINDS, len(self.start)), dtype=np.int64)
        up_to_end = np.cumsum(self.after_ends, axis=1)[:, :-1]
        before_start = np.cumsum(self.after_starts, axis=1)[:, :-1]
        count[:, self.by_end] = up_to_end
        count[:, self.by_start] -= before_start
        np.maximum(count, 0, out=count)
        none = np.zeros(0, np.int64)
        return _Evidence(
            count,
            np.concatenate(self.launch_ts) if self.launch_ts else none,
            np.concatenate(self.launch_correlation) if self.launch_correlation else none,
        )


def _query(shapes: Sequence[tuple[bytes, bytes, bytes]], shape: int) -> int:
    """The query length of an SDPA call (its first input's second-to-last dim), 0 unknown."""
    if shape < 0 or shape >= len(shapes) or not shapes[shape][0]:
        return 0
    try:
        q = json.loads(shapes[shape][0])[0]
        return int(q[-2]) if isinstance(q, list) and len(q) >= 3 else 0
    except (ValueError, TypeError, IndexError):
        return 0


def _both(prefill: bool, decode: bool) -> str | None:
    return MIXED if prefill and decode else PREFILL if prefill else DECODE if decode else None


# Attention kernel families that run one phase only, by the tokens of their name: TensorRT-LLM's
# fmha ``…Context`` kernels (its context phase: prefill), vLLM's ``paged_attention`` kernels
# (decode; its prefill runs flash attention).
_PREFILL_FAMILY = frozenset({"fmha", "context"})
_DECODE_FAMILY = frozenset({"paged", "attention"})
_TOKEN = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def name_tokens(name: str) -> set[str]:
    """A name's tokens, lower case: split at non-alphanumerics, case changes and digits."""
    return {t.lower() for t in _TOKEN.findall(name)}


@dataclass(frozen=True)
class _Families:
    """Kernels by launch time (else own start), sorted: 1 prefill family, 2 decode, 0 none."""

    launch: np.ndarray
    family: np.ndarray

    def phase(self, start: int, end: int) -> str | None:
        lo = int(np.searchsorted(self.launch, start, side="left"))
        found = self.family[lo : int(np.searchsorted(self.launch, end, side="right"))]
        return _both(bool((found == 1).any()), bool((found == 2).any()))


def _families(events: TraceEvents) -> _Families:
    family = np.zeros(len(events.names), dtype=np.int8)
    for i in np.unique(events.gpu.name[events.gpu.kind == KERNEL]).tolist():
        tokens = name_tokens(events.names[i])
        family[i] = 1 if tokens >= _PREFILL_FAMILY else 2 if tokens >= _DECODE_FAMILY else 0
    launch = launch_times(events)
    kernel = events.gpu.kind == KERNEL
    order = np.argsort(launch[kernel], kind="stable")
    return _Families(launch[kernel][order], family[events.gpu.name[kernel]][order])


def _lost_launches(events: TraceEvents, found: _Evidence, start: int, end: int) -> bool:
    """Whether a launch call in [start, end] has no GPU activity with its correlation id."""
    inside = (found.launch_ts >= start) & (found.launch_ts <= end)
    launched = found.launch_correlation[inside]
    if len(launched) == 0:
        return False
    # Only GPU rows with an id in the launches' range can match: a mask instead of a sort
    # of every GPU row's id (0.15 s on the H200 big trace); looked up in them sorted
    # (np.isin imports numpy.ma: 20 ms).
    gpu = events.gpu.correlation
    near = np.sort(gpu[(gpu >= launched.min()) & (gpu <= launched.max())])
    if len(near) == 0:
        return True
    at = np.minimum(np.searchsorted(near, launched), len(near) - 1)
    return not bool((near[at] == launched).all())


def in_phase(events: TraceEvents, phase: str) -> TraceEvents:
    """``--phase``: ``events`` with only the GPU activity of the steps of ``phase`` (as
    ``--pstep`` picks a step's: by its launch) and only those steps; a usage error naming
    the phases found when no step has it. CPU rows are kept whole."""
    if phase not in PHASES:
        raise UsageError(f"--phase {phase!r}: expected one of {', '.join(PHASES)}")
    chosen = [s.step for s in events.steps if (s.phase or UNKNOWN) == phase]
    if not chosen:
        have = sorted({s.phase or UNKNOWN for s in events.steps})
        raise UsageError(
            f"--phase {phase}: no {phase} step in this trace (phases found: "
            f"{', '.join(have) or 'none, no steps'})"
        )
    keep = np.flatnonzero(in_steps(events, chosen, step_windows(events)))
    gpu = GpuColumns(*(getattr(events.gpu, f.name)[keep] for f in fields(GpuColumns)))
    new_row = np.full(len(events.gpu.ts), -1, dtype=np.int64)
    new_row[keep] = np.arange(len(keep))
    old = events.comms.gpu_row
    kept = old < 0
    kept[~kept] = new_row[old[~kept]] >= 0
    comms = CommColumns(*(getattr(events.comms, f.name)[kept] for f in fields(CommColumns)))
    comms.gpu_row[comms.gpu_row >= 0] = new_row[comms.gpu_row[comms.gpu_row >= 0]]
    wanted = set(chosen)
    steps = [s for s in events.steps if s.step in wanted]
    return replace(events, gpu=gpu, comms=comms, steps=steps, facts=None)

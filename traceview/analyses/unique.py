"""The distinct kernels a trace runs: one record per (kind, name, launch configuration), with
its times, devices, streams, category, launching op and replay tier (docs/metrics.md
"Unique kernels").

Kernels are told apart by (name, grid, block, registers per thread, shared memory), memcpy and
memset by (kind, name, bytes). A pass of rows at a time gives each row its activity's id;
the per-activity figures are counts and reductions by id, with no loop over rows and no
row-sized array but the ids, the op links and the categories.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson

from traceview.aggregate import sums
from traceview.aggregate.grouped import reduce_at
from traceview.aggregate.order import first_of_runs, lex_order
from traceview.analyses.core.categories import CATEGORIES, NAME_RULES, OP_RULES, categorize, words
from traceview.analyses.core.devices import device_of_stream, name_rank
from traceview.analyses.core.oplinks import NO_OP, link_ops
from traceview.columns.cpu_rows import NO_SHAPE
from traceview.columns.launches import ABSENT, LAUNCH_FIELDS, launch_table
from traceview.columns.model import TraceEvents
from traceview.columns.packed_names import ranks
from traceview.columns.schema import GPU_KINDS, KERNEL
from traceview.errors import TraceviewError

SCHEMA_VERSION = 1
TIERS = (1, 2, 3)
# Tier 2: the GEMM category's name rule, plus Tensile and *BLAS libraries by name ...
GEMM_NAME = re.compile(rf"\b(?:{dict(NAME_RULES)['gemm']}|tensile[a-z]*|[a-z]*blas[a-z]*)\b")
# ... or a kernel launched by a matmul-family op (the GEMM category's op rule).
MATMUL_OP = re.compile(dict(OP_RULES)["gemm"])
_BYTES = LAUNCH_FIELDS.index("bytes")


@dataclass(frozen=True)
class UniqueKernel:
    """One distinct activity. Launch values are −1 when the trace has none; ``op`` is the
    leaf op that launched most of its rows ("" when none), ``input_dims`` and
    ``input_types`` the Input Dims and Input type of that op's calls that launched most of
    them (None when the trace has none)."""

    kind: str
    name: str
    launch: tuple[int, ...]
    count: int
    total_ns: int
    min_ns: int
    max_ns: int
    devices: tuple[Any, ...]
    streams: tuple[Any, ...]
    category: str
    op: str
    tier: int
    group: int  # its id: its rows are those of the report's ``group`` equal to it
    input_dims: Any = None
    input_types: Any = None

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.count


@dataclass(frozen=True)
class UniqueReport:
    """Every distinct activity, by total time (longest first), and the activity count."""

    activities: int
    kernels: list[UniqueKernel]
    # per GPU row, its activity's ``group`` (int32): for sums over an activity's rows
    group: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))

    def per_tier(self) -> dict[int, int]:
        """How many distinct activities in each tier."""
        return {t: sum(1 for k in self.kernels if k.tier == t) for t in TIERS}


def tier_of(kind: int, name: str, launched_by_matmul: bool) -> int:
    """1 = memcpy/memset, 2 = GEMM/BLAS (by name, or launched by a matmul op), 3 = else."""
    if kind != KERNEL:
        return 1
    if launched_by_matmul or GEMM_NAME.search(words(name)):
        return 2
    return 3


def group_keys(events: TraceEvents) -> tuple[np.ndarray, np.ndarray]:
    """Per launch id, an id of its configuration as far as it tells activities apart: for
    kernels every field but bytes (the first array), for memcpy/memset bytes only (the
    second); ids in [0, distinct views)."""
    table = launch_table(events.launches)
    kernel_view, copy_view = table.copy(), np.full_like(table, ABSENT)
    kernel_view[:, _BYTES] = ABSENT
    copy_view[:, _BYTES] = table[:, _BYTES]
    views = np.concatenate([kernel_view, copy_view])
    if len(views) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    _, canonical = np.unique(views, axis=0, return_inverse=True)
    canonical = canonical.reshape(-1).astype(np.int64)
    return canonical[: len(table)], canonical[len(table) :]


def unique_kernels(events: TraceEvents) -> UniqueReport:
    """Group every GPU activity of ``events`` (read with its CPU rows, for ops).

    A pass of rows at a time: an activity's id per row (int32) is the one row-sized array
    made here besides the op links and categories; the per-activity figures are counts and
    reductions by id, and the most frequent value of a row's category, op or shape is
    counted per (activity, value) pair."""
    gpu = events.gpu
    n = len(gpu.ts)
    if n == 0:
        return UniqueReport(0, [])
    rank = name_rank(events.names)
    links = link_ops(events, rank, with_top=False)  # the leaf ops alone (int32)
    category = categorize(events, links, dtype=np.int8)
    leaf, leaf_shape = links.leaf, links.leaf_shape
    del links  # the launches' times and threads: categorize alone reads them
    assert leaf_shape is not None
    keys = _ActivityKeys(events)
    group = np.empty(n, dtype=np.int32)
    figures = _Figures(keys.count, n)
    is_matmul = _matmul_names(events.names)
    for lo in range(0, n, _PASS):
        at = slice(lo, lo + _PASS)
        g = keys.ids(at)
        group[at] = g
        figures.add(lo, g, gpu.dur[at], gpu.stream[at], category[at], leaf[at], is_matmul)
    del category
    top_op = figures.top_op(rank)
    op_shape = figures.op_shape(group, leaf, leaf_shape, top_op, ranks(events.shapes))
    del leaf, leaf_shape
    places = _places(events, figures.streams, keys.count)
    kernels = []
    first = figures.first.tolist()
    for i, row in enumerate(first):
        kind, name = int(gpu.kind[row]), events.names[int(gpu.name[row])]
        op = int(top_op[i])
        kernels.append(
            UniqueKernel(
                kind=GPU_KINDS[kind], name=name, launch=_shown_launch(events, row),
                count=int(figures.count[i]), total_ns=int(figures.total[i]),
                min_ns=int(figures.low[i]), max_ns=int(figures.high[i]),
                devices=places[i][0], streams=places[i][1],
                category=CATEGORIES[int(figures.category[i])],
                op=events.names[op] if op != NO_OP else "",
                tier=tier_of(kind, name, bool(figures.by_matmul[i])), group=i,
                input_dims=_shape_part(events, int(op_shape[i]), 0),
                input_types=_shape_part(events, int(op_shape[i]), 1),
            )
        )  # fmt: skip
    kernels.sort(key=lambda k: (-k.total_ns, k.kind, k.name, k.launch))
    return UniqueReport(n, kernels, group)


def kernel_sums(report: UniqueReport, values: np.ndarray) -> list[Any]:
    """Per record of ``report`` (in its order), the sum of ``values`` (one per GPU row) over
    its rows: int64 as numpy sums them, or Python ints for an object array."""
    sums_of = np.zeros(len(report.kernels), dtype=values.dtype)  # object: Python int 0s
    np.add.at(sums_of, report.group, values)
    return [sums_of[k.group] for k in report.kernels]


_PASS = 1 << 16  # GPU rows a pass


class _ActivityKeys:
    """The distinct (kind, launch view, name) of the GPU rows, as one int64 key each, sorted:
    an activity's id is its key's index. Found a pass of rows at a time."""

    def __init__(self, events: TraceEvents) -> None:
        gpu = events.gpu
        self.gpu = gpu
        kernel_view, copy_view = group_keys(events)
        views = int(max(kernel_view.max(initial=-1), copy_view.max(initial=-1))) + 1
        # (kind, view) as one id per launch id and kind
        self.view = [kernel_view, copy_view]
        self.views = views
        self.names = max(len(events.names), 1)
        if len(GPU_KINDS) * views * self.names >= 2**63:
            raise TraceviewError(
                f"{events.path}: too many distinct launch configurations and names to group"
            )
        parts: list[np.ndarray] = []
        held = 0
        found = np.zeros(0, dtype=np.int64)
        for lo in range(0, len(gpu.ts), _PASS):
            part = np.unique(self._packed(slice(lo, lo + _PASS)))
            parts.append(part)
            held += len(part)
            if held > max(_PASS, len(found)):
                found = np.unique(np.concatenate([found, *parts]))
                parts, held = [], 0
        self.keys = np.unique(np.concatenate([found, *parts]))
        self.count = len(self.keys)

    def _packed(self, at: slice) -> np.ndarray:
        """The rows' keys: (kind, launch view) major, name minor."""
        gpu = self.gpu
        kind = gpu.kind[at]
        launch = gpu.launch[at]
        view = np.where(kind == KERNEL, self.view[0][launch], self.view[1][launch])
        key = kind.astype(np.int64) * self.views
        key += view
        key *= self.names
        key += gpu.name[at]
        return key

    def ids(self, at: slice) -> np.ndarray:
        """The rows' activity ids (int32)."""
        return np.searchsorted(self.keys, self._packed(at)).astype(np.int32)


class _Figures:
    """Per activity, from its rows a pass at a time: count, exact total, least and greatest
    duration, first row, whether a matmul op launched one; its (stream, category, leaf op)
    pairs counted."""

    def __init__(self, groups: int, rows: int) -> None:
        self.groups = groups
        self.count = np.zeros(groups, dtype=np.int64)
        self.total = np.zeros(groups, dtype=np.int64)
        self.low = np.full(groups, np.iinfo(np.int64).max, dtype=np.int64)
        self.high = np.full(groups, np.iinfo(np.int64).min, dtype=np.int64)
        self.first = np.full(groups, rows, dtype=np.int64)
        self.by_matmul = np.zeros(groups, dtype=bool)
        self.streams = _Tally()
        self.categories = _Tally()
        self.ops = _Tally()
        self._category: np.ndarray | None = None

    def add(
        self,
        lo: int,
        g: np.ndarray,
        dur: np.ndarray,
        stream: np.ndarray,
        category: np.ndarray,
        leaf: np.ndarray,
        is_matmul: np.ndarray,
    ) -> None:
        """The rows from ``lo`` on: their ids, durations, streams, categories and leaf ops."""
        self.count += np.bincount(g, minlength=self.groups)
        self.total += sums.by_group(g, dur, self.groups)
        reduce_at(np.minimum, self.low, g, dur)
        reduce_at(np.maximum, self.high, g, dur)
        seen, at = np.unique(g, return_index=True)
        new = self.first[seen] > lo  # not met in an earlier pass
        self.first[seen[new]] = lo + at[new]
        g64 = g.astype(np.int64)
        self.streams.add(g64 * _STREAM_BOUND + stream)
        self.categories.add(g64 * len(CATEGORIES) + category)
        linked = leaf >= 0
        if len(is_matmul):
            self.by_matmul[g[linked & is_matmul[np.maximum(leaf, 0)]]] = True
        self.ops.add(g64[linked] * _OP_BOUND + leaf[linked])

    @property
    def category(self) -> np.ndarray:
        """Per activity, the category most of its rows hold (ties: the first in CATEGORIES)."""
        if self._category is None:
            self._category = _mode(self.categories, len(CATEGORIES), self.groups)
        return self._category

    def top_op(self, rank: np.ndarray) -> np.ndarray:
        """Per activity, the leaf op (name id) that launched most of its rows, ties to the
        smallest name; NO_OP when none did."""
        return _mode(self.ops, _OP_BOUND, self.groups, rank)

    def op_shape(
        self,
        group: np.ndarray,
        leaf: np.ndarray,
        leaf_shape: np.ndarray,
        top_op: np.ndarray,
        shape_rank: np.ndarray,
    ) -> np.ndarray:
        """Per activity, the shape id most of the rows its top op launched were launched with
        (ties by the shapes' texts: the same however the trace was read, as a split read
        interns them in another order); NO_SHAPE when none."""
        shapes = _Tally()
        for lo in range(0, len(group), _PASS):
            at = slice(lo, lo + _PASS)
            g = group[at]
            shape = leaf_shape[at]
            mine = leaf[at] == top_op[g]
            mine &= shape >= 0
            shapes.add(g[mine].astype(np.int64) * _SHAPE_BOUND + shape[mine])
        return _mode(shapes, _SHAPE_BOUND, self.groups, shape_rank if len(shape_rank) else None)


# Bounds of the values paired with an activity id (ids < 2^31): the pair fits int64.
_STREAM_BOUND = _OP_BOUND = _SHAPE_BOUND = 1 << 31


class _Tally:
    """How often each int64 key occurs, added a pass at a time: the distinct keys (sorted)
    and their counts, merged whenever the passes' own outnumber them."""

    def __init__(self) -> None:
        self.keys = np.zeros(0, dtype=np.int64)
        self.counts = np.zeros(0, dtype=np.int64)
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []
        self._held = 0

    def add(self, keys: np.ndarray) -> None:
        if len(keys) == 0:
            return
        found, counts = np.unique(keys, return_counts=True)
        self._parts.append((found, counts))
        self._held += len(found)
        if self._held > max(_PASS, len(self.keys)):
            self._merge()

    def _merge(self) -> None:
        if not self._parts:
            return
        keys = np.concatenate([self.keys, *(k for k, _ in self._parts)])
        counts = np.concatenate([self.counts, *(c for _, c in self._parts)])
        self._parts, self._held = [], 0
        order = np.argsort(keys, kind="stable")
        keys, counts = keys[order], counts[order]
        starts = first_of_runs(keys)
        self.keys, self.counts = keys[starts], np.add.reduceat(counts, starts)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        self._merge()
        return self.keys, self.counts


def _mode(tally: _Tally, bound: int, groups: int, rank: np.ndarray | None = None) -> np.ndarray:
    """Per group, the most frequent value of its (group * ``bound`` + value) pairs (ties:
    the smallest, by ``rank`` when given); −1 for a group with none."""
    keys, counts = tally.result()
    g, v = np.divmod(keys, bound)
    tie_key = v if rank is None else rank[v]
    best = lex_order((tie_key, -counts, g))
    winner = best[first_of_runs(g[best])]
    out = np.full(groups, -1, dtype=np.int64)
    out[g[winner]] = v[winner]
    return out


def _shape_part(events: TraceEvents, shape: int, part: int) -> Any:
    """Input Dims (0) or Input type (1) of a shape id, as the trace wrote it (None when none
    or not JSON)."""
    if shape == NO_SHAPE:
        return None
    raw = events.shapes[shape][part]
    try:
        return orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        return None


def _shown_launch(events: TraceEvents, row: int) -> tuple[int, ...]:
    """The launch fields that tell this activity apart (the others shown as absent)."""
    launch = events.launches[int(events.gpu.launch[row])]
    if int(events.gpu.kind[row]) == KERNEL:
        return (*launch[:_BYTES], ABSENT)
    return (*(ABSENT,) * _BYTES, launch[_BYTES])


def _matmul_names(names: Sequence[str]) -> np.ndarray:
    """Per name id: whether it names an op of the matmul family."""
    return np.array([bool(MATMUL_OP.search(n)) for n in names], dtype=bool)


def _places(
    events: TraceEvents, streams: _Tally, groups: int
) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """Per group, its distinct devices and streams (trace values, in stream-id order), from
    its (group, stream id) pairs."""
    keys, _ = streams.result()
    g, s = np.divmod(keys, _STREAM_BOUND)
    device_index, device_values = device_of_stream(events)
    out: list[tuple[list[Any], list[Any]]] = [([], []) for _ in range(groups)]
    for gi, si in zip(g.tolist(), s.tolist(), strict=True):
        devices, streams_of = out[gi]
        device = device_values[int(device_index[si])]
        if device not in devices:
            devices.append(device)
        streams_of.append(events.streams[si].stream)
    return [(tuple(d), tuple(s)) for d, s in out]


def launch_fields(kernel: UniqueKernel) -> dict[str, Any]:
    """The launch fields of a record as the JSON shows them (None when absent)."""
    values = dict(zip(LAUNCH_FIELDS, kernel.launch, strict=True))
    grid = [values[f"grid_{a}"] for a in "xyz"]
    block = [values[f"block_{a}"] for a in "xyz"]
    return {
        "grid": None if ABSENT in grid else grid,
        "block": None if ABSENT in block else block,
        "registers_per_thread": _present(values["registers_per_thread"]),
        "shared_memory": _present(values["shared_memory"]),
        "bytes": _present(values["bytes"]),
    }


def _present(value: int) -> int | None:
    return None if value == ABSENT else value

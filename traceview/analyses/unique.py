"""The distinct kernels a trace runs: one record per (kind, name, launch configuration), with
its times, devices, streams, category, launching op and replay tier (docs/metrics.md
"Unique kernels").

Kernels are told apart by (name, grid, block, registers per thread, shared memory), memcpy and
memset by (kind, name, bytes). One sort of the key columns groups every row; the per-group
figures are reductions over the sorted runs, with no loop over rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from traceview.aggregate import sums
from traceview.aggregate.order import first_of_runs, lex_order
from traceview.analyses.core.categories import CATEGORIES, NAME_RULES, OP_RULES, categorize, words
from traceview.analyses.core.devices import device_of_stream, name_rank
from traceview.analyses.core.oplinks import NO_OP, link_ops
from traceview.columns.cpu_rows import NO_SHAPE
from traceview.columns.launches import ABSENT, LAUNCH_FIELDS, launch_table
from traceview.columns.model import TraceEvents
from traceview.columns.packed_names import ranks
from traceview.columns.schema import GPU_KINDS, KERNEL

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
    rows: np.ndarray  # the GPU rows of this activity (for energy attribution)
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


def group_keys(events: TraceEvents) -> np.ndarray:
    """Per GPU row, an id of its launch configuration as far as it tells activities apart:
    for kernels every field but bytes, for memcpy/memset bytes only."""
    table = launch_table(events.launches)
    kernel_view, copy_view = table.copy(), np.full_like(table, ABSENT)
    kernel_view[:, _BYTES] = ABSENT
    copy_view[:, _BYTES] = table[:, _BYTES]
    views = np.concatenate([kernel_view, copy_view]) if len(table) else table
    _, canonical = np.unique(views, axis=0, return_inverse=True)
    canonical = canonical.reshape(-1)
    launch = events.gpu.launch.astype(np.int64)
    is_kernel = events.gpu.kind == KERNEL
    return np.where(is_kernel, canonical[launch], canonical[launch + len(table)])


def unique_kernels(events: TraceEvents) -> UniqueReport:
    """Group every GPU activity of ``events`` (read with its CPU rows, for ops)."""
    gpu = events.gpu
    n = len(gpu.ts)
    if n == 0:
        return UniqueReport(0, [])
    rank = name_rank(events.names)
    links = link_ops(events, rank)
    category = categorize(events, links)
    key = group_keys(events)
    order = lex_order((key, rank[gpu.name], gpu.kind))
    starts = first_of_runs(_run_ids(order, gpu.kind, gpu.name, key))
    group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
    rows_of = np.split(order, starts[1:])
    dur = gpu.dur[order]
    total = sums.reduceat(dur, starts)
    low, high = np.minimum.reduceat(dur, starts), np.maximum.reduceat(dur, starts)
    first = order[starts]
    matmul_op = _matmul_ops(events, links.leaf)
    by_matmul = np.maximum.reduceat(matmul_op[order].astype(np.int8), starts) > 0
    top_category = _mode(group, category[order], len(starts))
    top_op = _mode(group, links.leaf[order], len(starts), rank)
    places = _places(events, group, order, len(starts))
    op_shape = np.full(len(starts), NO_SHAPE, dtype=np.int64)
    if links.leaf_shape is not None:  # the op's own shape: among the rows its op launched
        by_op = links.leaf[order] == top_op[group]
        shapes = np.where(by_op, links.leaf_shape[order], NO_SHAPE)
        # ties by the shapes' texts: the same however the trace was read (a split read
        # interns them in another order)
        op_shape = _mode(group, shapes, len(starts), ranks(events.shapes))
    kernels = []
    for g, row in enumerate(first.tolist()):
        kind, name = int(gpu.kind[row]), events.names[int(gpu.name[row])]
        op = int(top_op[g])
        kernels.append(
            UniqueKernel(
                kind=GPU_KINDS[kind], name=name, launch=_shown_launch(events, row),
                count=len(rows_of[g]), total_ns=int(total[g]), min_ns=int(low[g]),
                max_ns=int(high[g]), devices=places[g][0], streams=places[g][1],
                category=CATEGORIES[int(top_category[g])],
                op=events.names[op] if op != NO_OP else "",
                tier=tier_of(kind, name, bool(by_matmul[g])), rows=rows_of[g],
                input_dims=_shape_part(events, int(op_shape[g]), 0),
                input_types=_shape_part(events, int(op_shape[g]), 1),
            )
        )  # fmt: skip
    kernels.sort(key=lambda k: (-k.total_ns, k.kind, k.name, k.launch))
    return UniqueReport(n, kernels)


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


def _run_ids(order: np.ndarray, *columns: np.ndarray) -> np.ndarray:
    """One int64 per sorted row that changes exactly where any of the key columns does."""
    change = np.zeros(len(order), dtype=bool)
    for column in columns:
        ordered = column[order]
        change[1:] |= ordered[1:] != ordered[:-1]
    return np.cumsum(change)


def _shown_launch(events: TraceEvents, row: int) -> tuple[int, ...]:
    """The launch fields that tell this activity apart (the others shown as absent)."""
    launch = events.launches[int(events.gpu.launch[row])]
    if int(events.gpu.kind[row]) == KERNEL:
        return (*launch[:_BYTES], ABSENT)
    return (*(ABSENT,) * _BYTES, launch[_BYTES])


def _matmul_ops(events: TraceEvents, leaf: np.ndarray) -> np.ndarray:
    """Per GPU row: whether its leaf op is of the matmul family."""
    is_matmul = np.array([bool(MATMUL_OP.search(n)) for n in events.names], dtype=bool)
    if len(is_matmul) == 0:
        return np.zeros(len(leaf), dtype=bool)
    matmul: np.ndarray = (leaf >= 0) & is_matmul[np.maximum(leaf, 0)]
    return matmul


def _mode(
    group: np.ndarray, values: np.ndarray, groups: int, rank: np.ndarray | None = None
) -> np.ndarray:
    """Per group, its most frequent value (ties: the smallest, by ``rank`` when given; a
    negative value, i.e. none, loses to any other)."""
    values = values.astype(np.int64)
    if rank is None or len(rank) == 0:  # no rank, or nothing to rank (every value is none)
        tie_key = values
    else:
        tie_key = np.where(values >= 0, rank[np.maximum(values, 0)], -1)
    pair_order = lex_order((tie_key, group))
    g, v, t = group[pair_order], values[pair_order], tie_key[pair_order]
    starts = first_of_runs(_run_ids(np.arange(len(g)), g, v))
    counts = np.diff(np.r_[starts, len(g)])
    counts = np.where(v[starts] >= 0, counts, 0)  # "none" only when there is nothing else
    best = lex_order((t[starts], -counts, g[starts]))
    winner = best[first_of_runs(g[starts][best])]
    out = np.full(groups, -1, dtype=np.int64)
    out[g[starts][winner]] = v[starts][winner]
    return out


def _places(
    events: TraceEvents, group: np.ndarray, order: np.ndarray, groups: int
) -> list[tuple[tuple[Any, ...], tuple[Any, ...]]]:
    """Per group, its distinct devices and streams (trace values, in stream-id order)."""
    stream = events.gpu.stream[order].astype(np.int64)
    pair = lex_order((stream, group))
    g, s = group[pair], stream[pair]
    keep = first_of_runs(_run_ids(np.arange(len(g)), g, s))
    device_index, device_values = device_of_stream(events)
    out: list[tuple[list[Any], list[Any]]] = [([], []) for _ in range(groups)]
    for gi, si in zip(g[keep].tolist(), s[keep].tolist(), strict=True):
        devices, streams = out[gi]
        device = device_values[int(device_index[si])]
        if device not in devices:
            devices.append(device)
        streams.append(events.streams[si].stream)
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

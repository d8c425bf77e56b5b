"""Collective sizes and bandwidths as nccl-tests defines them (its doc/PERFORMANCE.md).

Size S of a collective = the larger of its input and output message, in bytes (``In msg
nelems``/``Out msg nelems`` × the dtype's size): the array of an all-reduce, broadcast or
reduce; the whole gathered (or scattered) array of an all-gather (reduce-scatter); what each
rank sends in an all-to-all. **algbw** = S / time; **busbw** = algbw × a factor of the kind and
the number of ranks n: all-reduce 2(n−1)/n; all-gather, reduce-scatter, all-to-all (n−1)/n;
broadcast, reduce 1. Bytes per ns are GB/s (10⁹ bytes per second), as nccl-tests reports.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.analyses.core.in_us import us_fields

# Bytes per element of the dtypes PyTorch writes (c10 ScalarType names).
ELEMENT_BYTES = {
    "Bool": 1, "Byte": 1, "Char": 1, "QInt8": 1, "QUInt8": 1, "Float8_e5m2": 1,
    "Float8_e4m3fn": 1, "Float8_e5m2fnuz": 1, "Float8_e4m3fnuz": 1, "Float8_e8m0fnu": 1,
    "Short": 2, "Half": 2, "BFloat16": 2, "UInt16": 2,
    "Int": 4, "Float": 4, "QInt32": 4, "UInt32": 4, "ComplexHalf": 4,
    "Long": 8, "Double": 8, "ComplexFloat": 8, "UInt64": 8,
    "ComplexDouble": 16,
}  # fmt: skip
# Collective names as the trace writes them (allreduce, _allgather_base, all_to_all,
# reduce_scatter_tensor_coalesced, ...), letters only and lower case, by prefix.
KINDS = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce")
_NOT_LETTER = re.compile(r"[^a-z]")
_NELEMS_LIMIT = 1 << 58  # × 16 bytes still fits int64


def kind_of(collective: str) -> str | None:
    """The nccl-tests kind of a trace's collective name, or None (send, recv, barrier, ...)."""
    plain = _NOT_LETTER.sub("", collective.lower())
    return next((k for k in KINDS if plain.startswith(k)), None)


def bus_factor(kind: str | None, ranks: int) -> float | None:
    """busbw / algbw for a collective of ``kind`` over ``ranks`` ranks; None for other kinds."""
    if kind is None or ranks < 1:
        return None
    if kind == "allreduce":
        return 2 * (ranks - 1) / ranks
    if kind in ("allgather", "reducescatter", "alltoall"):
        return (ranks - 1) / ranks
    return 1.0


def element_bytes(dtypes: Sequence[str]) -> np.ndarray:
    """Bytes per element of each dtype name; −1 for a name not in ELEMENT_BYTES."""
    return np.array([ELEMENT_BYTES.get(d, -1) for d in dtypes], dtype=np.int64)


def message_bytes(in_nelems: np.ndarray, out_nelems: np.ndarray, size: np.ndarray) -> np.ndarray:
    """S per collective: max(in, out) × element size; −1 when either is unknown (−1)."""
    nelems = np.maximum(in_nelems, out_nelems)
    known = (nelems >= 0) & (nelems < _NELEMS_LIMIT) & (size > 0)
    return np.where(known, nelems * np.maximum(size, 0), -1)


def gbps(size_bytes: int, time_ns: int) -> float | None:
    """Bytes over ns as GB/s; None without a size or a time."""
    return size_bytes / time_ns if size_bytes >= 0 and time_ns > 0 else None


@dataclass(frozen=True)
class KindBandwidth:
    """The collectives of one kind that have a size and a time: how many, Σ S, Σ time (ns)
    and Σ S × bus factor; algbw and busbw over them."""

    kind: str
    collectives: int
    bytes: int
    time_ns: int
    bus_bytes: float

    @property
    def algbw_gbps(self) -> float:
        return self.bytes / self.time_ns

    @property
    def busbw_gbps(self) -> float:
        return self.bus_bytes / self.time_ns

    def as_dict(self) -> dict[str, Any]:
        return {
            "collective": self.kind,
            **us_fields(self, skip=("kind", "bus_bytes")),  # collectives, bytes, time_us
            "algbw_gbps": self.algbw_gbps,
            "busbw_gbps": self.busbw_gbps,
        }


def by_kind(collectives: Iterable[tuple[str | None, int, int | None, int]]) -> list[KindBandwidth]:
    """Per kind (KINDS order) over (kind, ranks, size, time ns) of collectives: algbw =
    Σ S / Σ time, busbw = Σ (S × factor) / Σ time; kinds without any timed size left out."""
    sums: dict[str, list[float]] = {}
    for kind, ranks, size, time_ns in collectives:
        factor = bus_factor(kind, ranks)
        if kind is None or factor is None or size is None or size < 0 or time_ns <= 0:
            continue
        total = sums.setdefault(kind, [0, 0, 0, 0.0])
        total[0] += 1
        total[1] += size
        total[2] += time_ns
        total[3] += size * factor
    return [
        KindBandwidth(k, int(n), int(b), int(t), s)
        for k in KINDS
        if k in sums
        for n, b, t, s in [sums[k]]
    ]

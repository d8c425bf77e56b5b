"""Launch configurations of GPU activities: grid, block, registers per thread, shared memory
(kernels) and bytes (memcpy/memset), interned — one int32 id per GPU row.

A configuration is a tuple of LAUNCH_FIELDS integers, −1 where the trace has no usable value.
Traces repeat few configurations, so a read keeps one small table of them and one int32 id per
row, not nine columns. Kineto writes ``"grid": [8, 16, 5]``, ``"block": [128, 1, 1]``,
``"registers per thread"``, ``"shared memory"`` (static + dynamic) and ``"bytes"``; some traces
write numbers as text (``"[8, 1, 1]"``, ``"2049000"``): those are read too. Anything else
(a negative, a fraction, a list of the wrong length) counts as absent.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import numpy as np

LAUNCH_FIELDS = (
    "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z",
    "registers_per_thread", "shared_memory", "bytes",
)  # fmt: skip
Launch = tuple[int, ...]
ABSENT = -1
NO_LAUNCH: Launch = (ABSENT,) * len(LAUNCH_FIELDS)
_INT64_MAX = 2**63 - 1
_NUMBER = re.compile(r"\s*\d+\s*")
_DIMS = re.compile(r"\s*\[?\s*(\d+)\s*(?:,\s*(\d+)\s*)?(?:,\s*(\d+)\s*)?\]?\s*")


def raw_key(args: Any) -> Any:
    """A hashable key of an event's launch args as decoded (normalised when interned)."""
    if args is None:
        return None
    grid, block = args.grid, args.block
    return (
        tuple(grid) if type(grid) is list else grid,
        tuple(block) if type(block) is list else block,
        args.registers,
        args.shared_memory,
        args.bytes,
    )


def launch_ids(interner: Any, events: Sequence[Any]) -> np.ndarray:
    """The interned launch configuration id of each event (``interner`` normalises new keys).

    A key that cannot be hashed (nested lists or objects where numbers belong) has those
    parts replaced by None, i.e. absent."""
    keys = [  # raw_key, inline: this runs over every GPU event
        None
        if (a := e.args) is None
        else (
            tuple(g) if type(g := a.grid) is list else g,
            tuple(b) if type(b := a.block) is list else b,
            a.registers,
            a.shared_memory,
            a.bytes,
        )
        for e in events
    ]
    try:
        return interner.ids_of(keys)  # type: ignore[no-any-return]
    except TypeError:
        return interner.ids_of([_hashable(key) for key in keys])  # type: ignore[no-any-return]


def _hashable(key: Any) -> Any:
    if key is None:
        return None
    out = []
    for part in key:
        try:
            hash(part)
        except TypeError:
            part = None
        out.append(part)
    return tuple(out)


def normalise(key: Any) -> Launch:
    """The launch configuration of a raw key (see the module docstring), or of a tuple of
    LAUNCH_FIELDS integers (an Nsight Systems export's columns, negatives for absent)."""
    if key is None:
        return NO_LAUNCH
    if len(key) == len(LAUNCH_FIELDS):
        return tuple(_count(v) for v in key)
    grid, block, registers, shared, nbytes = key
    return (*_dims(grid), *_dims(block), _count(registers), _count(shared), _count(nbytes))


def _count(value: Any) -> int:
    """A non-negative integer (int, integral float, or decimal text), else ABSENT."""
    kind = type(value)
    if kind is int:
        return value if 0 <= value <= _INT64_MAX else ABSENT
    if (kind is float or kind is Decimal) and math.isfinite(value) and value == int(value):
        return _count(int(value))  # 32.0, or Decimal("32.0") from the exact decoder
    if kind is str and _NUMBER.fullmatch(value):
        return _count(int(value))
    return ABSENT


def _dims(value: Any) -> tuple[int, int, int]:
    """x, y, z of a grid or block given as 1 to 3 numbers (missing ones are 1), else absent."""
    if type(value) is str:
        match = _DIMS.fullmatch(value)
        if match is None:
            return (ABSENT, ABSENT, ABSENT)
        value = tuple(int(d) for d in match.groups() if d is not None)
    if type(value) is not tuple or not 1 <= len(value) <= 3:
        return (ABSENT, ABSENT, ABSENT)
    dims = [_count(v) if type(v) is not bool else ABSENT for v in value]
    if ABSENT in dims:
        return (ABSENT, ABSENT, ABSENT)
    x, y, z = (*dims, 1, 1)[:3]
    return (x, y, z)


def launch_table(launches: Sequence[Launch]) -> np.ndarray:
    """The configurations as an (n, len(LAUNCH_FIELDS)) int64 array (row i = id i)."""
    if not launches:
        return np.empty((0, len(LAUNCH_FIELDS)), dtype=np.int64)
    return np.array(launches, dtype=np.int64).reshape(len(launches), len(LAUNCH_FIELDS))

"""Interning: each distinct name, stream or thread is stored once and rows carry its integer id."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

import numpy as np

_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1


class Interner:
    """Stores each distinct value once and hands out dense integer ids.

    ``carry``: how a new value is stored (a value and what it becomes share one id).
    """

    def __init__(self, carry: Callable[[Any], Any] | None = None) -> None:
        self.ids: dict[Any, int] = {}
        self.values: list[Any] = []
        self._carry = carry

    def id(self, value: Any) -> int:
        found = self.ids.get(value)
        if found is None:
            stored = value if self._carry is None else self._carry(value)
            found = self.ids.get(stored) if stored is not value else None
            if found is None:
                found = self.ids[stored] = len(self.values)
                self.values.append(stored)
            self.ids[value] = found
        return found

    def ids_of(self, values: Sequence[Any]) -> np.ndarray:
        """The ids of many values at once (int32), without a Python int each."""
        n = len(values)
        out = np.fromiter(map(self.ids.get, values, repeat(-1)), dtype=np.int32, count=n)
        if n and out.min() < 0:  # new values: each distinct one interned once, in order met
            new = np.flatnonzero(out < 0).tolist()
            found = {v: self.id(v) for v in dict.fromkeys(map(values.__getitem__, new))}
            out[new] = np.fromiter(
                map(found.__getitem__, map(values.__getitem__, new)), dtype=np.int32, count=len(new)
            )
        return out

    def __len__(self) -> int:
        return len(self.values)


def carry_key(key: tuple[Any, Any]) -> tuple[Any, Any]:
    """A (device, stream) or (pid, tid) key as it is kept: integers beyond 64 bits (which no
    JSON writer here can write as numbers) as their decimal text."""
    a, b = key
    return (_carried(a), _carried(b))


def _carried(value: Any) -> Any:
    if type(value) is int and not _INT64_MIN <= value <= _UINT64_MAX:
        return str(value)
    return value

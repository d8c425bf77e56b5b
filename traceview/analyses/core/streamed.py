"""Results with every row of a trace with 10^6 names: rows made as they are read.

An output of every kernel (``kernels -f csv``, ``--top 0``, ``-o``) of a trace with 10^6
distinct names held as row objects would take ~1 GB, and its text as much again. Its rows
are instead made a chunk at a time from the analysis' arrays (``Streamed``), and its JSON
lists written as their items are made (``Each``), so the memory is the arrays'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar, overload

import numpy as np

T = TypeVar("T")
_AT_ONCE = 1 << 14  # rows made at once


class Streamed(Sequence[T]):
    """The rows of ``ids`` (in that order), made when they are read, a chunk at a time by
    ``make``; read again, they are made again."""

    def __init__(self, make: Callable[[np.ndarray], list[T]], ids: np.ndarray) -> None:
        self._make = make
        self._ids = ids

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, i: int) -> T: ...

    @overload
    def __getitem__(self, i: slice) -> list[T]: ...

    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return self._make(self._ids[i])
        return self._make(self._ids[[range(len(self))[i]]])[0]

    def __iter__(self) -> Iterator[T]:
        for lo in range(0, len(self._ids), _AT_ONCE):
            yield from self._make(self._ids[lo : lo + _AT_ONCE])


def rows_of(make: Callable[[np.ndarray], list[T]], ids: np.ndarray, streamed: bool) -> Sequence[T]:
    """The rows of ``ids``: a list, or ``Streamed`` rows."""
    return Streamed(make, ids) if streamed else make(ids)


class Each:
    """A JSON list written as its items are made: ``convert`` of each of ``items`` (only the
    renderer's JSON writer takes it)."""

    def __init__(self, items: Iterable[T], convert: Callable[[T], Any]) -> None:
        self._items = items
        self._convert = convert

    def __iter__(self) -> Iterator[Any]:
        return map(self._convert, self._items)


def json_list(items: Sequence[T], convert: Callable[[T], Any]) -> list[Any] | Each:
    """``convert`` of each item as a JSON list: a list, or ``Each`` of ``Streamed`` rows."""
    if isinstance(items, Streamed):
        return Each(items, convert)
    return [convert(item) for item in items]

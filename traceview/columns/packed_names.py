"""A trace's distinct names as one UTF-8 buffer and the end of each: a read-only sequence of str.

At 10^6 distinct kernel names (~120 characters each) a list of str holds 166 MB, a third of
it object headers and list slots; packed, the same names take 125 MB, are one object for the
garbage collector, and go to a worker's parent or into the cache as two flat buffers. A name
is decoded when it is asked for (~0.2 µs): callers that go over every name iterate, and
those that need a subset take it (``take``) rather than build lists of str.

Names are encoded with ``surrogatepass``: a trace's names may hold lone surrogates, and the
bytes still sort as the strings do (UTF-8 keeps code point order), which ``rank`` relies on.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, overload

import numpy as np

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

_ENCODING = ("utf-8", "surrogatepass")
_CHUNK = 1 << 16  # names encoded at once
_WORD = 8  # bytes compared per pass of ``rank``
_TAKE_BYTES = 1 << 22  # bytes of names gathered at once by ``take``


class PackedNames(Sequence[str]):
    """Names ``0 … n−1``: name ``i`` is ``data[ends[i−1]:ends[i]]`` decoded (``ends[−1]`` = 0).

    ``data`` is any bytes-like buffer (bytes, bytearray, a mapped file), never changed."""

    __slots__ = ("_data", "_ends", "_view")

    def __init__(self, data: Any = b"", ends: np.ndarray | None = None) -> None:
        self._data = data
        self._ends = np.zeros(0, np.int64) if ends is None else ends.astype(np.int64, copy=False)
        self._view = memoryview(data).cast("B")

    @classmethod
    def of(cls, names: Iterable[str]) -> PackedNames:
        """Pack ``names`` (a PackedNames is returned as it is)."""
        if isinstance(names, PackedNames):
            return names
        data = bytearray()
        lengths: list[int] = []
        chunk: list[bytes] = []
        for name in names:
            chunk.append(name.encode(*_ENCODING))
            if len(chunk) == _CHUNK:
                _append(data, lengths, chunk)
        _append(data, lengths, chunk)
        return cls(data, np.cumsum(np.array(lengths, dtype=np.int64)))

    @classmethod
    def draining(cls, names: list[str]) -> PackedNames:
        """Pack ``names`` while emptying the list, a chunk at a time: the strings are freed
        as their bytes are added, so the two never both hold every name."""
        data = bytearray()
        lengths: list[int] = []
        for start in range(0, len(names), _CHUNK):
            chunk = [name.encode(*_ENCODING) for name in names[start : start + _CHUNK]]
            names[start : start + _CHUNK] = [""] * len(chunk)  # the same "" object
            _append(data, lengths, chunk)
        names.clear()
        return cls(data, np.cumsum(np.array(lengths, dtype=np.int64)))

    @property
    def data(self) -> memoryview:
        """The UTF-8 bytes of every name, one after another."""
        return self._view[: self._end(len(self) - 1)]

    @property
    def ends(self) -> np.ndarray:
        """Where each name's bytes end in ``data`` (int64)."""
        return self._ends

    @property
    def nbytes(self) -> int:
        return self._end(len(self) - 1) + self._ends.nbytes

    def __len__(self) -> int:
        return len(self._ends)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> PackedNames: ...

    def __getitem__(self, i: int | slice) -> str | PackedNames:
        if isinstance(i, slice):
            return self.take(np.arange(len(self))[i])
        n = len(self)
        if not -n <= i < n:
            raise IndexError("name id out of range")
        i %= n
        return str(self._view[self._end(i - 1) : self._end(i)], *_ENCODING)

    def __iter__(self) -> Iterator[str]:
        return self.each_of(None)

    def each_of(self, ids: np.ndarray | None) -> Iterator[str]:
        """The names ``ids`` (all if None) one after another, decoded as they are asked for
        (their offsets a chunk at a time: 10^6 Python ints would take 36 MB)."""
        view = self._view
        count = len(self) if ids is None else len(ids)
        for lo in range(0, count, _CHUNK):
            hi = min(lo + _CHUNK, count)
            chosen = np.arange(lo, hi) if ids is None else ids[lo:hi]
            ends = self._ends[chosen]
            starts = np.where(chosen > 0, self._ends[chosen - 1], 0)
            for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
                yield str(view[start:end], *_ENCODING)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedNames):
            return bool(np.array_equal(self._ends, other._ends)) and self.data == other.data
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PackedNames({len(self)} names, {self.nbytes:,} bytes)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (PackedNames, (bytes(self.data), self._ends))

    def _end(self, i: int) -> int:
        return int(self._ends[i]) if i >= 0 else 0

    def starts(self) -> np.ndarray:
        """Where each name's bytes start in ``data``."""
        return np.r_[np.int64(0), self._ends[:-1]] if len(self) else self._ends.copy()

    def take(self, ids: np.ndarray) -> PackedNames:
        """The names ``ids`` (int array), in that order, packed anew."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) == len(self) and np.array_equal(ids, np.arange(len(self))):
            return self
        starts, lengths = self.starts()[ids], self.lengths()[ids]
        ends = np.cumsum(lengths)
        out = np.empty(int(ends[-1]) if len(ends) else 0, dtype=np.uint8)
        source = np.frombuffer(self._view, dtype=np.uint8)
        # the byte positions of the chosen names, a chunk of names at a time (an index per
        # byte of all of them would take 8 bytes a byte)
        cuts = np.searchsorted(ends, np.arange(0, len(out) + _TAKE_BYTES, _TAKE_BYTES))
        cuts = np.r_[cuts, len(ids)]  # sorted: np.unique's work without its numpy.ma import
        bounds = cuts[np.r_[True, cuts[1:] != cuts[:-1]]].tolist()
        for lo, hi in itertools.pairwise(bounds):
            first = int(ends[lo - 1]) if lo else 0
            at = np.arange(first, int(ends[hi - 1]), dtype=np.int64)
            at += np.repeat(starts[lo:hi] - (ends[lo:hi] - lengths[lo:hi]), lengths[lo:hi])
            out[first : int(ends[hi - 1])] = source[at]
        return PackedNames(out, ends)

    def lengths(self) -> np.ndarray:
        """The length of each name in bytes."""
        return np.diff(self._ends, prepend=np.int64(0))

    def rank(self) -> np.ndarray:
        """``rank[id]``: the position of name ``id`` in sorted string order (equal names in
        id order), as ``sorted(range(n), key=names.__getitem__)`` ranks them, without a
        string per name: the names are ordered by 8 bytes at a time, only those still tied
        with another going on to the next 8, then by length (a prefix comes first)."""
        n = len(self)
        starts, lengths = self.starts(), self.lengths()
        words = _Words(self.data)
        # rank: how many names sort before the name's group of names tied so far
        rank = np.zeros(n, dtype=np.int64)
        tied = np.arange(n, dtype=np.int64)  # the names of groups of two or more, by group
        ended = []  # groups tied to their last byte: ordered by length
        offset = 0
        while len(tied) > 1:
            word = words.at(starts[tied] + offset, lengths[tied] - offset)
            if not (word == word[0]).all():  # else no group splits (a common prefix)
                tied = _refine(rank, tied, word)
            offset += _WORD
            going_on = _open(rank[tied], lengths[tied] > offset)
            ended.append(tied[~going_on])
            tied = tied[going_on]
        _by_length(rank, np.concatenate(ended) if ended else tied[:0], lengths)
        return rank


def _append(data: bytearray, lengths: list[int], chunk: list[bytes]) -> None:
    lengths.extend(map(len, chunk))
    data += b"".join(chunk)
    chunk.clear()


class _Words:
    """The 8 bytes at any position of a buffer as a big-endian uint64: a view with a stride
    of one byte, and zeros past the buffer's end."""

    def __init__(self, data: memoryview) -> None:
        n = len(data)
        self._inside = max(n - _WORD + 1, 0)  # positions with 8 bytes after them
        self._view = np.ndarray((self._inside,), ">u8", buffer=data, strides=(1,))
        tail = np.zeros(2 * _WORD, dtype=np.uint8)
        tail[: n - self._inside] = np.frombuffer(data[self._inside :], dtype=np.uint8)
        self._tail = np.ndarray((_WORD + 1,), ">u8", buffer=tail, strides=(1,))

    def at(self, at: np.ndarray, left: np.ndarray) -> np.ndarray:
        """The words at ``at``, bytes past the name's end (``left`` bytes of it remain) 0."""
        inside = at < self._inside
        word = np.empty(len(at), dtype=np.uint64)
        word[inside] = self._view[at[inside]]
        near_end = np.minimum(at[~inside] - self._inside, _WORD)
        word[~inside] = self._tail[near_end]
        cut = (_WORD - np.clip(left, 0, _WORD)).astype(np.uint64) * np.uint64(8)  # bits to clear
        word &= np.where(cut < 64, ~np.uint64(0) << np.minimum(cut, np.uint64(63)), 0)
        return word


def _open(group: np.ndarray, left: np.ndarray) -> np.ndarray:
    """Which names belong to a group (contiguous runs of equal ``group``) in which some name
    has bytes ``left``."""
    if len(group) == 0:
        return left
    head = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    any_left = np.logical_or.reduceat(left, head)
    return np.repeat(any_left, np.diff(np.r_[head, len(group)]))


def _refine(rank: np.ndarray, tied: np.ndarray, word: np.ndarray) -> np.ndarray:
    """Order each group of ``tied`` names (equal ``rank``) by ``word``; return the names
    still tied with another (same rank and word)."""
    order = np.lexsort((word, rank[tied]))  # tied comes by group: the sort keeps that
    ids, group, key = tied[order], rank[tied][order], word[order]
    same_group = np.r_[False, group[1:] == group[:-1]]
    same_key = same_group & np.r_[False, key[1:] == key[:-1]]
    position = np.arange(len(ids), dtype=np.int64)
    group_start = np.maximum.accumulate(np.where(same_group, 0, position))
    run_start = np.maximum.accumulate(np.where(same_key, 0, position))
    rank[ids] = group + (run_start - group_start)
    still: np.ndarray = ids[same_key | np.r_[same_key[1:], False]]
    return still


def _by_length(rank: np.ndarray, ended: np.ndarray, lengths: np.ndarray) -> None:
    """Order the names of groups tied to their last byte (equal but for trailing zero bytes,
    or equal) by length, then id: the shorter is a prefix of the longer."""
    if len(ended) == 0:
        return
    order = np.lexsort((ended, lengths[ended], rank[ended]))
    ids, group = ended[order], rank[ended][order]
    position = np.arange(len(ids), dtype=np.int64)
    same_group = np.r_[False, group[1:] == group[:-1]]
    group_start = np.maximum.accumulate(np.where(same_group, 0, position))
    rank[ids] = group + (position - group_start)


def subset(names: Sequence[str], ids: np.ndarray) -> Sequence[str]:
    """The names ``ids`` (in that order), each looked up when asked for: no copy (``names``
    itself when ``ids`` are all of them, in order)."""
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) == len(names) and np.array_equal(ids, np.arange(len(names))):
        return names
    if isinstance(names, _Subset):  # a subset of a subset: of the names themselves
        return _Subset(names._names, names._ids[ids])
    return _Subset(names, ids)


class _Subset(Sequence[str]):
    __slots__ = ("_ids", "_names")

    def __init__(self, names: Sequence[str], ids: np.ndarray) -> None:
        self._names, self._ids = names, ids

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...

    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if isinstance(i, slice):
            return _Subset(self._names, self._ids[i])
        return self._names[int(self._ids[i])]

    def __iter__(self) -> Iterator[str]:
        if isinstance(self._names, PackedNames):
            return self._names.each_of(self._ids)
        names = self._names
        return (names[i] for i in self._ids.tolist())


def ranks_of(names: Sequence[str], ids: np.ndarray) -> np.ndarray:
    """For each of ``ids``: a number that orders them as their names sort as strings (equal
    for equal ids). Only these names are ranked, unless they are most of ``names`` (packed):
    then all are, which is cheaper than copying most of them."""
    ids = np.asarray(ids, dtype=np.int64)
    seen = np.zeros(len(names), dtype=bool)  # a byte a name: no sort of the ids (np.unique
    seen[ids] = True  # of 5 M ids took ~160 MB of temporaries)
    used = np.flatnonzero(seen)
    del seen
    if isinstance(names, PackedNames) and 2 * len(used) >= len(names):
        rank = names.rank()
    else:
        rank = np.zeros(len(names), dtype=np.int64)
        rank[used] = ranks(
            names.take(used) if isinstance(names, PackedNames) else subset(names, used)
        )
    local: np.ndarray = rank[ids]
    return local


def ranks(names: Sequence[SupportsRichComparison]) -> np.ndarray:
    """``rank[id]``: the position of name ``id`` in sorted order (strings, or any values
    that sort, such as shapes' texts), ties by id."""
    if isinstance(names, PackedNames):
        return names.rank()
    rank = np.empty(len(names), dtype=np.int64)
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    return rank

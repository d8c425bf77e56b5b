"""Many binary searches over one sorted column of (major, minor) pairs, as the block-by-block
passes over the CPU rows make them (one query per block against the same GPU rows)."""

from __future__ import annotations

from typing import Literal

import numpy as np

from traceview.aggregate.order import searchsorted_pairs

_INT64_LIMIT = 1 << 63
_PASS = 1 << 16  # pairs packed at a time


class SortedPairs:
    """(major, minor) pairs sorted lexicographically, packed into int64 keys once, for many
    ``searchsorted_pairs`` queries against them (one per block of rows): the same results,
    without packing the sorted side again for every query."""

    def __init__(self, major: np.ndarray, minor: np.ndarray) -> None:
        self.major, self.minor = major, minor
        self.keys: np.ndarray | None = None
        self.run_end: np.ndarray | None = None  # made by the first equal_range
        if len(minor) and major.dtype.kind in "iu" and minor.dtype.kind == "i":
            self.low, self.high = int(minor.min()), int(minor.max())
            # minors become 1 .. span − 2 (0, span − 1: queries below, above them all)
            self.bits = (self.high - self.low + 2).bit_length()
            self.top = int(major.max())
            if int(major.min()) >= 0 and (self.top + 2) << self.bits <= _INT64_LIMIT // 2:
                self.keys = np.empty(len(minor), dtype=np.int64)
                for lo in range(0, len(minor), _PASS):  # no row-sized temporary beside them
                    at = slice(lo, lo + _PASS)
                    self.keys[at] = self._pack(major[at], minor[at])

    def _pack(self, major: np.ndarray, minor: np.ndarray) -> np.ndarray:
        """Keys ordered like the pairs; a query outside the sorted pairs' ranges gets a key
        below or above all of theirs, as its pair is."""
        low_major = major < 0
        high_major = major > self.top
        key: np.ndarray = np.clip(major, 0, self.top + 1).astype(np.int64)
        key <<= self.bits
        part = np.clip(minor.astype(np.int64, copy=False), self.low - 1, self.high + 1)
        part -= self.low - 1  # in [0, span): below the major part's bits
        key |= part
        key[low_major] = 0
        key[high_major] = (self.top + 1) << self.bits
        return key

    def equal_range(
        self, at_major: np.ndarray, at_minor: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """(``search(..., "left")``, ``search(..., "right")``) with one binary search: a
        query found ends where its run of equal pairs ends, one not found where it starts."""
        query = self._query(at_major, at_minor)
        if self.keys is None or query is None:
            return self.search(at_major, at_minor, "left"), self.search(at_major, at_minor, "right")
        if self.run_end is None:
            heads = np.flatnonzero(np.r_[True, self.keys[1:] != self.keys[:-1]])
            ends = np.r_[heads[1:], len(self.keys)]
            self.run_end = np.repeat(ends, ends - heads)  # per position, the end of its run
        lo: np.ndarray = np.searchsorted(self.keys, query, side="left")
        inside = np.minimum(lo, len(self.keys) - 1)
        hi: np.ndarray = np.where(self.keys[inside] == query, self.run_end[inside], lo)
        return lo, hi

    def _query(self, at_major: np.ndarray, at_minor: np.ndarray) -> np.ndarray | None:
        """The queries packed as the keys are, when they are (else None)."""
        if self.keys is None or at_major.dtype.kind not in "iu" or at_minor.dtype.kind != "i":
            return None
        return self._pack(at_major, at_minor)

    def search(
        self, at_major: np.ndarray, at_minor: np.ndarray, side: Literal["left", "right"]
    ) -> np.ndarray:
        """``searchsorted_pairs(major, minor, at_major, at_minor, side)``."""
        if self.keys is None or at_major.dtype.kind not in "iu" or at_minor.dtype.kind != "i":
            return searchsorted_pairs(self.major, self.minor, at_major, at_minor, side)
        at: np.ndarray = np.searchsorted(self.keys, self._pack(at_major, at_minor), side=side)
        return at

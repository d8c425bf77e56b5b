"""Many binary searches over one sorted column of (major, minor) pairs, as the block-by-block
passes over the CPU rows make them (one query per block against the same GPU rows)."""

from __future__ import annotations

from typing import Literal

import numpy as np

from traceview.aggregate.order import searchsorted_pairs

_INT64_LIMIT = 1 << 63


class SortedPairs:
    """(major, minor) pairs sorted lexicographically, packed into int64 keys once, for many
    ``searchsorted_pairs`` queries against them (one per block of rows): the same results,
    without packing the sorted side again for every query."""

    def __init__(self, major: np.ndarray, minor: np.ndarray) -> None:
        self.major, self.minor = major, minor
        self.keys: np.ndarray | None = None
        if len(minor) and major.dtype.kind in "iu" and minor.dtype.kind == "i":
            self.low, self.high = int(minor.min()), int(minor.max())
            # minors become 1 .. span − 2 (0, span − 1: queries below, above them all)
            self.bits = (self.high - self.low + 2).bit_length()
            self.top = int(major.max())
            if int(major.min()) >= 0 and (self.top + 2) << self.bits <= _INT64_LIMIT // 2:
                self.keys = self._pack(major, minor)

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

    def search(
        self, at_major: np.ndarray, at_minor: np.ndarray, side: Literal["left", "right"]
    ) -> np.ndarray:
        """``searchsorted_pairs(major, minor, at_major, at_minor, side)``."""
        if self.keys is None or at_major.dtype.kind not in "iu" or at_minor.dtype.kind != "i":
            return searchsorted_pairs(self.major, self.minor, at_major, at_minor, side)
        at: np.ndarray = np.searchsorted(self.keys, self._pack(at_major, at_minor), side=side)
        return at

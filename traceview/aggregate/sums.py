"""Sums of int64 values (ns, pJ) that are exact or refused: numpy wraps an int64 sum silently,
so a trace whose times add up beyond 2^63 would print negative totals.

Every sum over a column of ns in ``analyses`` and ``aggregate`` goes through these functions.
Each checks that the absolute values add up to less than 2^63: then every sum of any subset of
them, in any order (a group's total, a running sum), is exact in int64.
"""

from __future__ import annotations

import numpy as np

from traceview.errors import TraceviewError

_END = 2**63


class SumOverflow(TraceviewError):
    """Values whose sum int64 cannot hold: refused with one line, never wrapped."""

    def __init__(self, message: str = "") -> None:
        super().__init__(
            message
            or "times in this trace add up to more than int64 ns hold (292 years): "
            "traceview refuses to sum them rather than print a wrapped total"
        )


def fits(values: np.ndarray) -> bool:
    """Whether the absolute values add up to less than 2^63 (exactly, in Python ints)."""
    if len(values) == 0:
        return True
    largest = max(int(values.max()), -int(values.min()))
    if largest * len(values) < _END:  # the common case: no Python loop
        return True
    exact: int = sum(abs(v) for v in values.tolist())
    return exact < _END


def check(values: np.ndarray) -> np.ndarray:
    """``values``, or SumOverflow when their sums might not fit int64."""
    if not fits(values):
        raise SumOverflow
    return values


def total(values: np.ndarray) -> int:
    """The exact sum (a Python int)."""
    return int(check(values).sum(dtype=np.int64)) if len(values) else 0


def by_group(group: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """Exact int64 sums of ``values`` per group id in [0, groups)."""
    out = np.zeros(groups, dtype=np.int64)
    np.add.at(out, group, check(values))
    return out


def reduceat(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``np.add.reduceat(values, starts)``, exact (``starts`` non-empty, ascending)."""
    out: np.ndarray = np.add.reduceat(check(values), starts, dtype=np.int64)
    return out


def cumsum(values: np.ndarray) -> np.ndarray:
    """The exact running sums, int64."""
    out: np.ndarray = np.cumsum(check(values), dtype=np.int64)
    return out


def added(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` element by element (int64), or SumOverflow where one would wrap."""
    out: np.ndarray = a + b
    wrapped = ((a > 0) & (b > 0) & (out < 0)) | ((a < 0) & (b < 0) & (out >= 0))
    if wrapped.any():
        raise SumOverflow
    return out


class GroupSums:
    """``by_group`` over values given a part at a time: the same sums, refused
    (SumOverflow) exactly when ``by_group`` over all the parts at once would be."""

    def __init__(self, groups: int) -> None:
        self.out = np.zeros(groups, dtype=np.int64)
        self._abs = 0  # the absolute values' exact sum so far

    def add(self, group: np.ndarray, values: np.ndarray) -> None:
        if len(values) == 0:
            return
        check(values)
        if len(group) > 1 and bool((group[1:] >= group[:-1]).all()):  # runs: no add.at
            head = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
            self.out[group[head]] += np.add.reduceat(values, head, dtype=np.int64)
        else:
            np.add.at(self.out, group, values)
        self._abs += int(np.abs(values).sum(dtype=np.int64))  # exact: the part fits
        if self._abs >= _END:
            raise SumOverflow

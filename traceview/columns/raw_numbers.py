"""Exact integer nanoseconds from the raw JSON text of µs numbers, a whole batch at a time.

Traces with epoch-scale timestamps are decoded with ``ts`` and ``dur`` as ``msgspec.Raw``
(traceview.read.decode). Their digits are joined into one text and parsed by numpy in a few
vectorised passes: the value of ``-12.3456`` µs is the integer ``-123456`` scaled by
10^(3 - 4), rounded half to even where digits below the ns are dropped, exactly as
``Decimal(text) * 1000`` rounded by ``to_integral_value`` (the per-event path). Anything else
(null, strings, exponents, more than 18 digits, beyond ±2^62 ns) makes the batch go the
per-event path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

NS_LIMIT = 2**62  # |ns| below this, so ts + dur still fits int64
_PLAIN = b"0123456789.- "  # the bytes of plain numbers and the separator
_SPACE, _DOT, _MINUS = ord(" "), ord("."), ord("-")
_MAX_DIGITS = 19  # 10^19 < 2^64: any 19-digit magnitude fits uint64
_POW10 = 10 ** np.arange(_MAX_DIGITS + 1, dtype=np.uint64)


def ns_of_raws(raws: Sequence[Any]) -> np.ndarray | None:
    """Exact int64 ns of raw JSON numbers (µs), or None if one needs the per-event path."""
    if not raws:
        return np.empty(0, dtype=np.int64)
    try:
        text = b" ".join(raws)
    except TypeError:  # not all raw text (values from the slow path)
        return None
    if text.translate(None, _PLAIN):
        return None
    chars = np.frombuffer(text, dtype=np.uint8)
    ends = np.append(np.flatnonzero(chars == _SPACE), len(text))
    if len(ends) != len(raws):
        return None
    starts = np.empty_like(ends)
    starts[0], starts[1:] = 0, ends[:-1] + 1
    if (ends <= starts).any():
        return None
    dots = np.flatnonzero(chars == _DOT)
    frac = np.zeros(len(raws), dtype=np.int64)
    if len(dots):
        owner = np.searchsorted(ends, dots)
        if len(owner) > 1 and (owner[1:] == owner[:-1]).any():
            return None
        frac[owner] = ends[owner] - dots - 1
        if (frac[owner] == 0).any():  # "1." is not JSON: never met, never guessed at
            return None
    negative = chars[starts] == _MINUS
    digits = ends - starts - negative - (frac > 0)
    if (digits > _MAX_DIGITS).any() or (digits < 1).any():
        return None
    magnitude = np.fromstring(text.replace(b".", b"").replace(b"-", b""), dtype=np.uint64, sep=" ")
    if len(magnitude) != len(raws):
        return None
    return _scaled(magnitude, negative, frac)


def _scaled(magnitude: np.ndarray, negative: np.ndarray, frac: np.ndarray) -> np.ndarray | None:
    """±magnitude × 10^(3 − frac), rounded half to even; None if beyond ±2^62."""
    up = np.maximum(3 - frac, 0)
    down = np.maximum(frac - 3, 0)
    if down.any():
        divisor = _POW10[down]
        quotient, rest = np.divmod(magnitude, divisor)
        twice = 2 * rest
        quotient += (twice > divisor) | ((twice == divisor) & (quotient % 2 == 1))
        magnitude = quotient
    scale = _POW10[up]
    if (magnitude > (NS_LIMIT - 1) // scale).any():
        return None
    ns: np.ndarray = (magnitude * scale).astype(np.int64)
    np.negative(ns, out=ns, where=negative)
    return ns

"""Trace numbers as exact integer nanoseconds: the per-event conversion, and why an event is
skipped. The batch path (traceview.columns.batch) shares its limits, so both accept exactly the
same values."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import msgspec

from traceview.columns import batch
from traceview.read.decode import RAW_NUMBER


class NeedsExactTimes(Exception):
    """A float timestamp too large to hold ns precision: decode this chunk exactly."""


class NeedsSlowDecode(Exception):
    """A raw ts or dur that the exact decoder's old fields rejected: decode this chunk by the
    slow path, as that decoder's rejection did (traceview.read.decode.check_raw_numbers)."""


# Why an event was skipped (BadNumber's message, counted in the warnings).
NOT_FINITE = "events skipped: ts missing, or ts or dur not a finite number"
OUT_OF_RANGE = "events skipped: ts or dur out of range (beyond ±2^62 ns, about ±146 years)"
NEGATIVE_DUR = "events skipped: dur negative"


class BadNumber(Exception):
    """A timestamp or duration that cannot be used; the message says why."""

    def __init__(self, why: str = NOT_FINITE) -> None:
        super().__init__(why)


def value_of(number: Any) -> Any:
    """A ts or dur as the per-event path takes it: raw text (an exactly decoded event's) as
    the ``Decimal`` (or None) it spells."""
    if type(number) is msgspec.Raw:
        return RAW_NUMBER.decode(number)
    return number


def to_ns(value: float | int | Decimal) -> int:
    """A µs value from the trace as exact integer nanoseconds (|ns| < 2^62, so sums fit)."""
    ns = _to_ns(value)
    if not -batch.NS_LIMIT < ns < batch.NS_LIMIT:
        raise BadNumber(OUT_OF_RANGE)
    return ns


def _to_ns(value: float | int | Decimal) -> int:
    kind = type(value)
    if kind is int:
        return value * 1000  # type: ignore[return-value]
    if kind is float:
        if -batch.FLOAT_EXACT_LIMIT < value < batch.FLOAT_EXACT_LIMIT:  # False for NaN
            return round(value * 1000)
        if value != value or value in (float("inf"), float("-inf")):
            raise BadNumber
        raise NeedsExactTimes
    if isinstance(value, Decimal) and value.is_finite():
        try:
            return int((value * 1000).to_integral_value())
        except ArithmeticError:  # an exponent beyond Decimal's range, e.g. 1e999999999
            raise BadNumber(OUT_OF_RANGE) from None
    raise BadNumber

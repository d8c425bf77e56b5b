"""Exact ns from raw JSON number text, a batch at a time, against Decimal (the per-event path)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from traceview.columns.numbers import BadNumber, to_ns, value_of
from traceview.columns.raw_numbers import NS_LIMIT, ns_of_raws
from traceview.read.decode import RAW_NUMBER


def _reference(text: bytes) -> int | None:
    """The per-event path's ns of a number's text (None: it skips the event)."""
    value = RAW_NUMBER.decode(text)
    if value is None:
        return None
    try:
        return to_ns(value)
    except BadNumber:
        return None


def _by_fraction(text: bytes) -> int:
    """ns by exact rational arithmetic, rounded half to even (a second reference)."""
    scaled = Fraction(text.decode()) * 1000
    floor = scaled.numerator // scaled.denominator
    rest = scaled - floor
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and floor % 2 == 1):
        return floor + 1
    return floor


# JSON number text: sign, integer part (no leading zeros), fraction, exponent.
_INT_PART = st.one_of(st.just("0"), st.from_regex(r"[1-9][0-9]{0,19}", fullmatch=True))
_FRACTION = st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,8}", fullmatch=True))
_EXPONENT = st.one_of(
    st.just(""), st.just(""), st.from_regex(r"[eE][+-]?[0-9]{1,3}", fullmatch=True)
)
NUMBERS = st.builds(
    lambda sign, whole, fraction, exponent: f"{sign}{whole}{fraction}{exponent}".encode(),
    st.sampled_from(["", "-"]),
    _INT_PART,
    _FRACTION,
    _EXPONENT,
)
# The forms traces write: µs with up to 3 decimals, epoch µs with ns digits, integers.
EPOCH = st.builds(
    lambda us, ns: f"{us}.{ns:03d}".encode(),
    st.integers(10**15, 2 * 10**15),
    st.integers(0, 999),
)
PLAIN = st.builds(
    lambda us, digits: (f"{us}" + (f".{digits}" if digits else "")).encode(),
    st.integers(-(2**53), 2**53),
    st.one_of(st.just(""), st.from_regex(r"[0-9]{1,3}", fullmatch=True)),
)


@given(st.lists(st.one_of(NUMBERS, EPOCH, PLAIN), min_size=1, max_size=30))
def test_batch_matches_decimal_or_declines(texts: list[bytes]) -> None:
    """Either every value equals the Decimal path's ns, or the batch goes the per-event path,
    and only when one value is out of the plain forms' reach."""
    got = ns_of_raws([msgspec.Raw(t) for t in texts])
    expected = [_reference(t) for t in texts]
    if got is None:
        assert any(_declined(t) for t in texts), texts
        return
    assert got.tolist() == expected
    assert got.tolist() == [_by_fraction(t) for t in texts]


def _declined(text: bytes) -> bool:
    """A value the batch parser leaves to the per-event path: an exponent, more than 19
    digits, or one beyond ±2^62 ns (which that path skips)."""
    digits = sum(c.isdigit() for c in text.decode())
    return b"e" in text.lower() or digits > 19 or _reference(text) is None


@given(st.lists(st.one_of(EPOCH, PLAIN), min_size=1, max_size=30))
def test_plain_forms_always_parsed(texts: list[bytes]) -> None:
    """The forms traces write never leave the batch path (when in range)."""
    texts = [t for t in texts if abs(_by_fraction(t)) < NS_LIMIT] or [b"0"]
    got = ns_of_raws([msgspec.Raw(t) for t in texts])
    assert got is not None
    assert got.tolist() == [_by_fraction(t) for t in texts]


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        (b"4891434721856.368", 4891434721856368),
        (b"1712195495505582.988", 1712195495505582988),
        (b"320.910", 320910),
        (b"0", 0),
        (b"-0", 0),
        (b"-0.0005", 0),  # half to even: -0.5 ns is 0
        (b"0.0015", 2),
        (b"0.0025", 2),
        (b"-12.3456", -12346),
        (b"4611686018427387.903", NS_LIMIT - 1),  # the largest in range
        (b"9007199254740.993", 9007199254740993),  # above 2^53 ns: no float could hold it
    ],
)
def test_known_values(text: bytes, ns: int) -> None:
    got = ns_of_raws([msgspec.Raw(text)])
    assert got is not None and got.tolist() == [ns]
    assert _reference(text) == ns


@pytest.mark.parametrize(
    "text",
    [
        b"4611686018427387.904",  # 2^62 ns: out of range
        b"1e3",
        b"1.5E-2",
        b"null",
        b'"12.5"',
        b"0.00000000000000000015",  # 20 digits
        b"99999999999999999999",
    ],
)
def test_declined_values_go_per_event(text: bytes) -> None:
    """None: the batch is converted event by event (which skips, counts or converts it)."""
    assert ns_of_raws([msgspec.Raw(b"1.5"), msgspec.Raw(text)]) is None


def test_values_not_raw_go_per_event() -> None:
    """Values of the slow path (Decimal, None) mixed in: the per-event path."""
    assert ns_of_raws([msgspec.Raw(b"1"), Decimal("2")]) is None
    assert ns_of_raws([msgspec.Raw(b"1"), None]) is None
    assert ns_of_raws([]) is not None and len(ns_of_raws([])) == 0  # type: ignore[arg-type]


def test_value_of_raw_is_the_old_decoders_value() -> None:
    """The per-event path sees what the exact decoder's ``Decimal | None`` fields gave."""
    assert value_of(msgspec.Raw(b"4891434721856.368")) == Decimal("4891434721856.368")
    assert value_of(msgspec.Raw(b"null")) is None
    assert value_of(msgspec.Raw(b'"12.5"')) == Decimal("12.5")
    assert value_of(1.5) == 1.5
    with pytest.raises(msgspec.ValidationError):
        value_of(msgspec.Raw(b"true"))

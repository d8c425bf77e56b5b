"""trim's ts parsing: the text of a number as exact ns, equal to Decimal arithmetic."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from traceview.app.trim_copy import ns_values, ts_ns


def _decimal_ns(text: str) -> int:
    return int((Decimal(text) * 1000).to_integral_value(ROUND_HALF_EVEN))


@given(
    st.integers(-(10**17), 10**17),
    st.one_of(st.none(), st.text("0123456789", min_size=1, max_size=6)),
)
def test_ts_text_is_exact_ns(whole: int, frac: str | None) -> None:
    text = f"{whole}" if frac is None else f"{whole}.{frac}"
    assert ts_ns(msgspec.Raw(text.encode())) == _decimal_ns(text)


def test_what_is_no_time() -> None:
    for text in (b"null", b"NaN", b"[1]", b'"x"', b"true"):
        assert ts_ns(msgspec.Raw(text)) is None, text


_RAW_TEXTS = st.one_of(
    st.integers(-(10**20), 10**20).map(str),
    st.decimals(allow_nan=False, allow_infinity=False, places=6).map(str),
    st.sampled_from(["null", "NaN", "[1]", '"x"', "true", "1e3", "-0", "4891434721916.934"]),
)


@given(st.lists(_RAW_TEXTS, max_size=12))
def test_a_batch_of_numbers_is_each_one_s_ts_ns(texts: list[str]) -> None:
    raws = [msgspec.Raw(t.encode()) for t in texts]
    assert ns_values(raws) == [ts_ns(raw) for raw in raws]

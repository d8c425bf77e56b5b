"""segment_order is lex_order((start, segment)), permutation for permutation."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from traceview.aggregate.order import lex_order
from traceview.aggregate.segment_order import segment_order


@given(
    st.lists(st.tuples(st.integers(-5, 5), st.integers(0, 6)), max_size=60),
    st.sampled_from([0, 1 << 8, (1 << 16) - 7, 1 << 16, 1 << 40]),
)
def test_same_permutation_as_lex_order(rows: list[tuple[int, int]], offset: int) -> None:
    start = np.array([s for s, _ in rows], dtype=np.int64)
    segment = np.array([g for _, g in rows], dtype=np.int64) + offset  # 16 bits and beyond
    assert segment_order(start, segment).tolist() == lex_order((start, segment)).tolist()
    assert segment_order(start, segment).tolist() == np.lexsort((start, segment)).tolist()

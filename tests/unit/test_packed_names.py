"""PackedNames behaves as the list of str it replaces: items, iteration, subsets, pickling and
the string order of ``rank`` (against Python's own sort), hostile text included."""

from __future__ import annotations

import itertools
import pickle
import random
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from traceview.columns import packed_names
from traceview.columns.packed_names import PackedNames, ranks, ranks_of, subset

# Bytes that tie or sort on their edges: NUL (a shorter name is padded with it), a lone
# surrogate, 2-, 3- and 4-byte characters, the highest BMP character, ASCII.
_TEXT = st.text(alphabet=["a", "b", "\0", "\ud800", "\udfff", "é", "\U0001f600", "\uffff"])
_NAMES = st.lists(_TEXT, max_size=40)
_PREFIXED = st.tuples(st.text(alphabet="xy:<", max_size=24), _NAMES).map(
    lambda p: [p[0] + n for n in p[1]]  # long shared prefixes: several rounds of 8 bytes
)


def _python_rank(names: list[str]) -> np.ndarray:
    rank = np.empty(len(names), dtype=np.int64)
    rank[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    return rank


@given(st.one_of(_NAMES, _PREFIXED))
def test_items_iteration_and_equality(names: list[str]) -> None:
    packed = PackedNames.of(names)
    assert len(packed) == len(names)
    assert list(packed) == names
    assert [packed[i] for i in range(len(names))] == names
    assert packed == names and packed == PackedNames.of(list(names))
    if names:
        assert packed[-1] == names[-1]


@given(st.one_of(_NAMES, _PREFIXED))
def test_rank_is_the_string_order(names: list[str]) -> None:
    assert np.array_equal(PackedNames.of(names).rank(), _python_rank(names))
    assert np.array_equal(ranks(names), _python_rank(names))


@given(_NAMES, st.data())
def test_take_pickle_and_draining(names: list[str], data: st.DataObject) -> None:
    ids = data.draw(st.lists(st.integers(0, max(len(names) - 1, 0)), max_size=12))
    ids = ids if names else []
    packed = PackedNames.of(names)
    chosen = np.array(ids, dtype=np.int64)
    assert list(packed.take(chosen)) == [names[i] for i in ids]
    with mock.patch.object(packed_names, "_TAKE_BYTES", 3):  # names gathered in many chunks
        assert list(packed.take(chosen)) == [names[i] for i in ids]
    assert list(subset(names, chosen)) == [names[i] for i in ids]
    assert list(subset(packed, chosen)) == [names[i] for i in ids]
    assert [subset(packed, chosen)[i] for i in range(len(ids))] == [names[i] for i in ids]
    with mock.patch.object(packed_names, "_CHUNK", 2):  # offsets taken in many chunks
        assert list(subset(packed, chosen)) == [names[i] for i in ids]
        assert list(packed) == names
    assert pickle.loads(pickle.dumps(packed)) == names
    drained = list(names)
    assert PackedNames.draining(drained) == packed and drained == []


def test_names_packed_take_a_third_less_memory() -> None:
    """120-character names: their packed bytes and offsets against a list of str (~0.72)."""
    import sys

    names = [
        f"void ns::kernel_{i:07d}<float, 4>(int, float*)".ljust(120, "x") for i in range(10**5)
    ]
    as_list = sys.getsizeof(names) + sum(sys.getsizeof(n) for n in names)
    assert PackedNames.of(names).nbytes < 0.8 * as_list


@pytest.mark.parametrize("count", [500, 20])  # most names (all ranked), a few (those only)
def test_ranks_of_some_ids_order_them_as_their_names(count: int) -> None:
    """Their order is that of the strings, equal ids equal, for packed names and a plain
    list alike, whether the ids are most of the names or a few."""
    rng = random.Random(3)
    texts = list(
        {"".join(rng.choice("ab\x00é") for _ in range(rng.randrange(6))) for _ in range(300)}
    )
    ids = np.array([rng.randrange(len(texts)) for _ in range(count)], dtype=np.int32)
    for names in (PackedNames.of(texts), texts):
        got = ranks_of(names, ids)
        for i, j in itertools.product(range(count), range(0, count, 3)):
            a, b = texts[ids[i]], texts[ids[j]]
            assert (got[i] < got[j]) == (a < b) and (got[i] == got[j]) == (a == b)

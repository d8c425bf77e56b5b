"""Interner.ids_of: the ids a value at a time would give, new values interned once each."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from traceview.columns.intern import Interner, carry_key


def _one_by_one(interner: Interner, values: list[Any]) -> list[int]:
    return [interner.id(v) for v in values]


def test_ids_of_many_are_the_ids_of_each_in_turn() -> None:
    first = ["b", "a", "b", "c", "a", "b"]
    later = ["c", "d", "a", "d", "e"]
    bulk, single = Interner(), Interner()
    for values in (first, later, []):
        ids = bulk.ids_of(values)
        assert ids.dtype == np.int32
        assert ids.tolist() == _one_by_one(single, values)
    assert bulk.values == single.values == ["b", "a", "c", "d", "e"]


def test_a_carried_value_and_what_it_becomes_share_an_id() -> None:
    big = 2**70  # kept as its text: beyond 64 bits
    values = [(0, 7), (0, big), (0, str(big)), (0, 7), (1, big)]
    bulk, single = Interner(carry_key), Interner(carry_key)
    assert bulk.ids_of(values).tolist() == _one_by_one(single, values) == [0, 1, 1, 0, 2]
    assert bulk.values == single.values == [(0, 7), (0, str(big)), (1, str(big))]


def test_each_new_value_is_interned_once(monkeypatch: pytest.MonkeyPatch) -> None:
    interner, calls = Interner(), []
    real = interner.id
    monkeypatch.setattr(interner, "id", lambda v: calls.append(v) or real(v))
    interner.ids_of(["x", "y"] * 1000)
    assert calls == ["x", "y"]

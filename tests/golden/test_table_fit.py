"""Every terminal golden (tests/golden/expected, 80/120/200 columns) is a table a person can
read: no column squeezed to one character a line (the steps table at 80 columns was: its Step column
folded letter by letter and its numbers cropped, ``54.`` for 54.49)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

EXPECTED = Path(__file__).parent / "expected"
GOLDENS = sorted([*EXPECTED.glob("*-[0-9]*.txt"), *EXPECTED.glob("commands/*-[0-9]*0.txt")])


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda p: p.stem)
def test_no_column_is_folded_letter_by_letter(golden: Path) -> None:
    lines = golden.read_text(encoding="utf-8").splitlines()
    single = [len(line.replace(" ", "")) == 1 for line in lines]
    runs = [i for i in range(len(single) - 2) if all(single[i : i + 3])]
    assert not runs, f"line {runs[0] + 1}: a column one character wide"


def test_steps_rows_keep_their_numbers_whole() -> None:
    """Each step row shows its whole name and numbers with their unit (nothing cropped)."""
    steps = [g for g in GOLDENS if "-steps-" in g.name]
    assert steps
    for golden in steps:
        rows = [line for line in golden.read_text().splitlines() if "ProfilerStep#" in line]
        assert rows, golden.name
        for row in rows:
            cells = re.split(r"\s{2,}", row.strip())
            assert re.fullmatch(r"ProfilerStep#\d+( \(gpu annotation\))?", cells[0]), row
            assert all(re.fullmatch(r"-|\d+|[\d,.]+( [mµn]?s)?", c) for c in cells[1:]), row

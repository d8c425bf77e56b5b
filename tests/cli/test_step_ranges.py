"""--pstep selections kept as ranges and intersected with the steps that exist (issue #21)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import load_generator, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from test_gaps_analysis import make

from traceview.analyses.core.steps import (
    describe_ranges,
    in_steps,
    pick_steps,
    step_windows,
)
from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.app import reading
from traceview.columns.model import StepWindow
from traceview.errors import UsageError
from traceview.options import ReadOptions
from traceview.parsing import parse_steps

gen = load_generator()


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Steps 5-24 (every launch in its own step half the time)."""
    path = tmp_path_factory.mktemp("steps") / "t.json"
    gen.write_scale_trace(path, kernels=400, names=7, streams=3, steps=20)
    return path


def test_parse_steps_gives_sorted_merged_ranges() -> None:
    assert parse_steps("9, 5-7,8,20-30,25-26,2") == ((2, 2), (5, 9), (20, 30))
    assert parse_steps("5-1000000000000") == ((5, 1_000_000_000_000),)


def test_pick_steps_names_the_holes() -> None:
    chosen, missing = pick_steps([(1, 10), 12], [2, 3, 5, 12, 40])
    assert chosen == [2, 3, 5, 12]
    assert missing == [(1, 1), (4, 4), (6, 10)]


def test_describe_ranges_is_cut_to_a_readable_length() -> None:
    ranges = [(n, n) for n in range(0, 2_000_000, 2)]
    text = describe_ranges(ranges)
    assert text.startswith("0, 2, 4, 6, 8, 10, ... (999988 more), 1999988,")
    assert text.endswith("1999998") and len(text) < 200


def test_a_range_far_beyond_the_steps_is_one_short_usage_error(trace: Path) -> None:
    r = run_cli("kernels", str(trace), "--pstep", "5-1000000000", "--no-cache")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (
        "traceview: error: --pstep: no ProfilerStep 25-1000000000 in this trace "
        "(steps found: 5-24)\n"
    )


def test_step_ranges_select_what_the_step_numbers_select(trace: Path) -> None:
    events = reading.read_trace(trace, ReadOptions(quiet=True, cache=False))
    by_range = analyse_kernels(events, KernelOptions(top=0, steps=parse_steps("7-9,12")))
    by_number = analyse_kernels(events, KernelOptions(top=0, steps=(7, 8, 9, 12)))
    assert by_range.rows == by_number.rows and by_range.count == 80
    assert by_range.options.steps == (7, 8, 9, 12)
    with pytest.raises(UsageError, match=r"no ProfilerStep 25-30 in this trace"):
        analyse_kernels(events, KernelOptions(steps=((20, 30),)))


def test_step_range_in_json_lists_the_steps_chosen(trace: Path) -> None:
    r = run_cli("kernels", str(trace), "--pstep", "5-6", "-f", "json", "--no-cache")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["selection"]["steps"] == [5, 6]
    g = run_cli("gaps", str(trace), "--pstep", "5-6", "-f", "json", "--no-cache")
    assert g.returncode == 0, g.stderr


@settings(max_examples=200, deadline=None)
@given(
    ts=st.lists(st.integers(0, 100), min_size=1, max_size=30),
    windows=st.lists(
        st.tuples(st.integers(0, 100), st.integers(0, 40), st.booleans()), min_size=1, max_size=8
    ),
    data=st.data(),
)
def test_in_steps_marks_what_a_pass_per_window_marks(
    ts: list[int], windows: list[tuple[int, int, bool]], data: st.DataObject
) -> None:
    """Overlapping windows, CPU and GPU-only, any subset of the steps."""
    steps = [StepWindow(i, start, start + length, on_gpu) for i, (start, length, on_gpu) in
             enumerate(windows)]  # fmt: skip
    events = make([("k", (0, 7), t, 1) for t in ts], steps=steps)
    chosen = data.draw(st.lists(st.sampled_from(range(len(steps))), min_size=1, unique=True))
    by_window = step_windows(events)
    want = np.zeros(len(ts), dtype=bool)
    for n in chosen:
        w = by_window[n]
        want |= (events.gpu.ts >= w.start_ns) & (events.gpu.ts <= w.end_ns)
    assert in_steps(events, chosen, by_window).tolist() == want.tolist()

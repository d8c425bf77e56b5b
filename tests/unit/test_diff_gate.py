"""The diff analysis on hand-built snapshots: modes, medians, the gate's noise floors, the cut."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from conftest import ROOT

from traceview import __version__
from traceview.analyses import snapshot as snapshot_module
from traceview.analyses.core.steps import step_table
from traceview.analyses.diff import (
    DiffOptions,
    DiffReport,
    Side,
    compare,
    describe_steps,
    percent_change,
)
from traceview.analyses.gaps import GapOptions, analyse_gaps
from traceview.analyses.snapshot import (
    KIND,
    KernelStat,
    OtherKernels,
    Snapshot,
    SnapshotTrace,
    StepStat,
    Totals,
    build_snapshot,
    digest,
)
from traceview.app.reading import read_trace
from traceview.columns.model import TraceEvents
from traceview.errors import UsageError
from traceview.options import ReadOptions
from traceview.parsing import parse_percent

GATE = DiffOptions(max_regression_pct=5.0)


def snap(kernels: dict[str, list[float]], idle: float = 100.0) -> Snapshot:
    """Steps 1..n; ``kernels``: name → its time (µs) in each step, one launch where > 0."""
    n = len(next(iter(kernels.values())))
    stats = tuple(
        KernelStat(name, sum(t > 0 for t in times), sum(times), sum(times) / max(1, len(times)),
                   0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                   tuple(int(t > 0) for t in times), tuple(times))
        for name, times in kernels.items()
    )  # fmt: skip
    steps = tuple(
        StepStat(i + 1, 1000.0, sum(k.step_counts[i] for k in stats),
                 sum(k.step_totals_us[i] for k in stats), idle, 50.0, False)
        for i in range(n)
    )  # fmt: skip
    totals = Totals(sum(k.count for k in stats), sum(k.total_us for k in stats), len(stats),
                    0.0, 0.0, idle * n)  # fmt: skip
    other = OtherKernels(0, 0, 0.0, (0,) * n, (0.0,) * n, ())
    return Snapshot(
        KIND, 1, __version__, SnapshotTrace("t.json"), totals, (), steps, 0, stats, other
    )


def diff(base: Snapshot, new: Snapshot, options: DiffOptions = GATE) -> DiffReport:
    return compare(Side("base", "snapshot", base), Side("new", "snapshot", new), options)


def failed(report: DiffReport) -> list[str]:
    return [f.name for f in report.gate.failures]


def test_per_step_medians_ignore_one_slow_step() -> None:
    base = snap({"gemm": [100, 100, 100], "copy": [50, 50, 50]})
    new = snap({"gemm": [100, 101, 400], "copy": [50, 50, 50]})
    report = diff(base, new)
    assert report.mode == "median" and report.gate.passed
    assert report.kernels[0].time_after_us == 101
    assert report.kernels[0].mean_after_us == pytest.approx(601 / 3)  # over all launches


def test_whole_trace_totals_when_a_side_has_one_step() -> None:
    report = diff(snap({"gemm": [100]}), snap({"gemm": [100, 130]}))
    assert report.mode == "total"
    assert failed(report) == ["kernel time (µs)", "gemm"]  # 100 → 230 µs in total


def test_min_time_floor_keeps_tiny_kernels_out() -> None:
    base = snap({"gemm": [1000] * 3, "tiny": [5] * 3})
    new = snap({"gemm": [1000] * 3, "tiny": [9] * 3})  # +80%, but 9 µs < 10 µs
    everything = replace(GATE, min_share_pct=0.0)
    assert diff(base, new, everything).gate.passed
    assert failed(diff(base, new, replace(everything, min_time_ns=0))) == ["tiny"]


def test_min_share_keeps_small_kernels_out() -> None:
    base = snap({"gemm": [10_000] * 3, "small": [50] * 3})  # 0.5% of kernel time
    new = snap({"gemm": [10_000] * 3, "small": [75] * 3})
    report = diff(base, new)
    assert report.gate.passed and not report.kernels[0].gated
    assert failed(diff(base, new, replace(GATE, min_share_pct=0.4))) == ["small"]


def test_new_kernels_fail_only_through_total_kernel_time() -> None:
    base = snap({"gemm": [100] * 3})
    new = snap({"gemm": [100] * 3, "extra": [20] * 3})
    report = diff(base, new)
    assert failed(report) == ["kernel time (µs)"]
    assert [k.name for k in report.new_kernels] == ["extra"] and report.new_kernels[0].pct is None


def test_vanished_kernels_and_improvements_pass() -> None:
    base = snap({"gemm": [100] * 3, "old": [20] * 3})
    report = diff(base, snap({"gemm": [90] * 3}))
    assert report.gate.passed and [k.name for k in report.vanished] == ["old"]


def test_idle_gate_and_no_gate() -> None:
    base, new = snap({"gemm": [100] * 3}, idle=100), snap({"gemm": [100] * 3}, idle=120)
    assert failed(diff(base, new, DiffOptions(max_idle_regression_pct=10))) == ["GPU idle (µs)"]
    assert diff(base, new, DiffOptions(max_idle_regression_pct=25)).gate.passed
    ungated = diff(snap({"gemm": [1] * 3}), snap({"gemm": [9] * 3}), DiffOptions())
    assert ungated.gate.passed and not ungated.gate.active


def test_top_cuts_rows_but_the_gate_sees_every_kernel() -> None:
    names = {f"k{i}": [100.0] * 3 for i in range(5)}
    slower = {**names, "k4": [200.0] * 3}
    report = diff(snap(names), snap(slower), replace(GATE, top=1))
    assert len(report.kernels) == 1 and report.left_out["kernels"] == 4
    assert "k4" in failed(report)


def test_pstep_on_both_sides() -> None:
    base, new = snap({"gemm": [100, 100, 100]}), snap({"gemm": [100, 100, 200]})
    assert diff(base, new, replace(GATE, steps=(1, 2))).gate.passed
    report = diff(base, new, replace(GATE, steps=(3,)))
    assert report.mode == "steps" and "gemm" in failed(report)
    with pytest.raises(UsageError, match=r"no ProfilerStep 4 in BASE base \(steps found: 1-3\)"):
        diff(base, new, replace(GATE, steps=(4,)))


@pytest.fixture(scope="module")
def demo() -> TraceEvents:
    return read_trace(ROOT / "fixtures" / "demo.json.gz", ReadOptions(quiet=True))


def test_step_figures_agree_with_gaps_and_steps(demo: TraceEvents) -> None:
    """Step idle is what ``gaps --pstep N`` reports per device, summed; kernel time as steps."""
    snapshot = build_snapshot(demo)
    for step in snapshot.steps:
        devices = analyse_gaps(demo, GapOptions(steps=(step.step,), largest=0, top=0)).devices
        assert round(step.idle_us * 1000) == sum(d.idle_ns for d in devices)  # the file: µs
    rows = step_table(demo)
    assert [s.kernel_time_us for s in snapshot.steps] == [r.kernel_time_ns / 1000 for r in rows]


def test_storage_cut_is_not_mistaken_for_new_kernels(demo: TraceEvents) -> None:
    full, cut = build_snapshot(demo), build_snapshot(demo, max_kernels=10)
    assert len(cut.kernels) < 50 and cut.other.kernels == 50 - len(cut.kernels)
    assert len(cut.other.digests) == cut.other.kernels
    stored = {k.name for k in cut.kernels}
    hidden = {full_k.name for full_k in full.kernels} - stored
    assert cut.other.digests == tuple(sorted(digest(n) for n in hidden))  # as strings sort
    covered = sum(k.total_us for k in cut.kernels) / cut.totals.total_us
    assert covered >= 0.999
    report = diff(full, cut)
    assert not report.new_kernels and not report.vanished and report.gate.passed
    assert any("below the other side's snapshot cut" in n for n in report.notes)


def test_step_cap_keeps_the_last_steps(demo: TraceEvents) -> None:
    capped = build_snapshot(demo, max_steps=2)
    assert [s.step for s in capped.steps] == [9, 10] and capped.steps_left_out == 4
    assert all(len(k.step_counts) == 2 for k in capped.kernels)
    report = diff(capped, capped)
    assert "base keeps only the last 2 of 6 steps" in report.notes
    with pytest.raises(UsageError, match="keeps only the last 2 steps"):
        diff(capped, capped, replace(GATE, steps=(5,)))


@pytest.mark.parametrize(
    ("text", "value"), [("5%", 5.0), ("5", 5.0), (" 2.5 % ", 2.5), (".5", 0.5)]
)
def test_parse_percent(text: str, value: float) -> None:
    assert parse_percent(text, "--max-regression") == value


@pytest.mark.parametrize("text", ["-5", "five", "5%%", "", "1e3"])
def test_parse_percent_rejects(text: str) -> None:
    with pytest.raises(UsageError, match="expected a percentage"):
        parse_percent(text, "--max-regression")


def test_percent_change_and_step_lists() -> None:
    assert percent_change(100, 130) == pytest.approx(30)
    assert percent_change(0, 0) == 0 and percent_change(0, 5) is None
    assert percent_change(None, 5) is None
    assert describe_steps([7, 5, 6, 9]) == "5-7, 9" and describe_steps([]) == "none"


def test_stored_kernels_are_capped_whatever_they_cover(demo: TraceEvents) -> None:
    """Many equal kernels (10^5 distinct names): no step arrays per name for all of them."""
    capped = build_snapshot(demo, max_kernels=10, max_stored=20)
    assert len(capped.kernels) == 20 and capped.other.kernels == 30
    assert len(capped.other.digests) == 30
    assert not diff(build_snapshot(demo), capped).vanished


def test_digests_as_numbers_write_back_as_digest_does() -> None:
    """Digests kept as integers give the same text, leading zeros too, and sort like it."""
    names = [f"kernel_{i}" for i in range(2000)]
    names += [next(f"z{i}" for i in range(100_000) if digest(f"z{i}").startswith("000"))]
    numbers = np.array([snapshot_module._digest_number(n) for n in names], dtype=np.uint64)
    numbers.sort()
    assert snapshot_module._digest_texts(numbers) == tuple(sorted(digest(n) for n in names))

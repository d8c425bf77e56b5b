"""traceview gaps on every real trace with kernels, checked against tests/reference.py."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import reference as ref

from traceview.analyses.gaps import GapOptions, GapReport, analyse_gaps
from traceview.events import TraceEvents, collect_events
from traceview.read.reader import TraceReader

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
NOT_CHROME = {"hta__execution_trace__benchmark_simple_add_et.json.gz"}
FILES = sorted(p.name for p in TRACES.glob("*.json.gz") if p.name not in NOT_CHROME)
BUSY_SETS = [("kernel", "memcpy", "memset"), ("kernel",)]
PARAMS: list[str | None] = [*FILES] if FILES else [None]
US = 0.01  # µs tolerance on times


@functools.cache
def _load(name: str) -> tuple[list[dict[str, Any]], TraceEvents]:
    path = TRACES / name
    _, raw = ref.load_trace(path)
    return raw, collect_events(TraceReader(path))


@functools.cache
def _pair(name: str, busy: tuple[str, ...]) -> tuple[dict[str, Any], GapReport]:
    raw, events = _load(name)
    if not ref.gpu_events(raw, ("kernel",)):
        pytest.skip("no kernels in this trace")
    report = analyse_gaps(events, GapOptions(busy=busy, top=0, largest=5))
    return ref.gap_stats(raw, busy=busy), report


@pytest.fixture(params=PARAMS, ids=lambda n: str(n))
def trace(request: pytest.FixtureRequest) -> str:
    if not TRACES.is_dir() or request.param is None:
        pytest.skip(f"real traces not found at {TRACES}")
    return str(request.param)


def _close(got: float, want: float) -> bool:
    return abs(got - want) <= US


@pytest.mark.parametrize("busy", BUSY_SETS, ids=["all", "kernel"])
def test_streams_match_reference(trace: str, busy: tuple[str, ...]) -> None:
    want, report = _pair(trace, busy)
    got = {(s.device, s.stream): s.as_dict() for s in report.streams}
    assert set(got) == set(want["streams"])
    for key, expected in want["streams"].items():
        row = got[key]
        for f in ("events", "gaps", "overlaps", "zero_gaps"):
            assert row[f] == expected[f], (key, f)
        for f in ("gap_total_us", "overlap_us", "window_us", "busy_us", "idle_us"):
            assert _close(row[f], expected[f]), (key, f, row[f], expected[f])


@pytest.mark.parametrize("busy", BUSY_SETS, ids=["all", "kernel"])
def test_devices_and_totals_match_reference(trace: str, busy: tuple[str, ...]) -> None:
    want, report = _pair(trace, busy)
    got = {d.device: d for d in report.devices}
    assert set(got) == set(want["devices"])
    for device, expected in want["devices"].items():
        d = got[device]
        for f in ("window_us", "busy_us", "idle_us", "idle_pct"):
            assert _close(getattr(d, f), expected[f]), (device, f)
    totals = report.totals
    assert totals.gaps == want["totals"]["gaps"]
    for f in ("gap_total_us", "idle_us", "mean_gap_us"):
        assert _close(getattr(totals, f), want["totals"][f]), f
    assert sum(report.histogram.counts) == totals.gaps
    lengths = sorted(want["all_gaps_ns"], reverse=True)[: len(report.largest)]
    assert [round(g.length_us * 1000) for g in report.largest] == lengths


@pytest.mark.parametrize("busy", BUSY_SETS, ids=["all", "kernel"])
def test_transitions_match_reference(trace: str, busy: tuple[str, ...]) -> None:
    want, report = _pair(trace, busy)
    assert report.left_out_transitions == 0
    got = {(t.from_name, t.to_name): t for t in report.transitions}
    assert set(got) == set(want["transitions"])
    for key, expected in want["transitions"].items():
        t = got[key]
        assert t.count == expected["count"], key
        for f in ("total_us", "mean_us", "min_us", "max_us", "std_us"):
            assert _close(getattr(t, f), expected[f]), (key, f, getattr(t, f), expected[f])


@functools.cache
def _with_cpu(name: str) -> TraceEvents:
    return collect_events(TraceReader(TRACES / name), keep_cpu=True)


@pytest.mark.parametrize("busy", BUSY_SETS, ids=["all", "kernel"])
def test_largest_gaps_and_cpu_context_match_reference(trace: str, busy: tuple[str, ...]) -> None:
    raw, _ = _load(trace)
    if not ref.gpu_events(raw, ("kernel",)):
        pytest.skip("no kernels in this trace")
    report = analyse_gaps(_with_cpu(trace), GapOptions(busy=busy, top=0, largest=5))
    start = ref.trace_start_ns(raw)
    assert start is not None
    want = {
        (g["stream"], g["start_ns"] - start, g["length_ns"]): g for g in ref.largest_gaps(raw, busy)
    }
    assert len(report.largest) == min(5, len(want)) or len(want) > 5
    for gap in report.largest:
        key = ((gap.device, gap.stream), round(gap.start_us * 1000), round(gap.length_us * 1000))
        expected = want[key]
        assert (gap.before, gap.after) == (expected["before"], expected["after"])
        context = expected["context"]
        thread = None if context["thread"] is None else "/".join(map(str, context["thread"]))
        delay = None if context["delay_ns"] is None else context["delay_ns"] / 1000
        got = gap.context
        assert (got.thread, got.runtime, got.cpu_op) == (
            thread,
            context["runtime"],
            context["cpu_op"],
        ), key
        assert got.launch_delay_us == delay, key

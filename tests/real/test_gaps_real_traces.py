"""traceview gaps on every real trace with kernels, checked against tests/reference.py:
device gaps (every one, with before/after, host wait, cause), device figures, per-stream
gaps, transitions of both scopes and the CPU context of the largest gaps."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import reference as ref
from conftest import RealTrace

from traceview.aggregate.order import fits_int32
from traceview.analyses import gaps as gaps_module
from traceview.analyses.core.common import work_out
from traceview.analyses.core.devices import device_gaps, host_waits
from traceview.analyses.gaps import GapOptions, GapReport, analyse_gaps
from traceview.columns.model import TraceEvents

BUSY_SETS = [("kernel", "memcpy", "memset"), ("kernel",)]
US = 0.01  # µs tolerance on derived floats (means, std)


def _load(trace: RealTrace) -> tuple[list[dict[str, Any]], TraceEvents]:
    return trace.raw, trace.events


def _report(trace: RealTrace, busy: tuple[str, ...], per_stream: bool) -> GapReport:
    if not ref.gpu_events(trace.raw, ("kernel",)):
        pytest.skip("no kernels in this trace")
    options = GapOptions(busy=busy, top=0, largest=0, per_stream=per_stream)
    return trace.derived(("gaps", options), lambda: analyse_gaps(trace.events, options))


def _device_gaps(trace: RealTrace, busy: tuple[str, ...]) -> dict[Any, dict[str, Any]]:
    return trace.derived(("device_gaps", busy), lambda: ref.device_gaps(trace.raw, busy))


@pytest.fixture
def trace(real_trace: RealTrace) -> RealTrace:
    return real_trace


def _ns(us: float) -> int:
    return round(us * 1000)


@pytest.mark.parametrize("busy", BUSY_SETS, ids=["all", "kernel"])
def test_streams_match_reference(trace: RealTrace, busy: tuple[str, ...]) -> None:
    report = _report(trace, busy, False)
    want = ref.gap_stats(_load(trace)[0], busy=busy)
    got = {(s.device, s.stream): s.as_dict() for s in report.streams}
    assert set(got) == set(want["streams"])
    for key, expected in want["streams"].items():
        row = got[key]
        for f in ("events", "gaps", "overlaps", "zero_gaps"):
            assert row[f] == expected[f], (key, f)
        for f in ("gap_total_us", "overlap_us", "window_us", "busy_us", "idle_us"):
            assert _ns(row[f]) == _ns(expected[f]), (key, f, row[f], expected[f])


@pytest.mark.parametrize("busy", BUSY_SETS, ids=["all", "kernel"])
def test_device_figures_match_reference(trace: RealTrace, busy: tuple[str, ...]) -> None:
    report = _report(trace, busy, False)
    want = _device_gaps(trace, busy)
    got = {d.device: d for d in report.devices}
    assert set(got) == set(want)
    for device, expected in want.items():
        d = got[device]
        assert d.window_ns == expected["window_ns"], device
        assert d.busy_ns == expected["busy_ns"], device
        assert d.idle_ns == expected["idle_ns"], device
        assert d.gaps == len(expected["gaps"])
        assert d.gap_total_ns == sum(g["end_ns"] - g["start_ns"] for g in expected["gaps"])
        assert d.host_wait_ns == sum(g["host_wait_ns"] for g in expected["gaps"])
        assert d.launch_latency_ns == sum(g["launch_latency_ns"] for g in expected["gaps"])
        # idle is exactly the sum of the device gaps
        assert expected["idle_ns"] == sum(g["end_ns"] - g["start_ns"] for g in expected["gaps"])
    trace_devices = {d.device: d for d in report.trace.devices}
    assert {k: (v.window_ns, v.busy_ns) for k, v in trace_devices.items()} == {
        k: (v["window_ns"], v["busy_ns"]) for k, v in want.items()
    }
    totals = report.totals
    all_gaps = [g for v in want.values() for g in v["gaps"]]
    assert totals.gaps == len(all_gaps) == sum(report.histogram.counts)
    assert totals.gap_total_ns == sum(g["end_ns"] - g["start_ns"] for g in all_gaps)
    assert totals.idle_ns == sum(v["idle_ns"] for v in want.values())


@pytest.mark.parametrize("busy", BUSY_SETS, ids=["all", "kernel"])
def test_every_device_gap_matches_reference(trace: RealTrace, busy: tuple[str, ...]) -> None:
    """--largest 0 lists every device gap, longest first (ties: earliest first)."""
    raw, _ = _load(trace)
    report = _report(trace, busy, False)
    start = ref.trace_start_ns(raw)
    assert start is not None
    want = sorted(
        ((device, g) for device, v in _device_gaps(trace, busy).items() for g in v["gaps"]),
        key=lambda p: (-(p[1]["end_ns"] - p[1]["start_ns"]), p[1]["start_ns"]),
    )
    assert len(report.largest) == len(want)
    for gap, (device, expected) in zip(report.largest, want, strict=True):
        got = (gap.device, gap.start_ns, gap.gap_ns, gap.before, gap.after)
        length = expected["end_ns"] - expected["start_ns"]
        relative = expected["start_ns"] - start
        assert got == (device, relative, length, expected["before"], expected["after"])
        assert gap.ts_ns == expected["start_ns"]  # on the trace's clock
        assert (gap.device, gap.stream) == expected["after_stream"]
        assert gap.host_wait_ns == expected["host_wait_ns"]
        assert gap.cause == expected["cause"]


@pytest.mark.parametrize("busy", BUSY_SETS, ids=["all", "kernel"])
def test_per_stream_totals_match_reference(trace: RealTrace, busy: tuple[str, ...]) -> None:
    report = _report(trace, busy, True)
    want = ref.gap_stats(_load(trace)[0], busy=busy)
    assert report.totals.gaps == want["totals"]["gaps"] == sum(report.histogram.counts)
    for f in ("gap_total", "idle"):
        assert getattr(report.totals, f"{f}_ns") == _ns(want["totals"][f"{f}_us"]), f
    lengths = sorted(want["all_gaps_ns"], reverse=True)
    assert [g.gap_ns for g in report.largest] == lengths


@pytest.mark.parametrize("per_stream", [False, True], ids=["device", "stream"])
def test_transitions_match_reference(trace: RealTrace, per_stream: bool) -> None:
    busy = BUSY_SETS[0]
    report = _report(trace, busy, per_stream)
    assert report.left_out_transitions == 0
    if per_stream:
        want = ref.gap_stats(_load(trace)[0], busy=busy)["transitions"]
    else:
        values: dict[tuple[str, str], list[int]] = {}
        for v in _device_gaps(trace, busy).values():
            for g in v["gaps"]:
                values.setdefault((g["before"], g["after"]), []).append(g["end_ns"] - g["start_ns"])
        want = {k: ref.describe_ns(v) for k, v in values.items()}
    got = {(t.from_name, t.to_name): t for t in report.transitions}
    assert set(got) == set(want)
    for key, expected in want.items():
        t = got[key]
        assert t.count == expected["count"], key
        for f in ("total_ns", "min_ns", "max_ns"):
            assert getattr(t, f) == expected[f], (key, f)
        for f in ("mean", "std"):
            got_ns, want_us = getattr(t, f"{f}_ns"), expected[f"{f}_us"]
            assert abs(got_ns - want_us * 1000) <= US * 1000, (key, f, got_ns, want_us)


@pytest.mark.parametrize("min_gap_ns", [0, 2_000])
def test_lent_device_gaps_give_the_report_of_its_own(
    trace: RealTrace, monkeypatch: pytest.MonkeyPatch, min_gap_ns: int
) -> None:
    """The device gaps of the caller's Shared (report's: the transitions read them a pass
    at a time, _Pairs.of_gaps) give the report made from gaps of its own (their columns
    taken whole), passes of 5 gaps, with and without --min-gap."""
    if not ref.gpu_events(trace.raw, ("kernel",)):
        pytest.skip("no kernels in this trace")
    monkeypatch.setattr(gaps_module, "_PASS_GAPS", 5)
    lent_calls: list[int] = []
    of_gaps = gaps_module._Pairs.of_gaps

    def counted(cls: type, name: np.ndarray, gaps: Any) -> Any:
        lent_calls.append(len(gaps))
        return of_gaps(name, gaps)

    monkeypatch.setattr(gaps_module._Pairs, "of_gaps", classmethod(counted))
    options = GapOptions(top=0, largest=5, min_gap_ns=min_gap_ns)
    shared = work_out(trace.events)
    own = analyse_gaps(trace.events, options, replace(shared, gaps=None)).as_json()
    assert not lent_calls
    lent = analyse_gaps(trace.events, options, shared).as_json()
    if not lent_calls:
        pytest.skip("not every GPU row is busy here: the Shared's gaps are not lent")
    assert lent == own


def test_cpu_context_of_the_largest_gaps_matches_reference(trace: RealTrace) -> None:
    raw, events = _load(trace)
    if not ref.gpu_events(raw, ("kernel",)):
        pytest.skip("no kernels in this trace")
    report = analyse_gaps(events, GapOptions(largest=8))
    origin = ref.trace_start_ns(raw)
    assert origin is not None
    for gap in report.largest:
        start = origin + gap.start_ns
        end = start + gap.gap_ns
        (after,) = [
            e
            for e in ref.gpu_events(raw, ("kernel", "memcpy", "memset"))
            if ref.interval_ns(e)[0] == end
            and ref.event_name(e) == gap.after
            and ref.stream_key(e) == (gap.device, gap.stream)
            and ref.dur_ns(e) > 0
        ][:1]
        want = ref.held_by(raw, after, start, end, gap.host_wait_ns)
        got = gap.context.as_dict()
        if want is None:
            assert got is None
            continue
        assert got is not None
        assert got["thread"] == "/".join(map(str, want["thread"]))
        assert got["launch_ts_us"] == want["launch_ns"] / 1000
        assert [(h["name"], _ns(h["overlap_us"])) for h in got["ops"]] == want["ops"]
        assert [(h["name"], _ns(h["overlap_us"])) for h in got["syncs"]] == want["syncs"]
        assert _ns(got["covered_us"]) == want["covered_ns"]


def test_host_waits_are_int32_where_every_one_fits(trace: RealTrace) -> None:
    """device_gaps keeps the host waits in int32 where every one fits (4 B a gap held through
    summary, not 8): the same values as filled in int64."""
    events = trace.events
    _, gaps = device_gaps(events, np.arange(len(events.gpu.ts)), None, None)
    wide = replace(
        gaps, host_wait=np.empty(len(gaps), np.int64), launched=np.empty(len(gaps), bool)
    )
    host_waits(events, None, wide)
    fits = len(gaps) == 0 or fits_int32(wide.host_wait)
    assert gaps.host_wait.dtype == (np.int32 if fits else np.int64)
    assert gaps.host_wait.tolist() == wide.host_wait.tolist()

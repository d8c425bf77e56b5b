"""traceview.analyses.gaps on hand-built traces: exact ns figures, options, JSON shape."""

from __future__ import annotations

import gzip
import itertools
import json
import math
import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview.aggregate import moments
from traceview.analyses import gaps as gaps_module
from traceview.analyses.gaps import GapOptions, GapReport, analyse_gaps
from traceview.columns.model import StepWindow, StreamKey, TraceEvents
from traceview.columns.parallel import collect_events
from traceview.columns.schema import GPU_KINDS, GpuColumns, RuntimeColumns
from traceview.errors import UsageError
from traceview.parsing import parse_duration
from traceview.read.reader import ReadStats, TraceReader

Row = tuple[str, Any, int, int]  # name, stream key, ts ns, dur ns


def make(
    rows: list[Row],
    kinds: list[int] | None = None,
    steps: list[StepWindow] | None = None,
) -> TraceEvents:
    """TraceEvents from (name, (device, stream), ts_ns, dur_ns) rows; names/streams interned
    in order of appearance."""
    names: dict[str, int] = {}
    streams: dict[Any, int] = {}
    for name, key, _, _ in rows:
        names.setdefault(name, len(names))
        streams.setdefault(key, len(streams))
    ts = np.array([r[2] for r in rows], dtype=np.int64)
    dur = np.array([r[3] for r in rows], dtype=np.int64)
    gpu = GpuColumns(
        kind=np.array(kinds if kinds is not None else [0] * len(rows), dtype=np.int8),
        name=np.array([names[r[0]] for r in rows], dtype=np.int32),
        stream=np.array([streams[r[1]] for r in rows], dtype=np.int32),
        ts=ts,
        dur=dur,
        correlation=np.full(len(rows), -1, dtype=np.int64),
        launch=np.zeros(len(rows), dtype=np.int32),
    )
    empty = np.empty(0, dtype=np.int64)
    return TraceEvents(
        path="hand-made.json",
        size_bytes=0,
        header={},
        read=ReadStats(events=len(rows)),
        names=list(names),
        streams=[StreamKey(*key) for key in streams],
        gpu=gpu,
        runtime=RuntimeColumns(empty, empty),
        steps=steps or [],
        span_ns=(int(ts.min()), int((ts + dur).max())) if rows else None,
        quality=Counter(),
        launches=[(-1,) * 9],
    )


def run(rows: list[Row], **options: Any) -> GapReport:
    """Stream scope unless asked otherwise: these tests pin the per-stream definitions."""
    options.setdefault("per_stream", True)
    return analyse_gaps(make(rows), GapOptions(**options))


S = (0, 7)


# --------------------------------------------------------------------------------------------
# Per-stream figures
# --------------------------------------------------------------------------------------------


def test_zero_gap_overlap_nested_and_gap() -> None:
    rows = [
        ("a", S, 0, 100),
        ("b", S, 100, 50),  # zero gap after a
        ("c", S, 140, 60),  # overlaps b by 10
        ("d", S, 150, 10),  # inside c: overlap of 50 against c's end
        ("e", S, 300, 20),  # gap of 140 after d's end (160)
    ]
    report = run(rows)
    (s,) = report.streams
    assert (s.device, s.stream, s.events) == (0, 7, 5)
    assert (s.gaps, s.gap_total_ns) == (1, 140)
    assert (s.overlaps, s.overlap_ns, s.zero_gaps) == (2, 60, 1)
    assert (s.window_ns, s.busy_ns, s.idle_ns) == (320, 220, 100)
    assert report.totals.gaps == 1
    assert report.totals.idle_ns == 100
    assert report.totals.mean_gap_ns == 140
    assert report.totals.as_dict()["mean_gap_us"] == 0.14


def test_one_event_stream_and_empty_trace() -> None:
    report = run([("a", S, 1000, 250)])
    (s,) = report.streams
    assert (s.events, s.gaps, s.overlaps, s.zero_gaps) == (1, 0, 0, 0)
    assert (s.window_ns, s.busy_ns, s.idle_ns) == (250, 250, 0)
    assert report.transitions == [] and report.largest == []
    assert report.histogram.counts == [] and report.histogram.edges == []
    assert report.totals.mean_gap_ns == 0.0

    empty = run([])
    assert empty.streams == [] and empty.devices == [] and empty.totals.gaps == 0
    assert empty.as_json()["histogram"] == {
        "unit": "us",
        "edges": [],
        "counts": [],
        "below": 0,
        "above": 0,
    }


def test_unsorted_input_gives_the_same_report() -> None:
    rows = [(f"k{i % 3}", (0, 7 + i % 2), i * 1000, 300 + 7 * i) for i in range(40)]
    shuffled = rows[:]
    random.Random(1).shuffle(shuffled)
    assert run(shuffled).as_json()["streams"] == run(rows).as_json()["streams"]
    assert run(shuffled).as_json()["transitions"] == run(rows).as_json()["transitions"]


def test_zero_duration_events_touching() -> None:
    report = run([("a", S, 10, 0), ("b", S, 10, 0), ("c", S, 20, 0)])
    (s,) = report.streams
    assert (s.zero_gaps, s.gaps, s.gap_total_ns) == (1, 1, 10)
    assert (s.window_ns, s.busy_ns, s.idle_ns) == (10, 0, 10)


def test_ties_on_start_and_end_order_by_name_string() -> None:
    # "z" is interned first (id 0) yet sorts after "a": the order must follow the string.
    rows = [("z", S, 0, 10), ("a", S, 0, 10), ("m", S, 20, 5)]
    report = run(rows)
    pairs = {(t.from_name, t.to_name): t.count for t in report.transitions}
    assert pairs == {("a", "z"): 1, ("z", "m"): 1}


def test_ns_timestamps_from_a_json_trace(tmp_path: Path) -> None:
    # Written as text: a Python float cannot hold these digits (µs with a ns fraction).
    kernel = (
        '{{"ph": "X", "cat": "kernel", "name": "{}", "pid": 0, "tid": 7, "ts": {}, "dur": {}, '
        '"args": {{"device": 0, "stream": 7}}}}'
    )
    events = [
        kernel.format("first", "1712195495505582.988", "1.000"),
        kernel.format("second", "1712195495505584.001", "0.5"),
    ]
    path = tmp_path / "ns.json.gz"
    path.write_bytes(gzip.compress(('{"traceEvents": [' + ", ".join(events) + "]}").encode()))
    report = analyse_gaps(collect_events(TraceReader(path)), GapOptions())
    (s,) = report.streams
    assert (s.gaps, s.gap_total_ns) == (1, 13)
    (gap,) = report.largest
    assert gap.gap_ns == 13
    assert gap.start_ns == 1000  # relative to the span start (first kernel's ts)
    assert (gap.before, gap.after, gap.context.as_dict()) == ("first", "second", None)


# --------------------------------------------------------------------------------------------
# Devices, selection
# --------------------------------------------------------------------------------------------


def test_devices_union_across_streams() -> None:
    rows = [
        ("a", (0, 7), 0, 100),
        ("b", (0, 8), 50, 100),  # overlaps stream 7: device busy 0..150
        ("c", (0, 7), 300, 100),  # device idle 150..300
        ("d", (1, 7), 0, 10),
    ]
    report = run(rows)
    d0, d1 = report.devices
    assert (d0.device, d0.window_ns, d0.busy_ns, d0.idle_ns) == (0, 400, 250, 150)
    assert d0.idle_pct == pytest.approx(37.5)
    assert (d1.device, d1.idle_pct) == (1, 0.0)
    assert [(s.device, s.stream) for s in report.streams] == [(0, 7), (0, 8), (1, 7)]
    assert report.totals.idle_ns == 200  # stream (0, 7) idle 100..300


def test_stream_and_device_filters_match_by_text() -> None:
    rows = [("a", (0, 7), 0, 10), ("b", (0, 8), 0, 10), ("c", (1, 7), 0, 10)]
    assert [(s.device, s.stream) for s in run(rows, streams=["7"]).streams] == [(0, 7), (1, 7)]
    assert [(s.device, s.stream) for s in run(rows, devices=[1]).streams] == [(1, 7)]
    assert run(rows, streams=[8], devices=["1"]).streams == []


def test_busy_kinds_select_rows() -> None:
    rows = [("k", S, 0, 10), ("copy", S, 20, 10), ("k", S, 50, 10)]
    events = make(rows, kinds=[0, 1, 0])
    all_kinds = analyse_gaps(events, GapOptions())
    kernels = analyse_gaps(events, GapOptions(busy=("kernel",)))
    assert (all_kinds.streams[0].events, all_kinds.totals.gap_total_ns) == (3, 30)
    assert (kernels.streams[0].events, kernels.totals.gap_total_ns) == (2, 40)
    assert kernels.as_json()["busy"] == ["kernel"]


def test_step_filter_uses_step_windows() -> None:
    rows = [("a", S, 0, 10), ("b", S, 100, 10), ("c", S, 150, 10), ("d", S, 400, 10)]
    events = make(rows, steps=[StepWindow(1, 90, 200, False), StepWindow(2, 300, 500, True)])
    one = analyse_gaps(events, GapOptions(steps=(1,)))
    assert (one.streams[0].events, one.totals.gap_total_ns) == (2, 40)
    two = analyse_gaps(events, GapOptions(steps=(2,)))
    assert two.notes and "no CPU ProfilerStep" in two.notes[0]
    with pytest.raises(UsageError, match="no ProfilerStep 9"):
        analyse_gaps(events, GapOptions(steps=(9,)))


# --------------------------------------------------------------------------------------------
# min-gap, transitions, largest
# --------------------------------------------------------------------------------------------


def test_min_gap_filters_gaps_but_not_transitions() -> None:
    rows = [("a", S, 0, 10), ("a", S, 15, 10), ("a", S, 75, 10), ("a", S, 585, 10)]
    report = run(rows, min_gap_ns=50)
    assert (report.totals.gaps, report.totals.gap_total_ns) == (2, 550)  # 50 kept, 5 dropped
    assert report.streams[0].gaps == 2
    assert sum(report.histogram.counts) == 2
    assert [g.gap_ns for g in report.largest] == [500, 50]
    (t,) = report.transitions
    assert (t.count, t.total_ns, t.min_ns) == (3, 555, 5)


def test_transition_statistics() -> None:
    rows = [
        ("a", S, 0, 10),
        ("b", S, 20, 10),  # a→b 10
        ("a", S, 60, 10),  # b→a 30
        ("b", S, 100, 10),  # a→b 30
        ("a", S, 105, 10),  # b→a -5
        ("b", S, 115, 10),  # a→b 0
    ]
    report = run(rows)
    got = {(t.from_name, t.to_name): t for t in report.transitions}
    ab, ba = got["a", "b"], got["b", "a"]
    assert (ab.count, ab.total_ns, ab.min_ns, ab.max_ns) == (3, 40, 0, 30)
    assert ab.mean_ns == pytest.approx(40 / 3)
    assert ab.as_dict()["mean_us"] == pytest.approx(0.04 / 3)
    mean = 40 / 3
    spread = (10 - mean) ** 2 + (30 - mean) ** 2 + (0 - mean) ** 2
    assert ab.std_ns == pytest.approx(math.sqrt(spread / 2))  # n − 1
    assert (ba.count, ba.min_ns, ba.max_ns) == (2, -5, 30)
    assert ba.std_ns == pytest.approx(math.sqrt(2 * 17.5**2))
    single = run([("x", S, 0, 10), ("y", S, 30, 1)]).transitions[0]
    assert (single.count, single.std_ns, single.mean_ns) == (1, 0.0, 20)


def test_transition_sorting_and_top() -> None:
    rows = [("a", S, 0, 1), ("b", S, 100, 1), ("c", S, 102, 1), ("a", S, 103, 1)]
    rows += [("b", S, 104, 1), ("c", S, 110, 1)]
    # a→b: 99, 0 | b→c: 1, 5 | c→a: 0
    by = {k: [(t.from_name, t.to_name) for t in run(rows, sort=k).transitions] for k in
          ("total", "count", "avg", "avggap", "max", "maxgap", "min", "stdev")}  # fmt: skip
    assert by["total"] == [("a", "b"), ("b", "c"), ("c", "a")]
    assert by["count"] == [("a", "b"), ("b", "c"), ("c", "a")]  # ties by name
    assert by["avg"] == by["avggap"] == [("a", "b"), ("b", "c"), ("c", "a")]
    assert by["max"] == by["maxgap"] == [("a", "b"), ("b", "c"), ("c", "a")]
    assert by["min"] == [("b", "c"), ("a", "b"), ("c", "a")]
    assert by["stdev"] == [("a", "b"), ("b", "c"), ("c", "a")]
    cut = run(rows, top=1)
    assert len(cut.transitions) == 1 and cut.left_out_transitions == 2
    assert len(run(rows, top=0).transitions) == 3


@pytest.mark.parametrize("top", [0, 1, 3])
@pytest.mark.parametrize("sort", ["total", "count", "min", "stdev"])
def test_transitions_in_passes_equal_one_pass(
    monkeypatch: pytest.MonkeyPatch, top: int, sort: str
) -> None:
    """Pairs split into passes by the name before give the same table and count, every
    deviation to the last bit: its squares summed in batches cut where all the gaps' are
    (moments.accumulate's, of 16 gaps here; of 2^20 gaps each by default)."""
    rng = random.Random(7)
    ts = itertools.accumulate(rng.randrange(1, 10**7) for _ in range(200))
    rows = [(f"k{rng.randrange(6)}", S, t, rng.randrange(10**6)) for t in ts]
    defaults = moments.accumulate.__defaults__
    assert defaults is not None and defaults[0] == 1 << 20
    monkeypatch.setattr(moments.accumulate, "__defaults__", (16, *defaults[1:]))
    whole = run(rows, top=top, sort=sort)
    monkeypatch.setattr(gaps_module, "_PASS_GAPS", 7)  # ~29 passes
    split = run(rows, top=top, sort=sort)
    assert split.transitions == whole.transitions
    assert split.left_out_transitions == whole.left_out_transitions
    pairs = len(whole.transitions) + whole.left_out_transitions
    assert pairs > 20  # most of the 36 pairs of 6 names
    assert len(whole.transitions) == (top or pairs)


@pytest.mark.parametrize("passes", [False, True])
@pytest.mark.parametrize("sort", ["total", "count", "min", "stdev"])
def test_a_top_that_cuts_through_ties_keeps_the_first_names(
    monkeypatch: pytest.MonkeyPatch, sort: str, passes: bool
) -> None:
    """--top k is the first k rows of the whole ordered table: every pair here ties (one gap
    each, all equal), so the names decide, and they were first seen in reverse order."""
    after = [f"k{c}" for c in "zyxwvutsrq"]
    rows = [(name, S, i * 10, 5) for i, name in enumerate(n for k in after for n in ("a", k))]
    whole = run(rows, top=0, sort=sort).transitions
    assert [(t.from_name, t.to_name) for t in whole[:3]] == [("a", "kq"), ("a", "kr"), ("a", "ks")]
    if passes:
        monkeypatch.setattr(gaps_module, "_PASS_GAPS", 4)
    for top in (1, 2, 5, 13):
        assert run(rows, top=top, sort=sort).transitions == whole[:top], top


def test_largest_gaps() -> None:
    rows: list[Row] = [("a", (0, 7), 1000, 10), ("b", (0, 7), 1100, 10), ("c", (0, 7), 1200, 10)]
    rows += [("x", (1, "s"), 1000, 10), ("y", (1, "s"), 1500, 10)]
    report = run(rows, largest=2)
    first, second = report.largest
    assert (first.device, first.stream, first.gap_ns, first.start_ns) == (1, "s", 490, 10)
    assert (first.before, first.after) == ("x", "y")
    assert (second.stream, second.gap_ns, second.start_ns) == (7, 90, 10)  # tie: earlier
    assert [g.gap_ns for g in run(rows, largest=0).largest] == [490, 90, 90]  # every gap


# --------------------------------------------------------------------------------------------
# Histogram
# --------------------------------------------------------------------------------------------


def _gap_rows(gaps_ns: list[int]) -> list[Row]:
    rows, t = [], 0
    for g in [0, *gaps_ns]:
        t += g
        rows.append(("k", S, t, 0))
    return rows


def test_histogram_log_default_range() -> None:
    h = run(_gap_rows([1000, 10_000, 100_000, 5000]), bins=2).histogram
    assert h.unit == "us"
    assert h.edges == pytest.approx([1.0, 10.0, 100.0])
    assert (h.edges[0], h.edges[-1]) == (1.0, 100.0)
    assert (h.counts, h.below, h.above) == ([2, 2], 0, 0)  # 10 µs is in the upper bin
    default = run(_gap_rows([1000, 3000])).histogram
    assert len(default.edges) == 21 and sum(default.counts) == 2


def test_histogram_explicit_range_below_above_and_right_edge() -> None:
    rows = _gap_rows([100, 1000, 2000, 3000, 4000, 9000])
    h = run(rows, hist_min_ns=1000, hist_max_ns=4000, bins=3, linear=True).histogram
    assert h.edges == [1.0, 2.0, 3.0, 4.0]
    assert (h.counts, h.below, h.above) == ([1, 1, 2], 1, 1)
    only_min = run(rows, hist_min_ns=20_000).histogram  # beyond every gap: one empty bin
    assert (only_min.edges, only_min.counts, only_min.below) == ([20.0, 20.0], [0], 6)
    no_gaps = run([("a", S, 0, 1)], hist_min_ns=1, hist_max_ns=10, bins=3).histogram
    assert (len(no_gaps.edges), no_gaps.counts) == (4, [0, 0, 0])


def test_histogram_single_value() -> None:
    h = run(_gap_rows([700, 700, 700])).histogram
    assert (h.edges, h.counts, h.below, h.above) == ([0.7, 0.7], [3], 0, 0)


def test_histogram_linear_default_range() -> None:
    h = run(_gap_rows([10, 20, 30, 40, 50]), bins=4, linear=True).histogram
    assert h.edges == pytest.approx([0.01, 0.02, 0.03, 0.04, 0.05])
    assert h.counts == [1, 1, 1, 2]


# --------------------------------------------------------------------------------------------
# Options and parse_duration
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bins": 0}, "--bins"),
        ({"hist_min_ns": 10, "hist_max_ns": 10}, "--hist-min"),
        ({"hist_min_ns": 20, "hist_max_ns": 10}, "--hist-min"),
        ({"hist_min_ns": 0}, "log scale"),
        ({"hist_max_ns": -1, "linear": True}, "--hist-max"),
        ({"sort": "bogus"}, "--gap-sort 'bogus'"),
        ({"busy": ("kernel", "cpu_op")}, "cpu_op"),
        ({"busy": ()}, "--busy"),
        ({"min_gap_ns": -1}, "--min-gap"),
        ({"top": -1}, "--gap-top"),
        ({"largest": -1}, "--largest"),
    ],
)
def test_bad_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message.replace("-", r"\-")):
        run([("a", S, 0, 1)], **options)


def test_linear_histogram_may_start_at_zero() -> None:
    h = run(_gap_rows([10, 20]), hist_min_ns=0, hist_max_ns=20, bins=2, linear=True).histogram
    assert (h.edges, h.counts) == ([0.0, 0.01, 0.02], [0, 2])


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("1", 1000),
        ("1us", 1000),
        ("1µs", 1000),
        ("0.5ms", 500_000),
        ("250ns", 250),
        ("2s", 2_000_000_000),
        ("1.5 us", 1500),
        (" 3US ", 3000),
        ("0", 0),
        (".25", 250),
        ("0.0015", 2),  # 1.5 ns, rounded half-even
    ],
)
def test_parse_duration(text: str, ns: int) -> None:
    assert parse_duration(text) == ns


@pytest.mark.parametrize("text", ["-1", "-1us", "abc", "", "1 m", "1e3", "nan", "1us2", "1..2"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(UsageError, match=repr(text).replace(".", r"\.")):
        parse_duration(text)


# --------------------------------------------------------------------------------------------
# JSON shape
# --------------------------------------------------------------------------------------------


def test_json_shape() -> None:
    rows = [("a", (0, 7), 0, 10), ("b", (0, 7), 50, 10), ("c", (0, 7), 55, 10)]
    doc = run(rows).as_json()
    json.dumps(doc)
    assert set(doc) == {
        "schema_version", "scope", "trace", "busy", "totals", "streams", "devices", "histogram",
        "transitions", "left_out_transitions", "largest", "notes",
    }  # fmt: skip
    assert doc["schema_version"] == 2
    assert doc["scope"] == "stream"
    assert doc["busy"] == list(GPU_KINDS)
    assert set(doc["totals"]) == {"gaps", "gap_total_us", "idle_us", "mean_gap_us"}
    assert set(doc["streams"][0]) == {
        "device", "stream", "events", "gaps", "gap_total_us", "overlaps", "overlap_us",
        "zero_gaps", "window_us", "busy_us", "idle_us",
    }  # fmt: skip
    assert set(doc["devices"][0]) == {
        "device", "window_us", "busy_us", "idle_us", "idle_pct", "gaps", "gap_total_us",
        "host_wait_us", "launch_latency_us", "gpu_wait_us",
    }  # fmt: skip
    assert set(doc["histogram"]) == {"unit", "edges", "counts", "below", "above"}
    assert set(doc["transitions"][0]) == {
        "from", "to", "count", "total_us", "mean_us", "min_us", "max_us", "std_us",
    }  # fmt: skip
    assert set(doc["largest"][0]) == {
        "device", "stream", "start_us", "ts_us", "gap_us", "before", "after", "host_wait_us",
        "launch_latency_us", "cause", "cpu",
    }  # fmt: skip
    assert doc["largest"][0]["cpu"] is None  # no launch recorded in this hand-made trace
    assert set(doc["trace"]["devices"][0]) == {"device", "window_us", "busy_us", "busy_pct"}
    assert doc["streams"][0]["device"] == 0 and doc["streams"][0]["stream"] == 7
    assert set(doc["trace"]) >= {"path", "span_us", "streams", "warnings"}


# --------------------------------------------------------------------------------------------
# Property: totals equal a brute-force loop
# --------------------------------------------------------------------------------------------


def _brute(rows: list[Row], min_gap: int) -> dict[str, Any]:
    per: dict[Any, list[tuple[int, int, str]]] = defaultdict(list)
    for name, key, ts, dur in rows:
        per[key].append((ts, ts + dur, name))
    gaps: list[int] = []
    idle = overlaps = zeros = 0
    transitions: dict[tuple[str, str], list[int]] = defaultdict(list)
    for items in per.values():
        items.sort()
        for (_, e1, n1), (s2, _, n2) in itertools.pairwise(items):
            gap = s2 - e1
            transitions[n1, n2].append(gap)
            overlaps += gap < 0
            zeros += gap == 0
            if gap > 0 and gap >= min_gap:
                gaps.append(gap)
        covered: set[int] = set()
        for s, e, _ in items:
            covered.update(range(s, e))  # unit cells: small random ranges only
        window = max(e for _, e, _ in items) - min(s for s, _, _ in items)
        idle += window - len(covered)
    return {
        "gaps": sorted(gaps),
        "idle": idle,
        "overlaps": overlaps,
        "zeros": zeros,
        "transitions": {k: (len(v), sum(v), min(v), max(v)) for k, v in transitions.items()},
    }


_row = st.tuples(
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([(0, 7), (0, 8), (1, 7)]),
    st.integers(0, 300),
    st.integers(0, 60),
)


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(_row, max_size=30), min_gap=st.sampled_from([0, 1, 10, 50]))
def test_totals_equal_brute_force(rows: list[Row], min_gap: int) -> None:
    report = run(rows, min_gap_ns=min_gap, top=0, largest=1000)
    want = _brute(rows, min_gap)
    assert report.totals.gaps == len(want["gaps"])
    assert report.totals.gap_total_ns == sum(want["gaps"])
    assert report.totals.idle_ns == want["idle"]
    assert sum(s.overlaps for s in report.streams) == want["overlaps"]
    assert sum(s.zero_gaps for s in report.streams) == want["zeros"]
    assert sum(s.events for s in report.streams) == len(rows)
    assert sorted(g.gap_ns for g in report.largest) == want["gaps"]
    assert sum(report.histogram.counts) == len(want["gaps"])
    got = {
        (t.from_name, t.to_name): (
            t.count, t.total_ns, t.min_ns, t.max_ns,
        )
        for t in report.transitions
    }  # fmt: skip
    assert got == want["transitions"]

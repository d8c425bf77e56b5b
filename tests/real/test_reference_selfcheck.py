"""Hand-computed checks of tests/reference.py, so that the reference itself can be trusted."""

from __future__ import annotations

import gzip
import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import reference as ref
from conftest import RealTrace, real_traces

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
NOT_CHROME = {"hta__execution_trace__benchmark_simple_add_et.json.gz"}


def kern(name: str, ts: Any, dur: Any = None, **extra: Any) -> dict[str, Any]:
    """A kernel event; extra keys go to args except ph/cat/pid/tid."""
    event: dict[str, Any] = {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "pid": 0, "tid": 7}
    if dur is not None:
        event["dur"] = dur
    for key in ("ph", "cat", "pid", "tid"):
        if key in extra:
            event[key] = extra.pop(key)
    event["args"] = {"device": 0, "stream": 7, **extra}
    return event


def runtime(ts: Any, correlation: int, cat: str = "cuda_runtime") -> dict[str, Any]:
    return {
        "ph": "X", "cat": cat, "name": "cudaLaunchKernel", "ts": ts, "dur": 1,
        "pid": 0, "tid": 1, "args": {"correlation": correlation},
    }  # fmt: skip


def step(n: int, ts: int, dur: int, cat: str = "user_annotation") -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": f"ProfilerStep#{n}", "ts": ts, "dur": dur, "pid": 0}


# --------------------------------------------------------------------------------------------
# Loading and exact nanoseconds
# --------------------------------------------------------------------------------------------


def test_to_ns_exact_and_half_even() -> None:
    assert ref.to_ns(5) == 5000
    assert ref.to_ns(Decimal("1712195495505582.988")) == 1712195495505582988
    assert ref.to_ns(Decimal("0.0005")) == 0  # 0.5 ns → even
    assert ref.to_ns(Decimal("0.0015")) == 2  # 1.5 ns → even
    assert ref.to_ns(Decimal("0.0025")) == 2
    assert ref.to_ns(Decimal("-0.0015")) == -2
    assert ref.to_ns(1.5) == 1500
    assert ref.to_ns(0.1) == 100  # through repr, not the binary value
    for bad in (None, "12", True, float("nan"), float("inf"), Decimal("NaN"), [1]):
        assert ref.to_ns(bad) is None


def test_ns_precision_survives_loading(tmp_path: Path) -> None:
    text = (
        '{"traceEvents": ['
        '{"ph": "X", "cat": "kernel", "name": "a", "ts": 1712195495505580.000, "dur": 2.988,'
        ' "pid": 0, "tid": 7, "args": {"device": 0, "stream": 7}},'
        '{"ph": "X", "cat": "kernel", "name": "b", "ts": 1712195495505583.001, "dur": 1,'
        ' "pid": 0, "tid": 7, "args": {"device": 0, "stream": 7}}]}'
    )
    path = tmp_path / "t.json"
    path.write_text(text)
    _, events = ref.load_trace(path)
    assert ref.interval_ns(events[1])[0] - ref.interval_ns(events[0])[1] == 13
    # float64 would have lost it: both values round to ...583.0
    assert float("1712195495505582.988") == float("1712195495505583.001")
    result = ref.gap_stats(events)
    assert result["all_gaps_ns"] == [13]
    assert result["all_gaps_us"] == [0.013]
    assert result["totals"]["gap_total_us"] == 0.013


def test_load_trace_variants(tmp_path: Path) -> None:
    doc = {"schemaVersion": 1, "traceEvents": [kern("k", 1, 2)], "traceName": "x"}
    plain = tmp_path / "a.json"
    plain.write_text(json.dumps(doc))
    packed = tmp_path / "no_gz_suffix.json"  # gzip recognised by magic bytes, not name
    packed.write_bytes(gzip.compress(json.dumps(doc).encode()))
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps([kern("k", 1, 2), 3, "junk"]))
    for path in (plain, packed):
        header, events = ref.load_trace(path)
        assert header == {"schemaVersion": 1, "traceName": "x"}
        assert [e["name"] for e in events] == ["k"]
    header, events = ref.load_trace(bare)
    assert header == {}
    assert len(events) == 1


def test_load_trace_tolerates_nan_bad_utf8_and_huge_ints(tmp_path: Path) -> None:
    raw = (
        b'{"traceEvents": ['
        b'{"ph": "X", "cat": "kernel", "name": "bad\xff\xfename", "ts": 10, "dur": 5,'
        b' "args": {"id": 18446744073709551617, "x": NaN, "y": -Infinity}},'
        b'{"ph": "X", "cat": "kernel", "name": "nan-ts", "ts": NaN, "dur": 5},'
        b'{"ph": "X", "cat": "kernel", "name": "lone \\ud800", "ts": 20, "dur": Infinity}]}'
    )
    path = tmp_path / "t.json"
    path.write_bytes(raw)
    _, events = ref.load_trace(path)
    assert events[0]["args"]["id"] == 2**64 + 1
    assert math.isnan(events[0]["args"]["x"])
    stats = ref.kernel_stats(events)
    assert sum(row["count"] for row in stats.values()) == 2  # the NaN-ts kernel is skipped
    assert stats["lone \ud800"]["total_us"] == 0.0  # Infinity dur counts as 0
    assert any(name.startswith("bad") for name in stats)


def test_load_trace_rejects_non_chrome(tmp_path: Path) -> None:
    path = tmp_path / "et.json"
    path.write_text(json.dumps({"schema": "1.0", "nodes": []}))
    with pytest.raises(ValueError, match="not a Chrome trace"):
        ref.load_trace(path)


# --------------------------------------------------------------------------------------------
# Kernel statistics
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "p50", "p90", "p99"),
    [(1, 1, 1, 1), (2, 1, 2, 2), (10, 5, 9, 10), (101, 51, 91, 100)],
)
def test_nearest_rank_percentiles(n: int, p50: int, p90: int, p99: int) -> None:
    # durations n, n-1, ..., 1 µs in file order: sorting must not be skipped
    events = [kern("k", 1000 * i, n - i) for i in range(n)]
    row = ref.kernel_stats(events)["k"]
    assert (row["p50_us"], row["p90_us"], row["p99_us"]) == (p50, p90, p99)
    assert (row["min_us"], row["max_us"]) == (1.0, float(n))


def test_mean_and_sample_std() -> None:
    durs = [2, 4, 4, 4, 5, 5, 7, 9]  # mean 5, squared deviations sum to 32
    row = ref.kernel_stats([kern("k", 100 * i, d) for i, d in enumerate(durs)])["k"]
    assert row["count"] == 8
    assert row["total_us"] == 40.0
    assert row["mean_us"] == 5.0
    assert row["std_us"] == pytest.approx(math.sqrt(32 / 7), rel=1e-15)
    assert row["std_us"] == pytest.approx(float(np.std(durs, ddof=1)), rel=1e-15)
    single = ref.kernel_stats([kern("k", 0, 3)])["k"]
    assert single["std_us"] == 0.0
    assert single["mean_us"] == 3.0


def test_std_is_exact_for_huge_offsets() -> None:
    # a naive float sum of squares would cancel catastrophically here
    durs = [10**9 + d for d in (1, 2, 3)]
    row = ref.kernel_stats([kern("k", 0, d) for d in durs])["k"]
    assert row["std_us"] == 1.0
    assert row["mean_us"] == 10**9 + 2


def test_kernel_selection_and_percentages() -> None:
    events = [
        kern("A", 0, 10),
        kern("A", 20, 30),
        kern("B", 60, 60, cat="Kernel"),  # 2021 capitalisation still counts
        kern("A", 200, 5, ph="i"),  # not a complete event
        kern("A", "soon", 5),  # ts not a number: skipped
        kern("A", None, 5),
        kern("C", 300),  # missing dur → 0
        kern("cpy", 400, 100, cat="gpu_memcpy"),
        kern("set", 500, 100, cat="Memset"),
        runtime(0, 1),
        {**kern("sync", 0, 50), "cat": "cuda_sync"},
        {**kern("op", 0, 50), "cat": "cpu_op"},
    ]
    stats = ref.kernel_stats(events)
    assert list(stats) == ["B", "A", "C"]  # by total time, descending
    assert stats["A"]["count"] == 2
    assert stats["A"]["total_us"] == 40.0
    assert stats["A"]["pct_launches"] == pytest.approx(50.0)
    assert stats["A"]["pct_time"] == 40.0
    assert stats["B"]["pct_time"] == 60.0
    assert stats["C"]["total_us"] == 0.0
    assert ref.kernel_totals(events) == {"count": 4, "total_us": 100.0, "distinct": 3}

    wide = ref.kernel_stats(events, include=("kernel", "memcpy", "memset"))
    assert set(wide) == {"A", "B", "C", "cpy", "set"}
    assert wide["cpy"]["pct_time"] == pytest.approx(100 / 3)

    filtered = ref.kernel_stats(events, name_filter="^A$")
    assert list(filtered) == ["A"]
    assert filtered["A"]["pct_launches"] == 100.0  # relative to the selection
    assert ref.kernel_stats(events, name_filter=lambda n: n < "B") == filtered
    with pytest.raises(ValueError):
        ref.kernel_stats(events, include=("kernels",))


def test_kernel_stats_all_zero_durations() -> None:
    stats = ref.kernel_stats([kern("z", 0, 0), kern("z", 1, 0)])
    assert stats["z"]["pct_time"] == 0.0
    assert stats["z"]["pct_launches"] == 100.0
    assert ref.kernel_stats([]) == {}


# --------------------------------------------------------------------------------------------
# Span and busy time
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("intervals", "length"),
    [
        ([], 0),
        ([(0, 10), (5, 15)], 15),  # overlap
        ([(0, 100), (10, 20), (30, 40)], 100),  # nesting
        ([(20, 30), (0, 10)], 20),  # disjoint, unsorted
        ([(0, 10), (10, 20)], 20),  # touching
        ([(5, 5), (7, 7)], 0),  # zero length
        ([(0, 10), (12, 8)], 10),  # end before start contributes nothing
        ([(0, 10), (2, 3), (9, 12), (20, 21)], 13),
    ],
)
def test_union_length(intervals: list[tuple[int, int]], length: int) -> None:
    assert ref.union_length_ns(intervals) == length


def test_span_and_gpu_busy_across_devices() -> None:
    events = [
        kern("a", 10, 10),  # device 0 stream 7: [10, 20]
        kern("b", 15, 10, device=1, stream=3),  # other device, overlapping: [15, 25]
        kern("c", 30, 5, stream=9),  # [30, 35]
        kern("cpy", 40, 10, cat="gpu_memcpy"),  # [40, 50], only with include
        {"ph": "X", "cat": "cpu_op", "name": "op", "ts": 0, "dur": 100},  # not on the timeline
        {"ph": "i", "cat": "cpu_op", "name": "mark", "ts": 500},  # not ph X: no span
        {"ph": "X", "cat": "Trace", "name": "bad", "ts": "x", "dur": 1000},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "ts": 0, "dur": 9000},
    ]
    assert ref.trace_span_us(events) == 40.0  # GPU activity [10, 50]
    assert ref.gpu_busy_us(events) == 20.0
    assert ref.gpu_busy_us(events, include=("kernel", "memcpy")) == 30.0
    assert ref.gpu_busy_pct(events) == 50.0
    with_runtime = [*events, runtime(5, 99), step(1, 8, 100)]
    assert ref.trace_span_us(with_runtime) == 103.0  # runtime call at 5 .. step end at 108
    assert ref.trace_span_us([]) == 0.0
    assert ref.gpu_busy_pct([]) == 0.0


# --------------------------------------------------------------------------------------------
# Steps
# --------------------------------------------------------------------------------------------


def step_events() -> list[dict[str, Any]]:
    return [
        step(1, 100, 100),  # [100, 200]
        step(2, 201, 99, cat="cpu_op"),  # [201, 300]
        step(1, 120, 10, cat="gpu_user_annotation"),  # shadowed by the CPU window
        step(3, 400, 100, cat="gpu_user_annotation"),  # GPU-only window [400, 500]
        step(4, 600, 10, cat="Operator"),  # 2021 kineto's cpu_op
        {**step(5, 600, 10), "name": "ProfilerStep#5 "},  # not exactly the name
        runtime(150, 1),
        kern("k1", 250, 10, correlation=1),  # launched in step 1, runs after it
        kern("k2", 190, 5, correlation=2),  # no launch: own ts → step 1
        runtime(205, 3, cat="Runtime"),
        kern("k3", 150, 4, correlation=3),  # launched in step 2, own ts in step 1
        runtime(310, 4),
        runtime(200, 4, cat="cuda_driver"),  # the earliest launch wins; closed window
        kern("k4", 320, 10, correlation=4),
        {**runtime(150, 5), "cat": "cpu_op"},  # same correlation, but not a launch
        kern("k5", 350, 10, correlation=5),  # no launch, own ts in no window
        runtime(160, 6),
        kern("k6", 450, 20, correlation=6),  # step 1 via launch, step 3 via own ts
        kern("k7", 195, 20),  # no args.correlation at all: own ts → step 1
        runtime(150, 8),
        kern("cpy", 260, 10, cat="gpu_memcpy", correlation=8),
    ]


def test_step_windows() -> None:
    assert ref.step_windows(step_events()) == {
        1: (100_000, 200_000, "cpu"),
        2: (201_000, 300_000, "cpu"),
        3: (400_000, 500_000, "gpu"),
        4: (600_000, 610_000, "cpu"),
    }


def test_kernels_in_steps() -> None:
    events = step_events()

    def names(steps: set[int], **kw: Any) -> list[str]:
        return [e["name"] for e in ref.kernels_in_steps(events, steps, **kw)]

    assert names({1}) == ["k1", "k2", "k4", "k6", "k7"]
    assert names({2}) == ["k3"]
    assert names({3}) == ["k6"]
    assert names({1, 3}) == ["k1", "k2", "k4", "k6", "k7"]  # listed once
    assert names({4, 5, 99}) == []
    assert names({1}, include=("kernel", "memcpy")) == ["k1", "k2", "k4", "k6", "k7", "cpy"]
    assert ref.kernel_stats(events, steps={2}) == ref.kernel_stats([kern("k3", 0, 4)])
    assert ref.kernel_totals(events, steps={1})["count"] == 5


def test_step_devices() -> None:
    steps = ref.step_devices(step_events())
    assert sorted(steps) == [1, 2, 3, 4]
    # step 1 [100,200]: k1 [250,260], k2 [190,195], k4 [320,330], k6 [450,470], k7 [195,215]
    # (and the memcpy cpy, a busy event too): window 190..470, busy 25 + 10 + 10 + 20 + cpy.
    one = steps[1]
    assert (one["cpu_start_ns"], one["cpu_end_ns"], one["kernels"]) == (100_000, 200_000, 5)
    assert one["kernel_time_ns"] == 65_000
    (d,) = one["devices"].values()
    assert d["gpu_start_ns"] == 190_000 and d["lag_ns"] == 90_000
    assert d["window_ns"] == 280_000 and d["idle_ns"] == d["window_ns"] - d["busy_ns"]
    # step 2 [201,300]: k3 [150,154] ran before the window opened: a negative lag.
    (d,) = steps[2]["devices"].values()
    assert (d["gpu_start_ns"], d["window_ns"], d["busy_ns"], d["lag_ns"]) == (
        150_000, 4_000, 4_000, -51_000,
    )  # fmt: skip
    assert steps[4]["devices"] == {} and steps[4]["kernels"] == 0


def test_device_gaps_walk() -> None:
    events = [
        kern("a", 0, 10, correlation=1),
        kern("b", 5, 5),  # ends with a at 10, starts later: the "before" of the gap
        kern("zero", 12, 0),  # zero length: neither busy nor a split
        kern("d", 20, 8, correlation=2),
        kern("c", 20, 5),  # starts with d at 20, ends first: the "after"
        runtime(1, 1),
        runtime(14, 2),
        kern("e", 40, 1, device=1, stream=3),
    ]
    got = ref.device_gaps(events)
    assert set(got) == {0, 1}
    (gap,) = got[0]["gaps"]
    assert (gap["start_ns"], gap["end_ns"], gap["before"], gap["after"]) == (
        10_000, 20_000, "b", "c",
    )  # fmt: skip
    assert (gap["host_wait_ns"], gap["cause"]) == (0, "gpu wait")  # c has no launch
    assert got[0]["idle_ns"] == 10_000 and got[0]["window_ns"] == 28_000
    assert got[1] == {"window_ns": 1_000, "busy_ns": 1_000, "idle_ns": 0, "gaps": []}
    late = [kern("a", 0, 10), kern("b", 30, 1, correlation=5), runtime(16, 5)]
    (gap,) = ref.device_gaps(late)[0]["gaps"]
    assert (gap["host_wait_ns"], gap["cause"]) == (6_000, "cpu")
    early = [kern("a", 0, 10), kern("b", 30, 1, correlation=5), runtime(2, 5)]
    assert ref.device_gaps(early)[0]["gaps"][0]["host_wait_ns"] == 0
    very_late = [kern("a", 0, 10), kern("b", 30, 1, correlation=5), runtime(90, 5)]
    assert ref.device_gaps(very_late)[0]["gaps"][0]["host_wait_ns"] == 20_000  # clamped


def test_touching_windows_share_a_boundary_kernel() -> None:
    events = [step(1, 0, 10), step(2, 10, 10), kern("edge", 10, 1)]
    assert [s["kernels"] for s in ref.step_devices(events).values()] == [1, 1]


# --------------------------------------------------------------------------------------------
# Gaps
# --------------------------------------------------------------------------------------------


def gap_events() -> list[dict[str, Any]]:
    return [
        kern("E", 30, 1),  # file order is not time order
        kern("A", 0, 10),
        kern("C", 15, 5),
        kern("B", 12, 3),  # gap 2 after A
        kern("D", 18, 7),  # starts 2 before C ends → overlap 2 (C→D); B→C is a zero gap
        kern("F", 40, 10, stream=8),  # same device, another stream
        kern("M", 60, 40, cat="gpu_memcpy"),  # stream 7, only busy by default
        runtime(0, 1),
    ]


def test_gap_stats_one_stream_by_hand() -> None:
    result = ref.gap_stats(gap_events(), busy=("kernel",))
    s7 = result["streams"][(0, 7)]
    assert s7 == {
        "events": 5, "gaps": 2, "gap_total_us": 7.0, "overlaps": 1, "overlap_us": 2.0,
        "zero_gaps": 1, "window_us": 31.0, "busy_us": 24.0, "idle_us": 7.0,
    }  # fmt: skip
    assert result["streams"][(0, 8)]["events"] == 1
    assert result["streams"][(0, 8)]["gaps"] == 0
    assert result["devices"] == {
        0: {"streams": 2, "events": 6, "window_us": 50.0, "busy_us": 34.0,
            "idle_us": 16.0, "idle_pct": 32.0},
    }  # fmt: skip
    totals = result["totals"]
    assert (totals["gaps"], totals["gap_total_us"], totals["idle_us"]) == (2, 7.0, 7.0)
    assert totals["mean_gap_us"] == 3.5
    assert (totals["overlaps"], totals["overlap_us"], totals["zero_gaps"]) == (1, 2.0, 1)
    assert sorted(result["all_gaps_us"]) == [2.0, 5.0]
    tr = result["transitions"]
    assert set(tr) == {("A", "B"), ("B", "C"), ("C", "D"), ("D", "E")}
    assert tr[("C", "D")]["mean_us"] == -2.0
    assert tr[("B", "C")]["total_us"] == 0.0
    assert tr[("D", "E")]["count"] == 1
    assert tr[("D", "E")]["std_us"] == 0.0


def test_gap_stats_includes_memcpy_by_default() -> None:
    result = ref.gap_stats(gap_events())
    s7 = result["streams"][(0, 7)]
    assert s7["events"] == 6
    assert s7["gaps"] == 3  # E [30,31] → M [60,100]: gap 29
    assert s7["gap_total_us"] == 36.0
    assert s7["window_us"] == 100.0
    assert result["devices"][0]["idle_pct"] == 100 * (100 - 74) / 100
    assert ref.all_gaps_us(gap_events()) == result["all_gaps_us"]


def test_transition_statistics() -> None:
    events = [kern("A", 0, 1), kern("B", 2, 1), kern("A", 6, 1), kern("B", 9, 1)]
    tr = ref.gap_stats(events)["transitions"]
    ab, ba = tr[("A", "B")], tr[("B", "A")]
    assert (ab["count"], ab["total_us"], ab["mean_us"]) == (2, 3.0, 1.5)
    assert (ab["min_us"], ab["max_us"]) == (1.0, 2.0)
    assert ab["std_us"] == pytest.approx(math.sqrt(0.5), rel=1e-15)
    assert (ba["count"], ba["mean_us"], ba["std_us"]) == (1, 3.0, 0.0)


def test_stream_order_ties_and_key_fallbacks() -> None:
    tie = [kern("X", 0, 5), kern("Y", 0, 3), kern("b", 10, 1), kern("a", 10, 1)]
    result = ref.gap_stats(tie)
    # order by (ts, end, name): Y[0,3], X[0,5], a[10,11], b[10,11]
    assert set(result["transitions"]) == {("Y", "X"), ("X", "a"), ("a", "b")}
    assert result["transitions"][("Y", "X")]["mean_us"] == -3.0
    assert result["transitions"][("a", "b")]["mean_us"] == -1.0

    no_args = {"ph": "X", "cat": "kernel", "name": "n", "ts": 0, "dur": 1, "pid": 3, "tid": 9}
    stream_only = {**no_args, "args": {"stream": 5}}  # device missing → (pid, tid)
    result = ref.gap_stats([no_args, stream_only, kern("k", 0, 1, device=3, stream=9)])
    assert result["streams"][(3, 9)]["events"] == 3  # all three land on (3, 9)
    assert list(result["devices"]) == [3]

    # device known but stream missing: stream key (args.device, tid), device args.device
    device_only = {**no_args, "ts": 5, "args": {"device": 5}}
    result = ref.gap_stats([no_args, device_only])
    assert list(result["streams"]) == [(3, 9), (5, 9)]
    assert result["streams"][(3, 9)]["gap_total_us"] == 0.0
    assert {d: v["events"] for d, v in result["devices"].items()} == {3: 1, 5: 1}


def test_gap_stats_empty() -> None:
    result = ref.gap_stats([runtime(0, 1)])
    assert result["streams"] == {} and result["devices"] == {}
    assert result["totals"]["gaps"] == 0 and result["totals"]["mean_gap_us"] == 0.0


# --------------------------------------------------------------------------------------------
# Real traces
# --------------------------------------------------------------------------------------------


def listed_kernel_traces() -> list[tuple[str, int]]:
    """(file, kernels) for README rows with kernels > 0; [] when the folder is absent."""
    readme = TRACES / "README.md"
    if not readme.is_file():
        return []
    rows = []
    columns: list[str] = []
    for line in readme.read_text().splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if cells[:1] == ["file"]:
            columns = cells
        elif columns and len(cells) == len(columns) and cells[0].endswith(".json.gz"):
            row = dict(zip(columns, cells, strict=True))
            if int(row["kernels"]) > 0 and row["file"] not in NOT_CHROME:
                rows.append((row["file"], int(row["kernels"])))
    return rows


LISTED = dict(listed_kernel_traces())


def test_every_listed_trace_is_checked() -> None:
    if not LISTED:
        pytest.skip(f"no shared traces at {TRACES}")
    assert set(LISTED) <= {p.name for p in real_traces()}


def test_real_trace(real_trace: RealTrace) -> None:
    kernels = LISTED.get(real_trace.path.name)
    if not kernels:
        pytest.skip("not listed with kernels in the traces' README.md")
    events = real_trace.raw
    counted = sum(1 for e in events if e.get("ph") == "X" and str(e.get("cat")).lower() == "kernel")
    assert counted == kernels
    stats = ref.kernel_stats(events)
    assert sum(row["count"] for row in stats.values()) == kernels
    assert sum(row["pct_launches"] for row in stats.values()) == pytest.approx(100.0)

    busy_all = len(ref.gpu_events(events, ("kernel", "memcpy", "memset")))
    for busy, expected in ((ref.ALL_BUSY, busy_all), (("kernel",), kernels)):
        result = ref.gap_stats(events, busy=busy)
        assert result["totals"]["events"] == expected
        for s in result["streams"].values():
            assert s["gaps"] + s["overlaps"] + s["zero_gaps"] == s["events"] - 1
            assert 0 <= s["busy_us"] <= s["window_us"]
    assert 0 < ref.gpu_busy_us(events) <= ref.trace_span_us(events)

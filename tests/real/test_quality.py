"""Data-quality warnings: hand-made cases, and real traces against a direct count."""

from __future__ import annotations

import json
from pathlib import Path

import reference as ref
from conftest import RealTrace

from traceview.analyses.core.trace import summarize
from traceview.columns.parallel import collect_events
from traceview.read.reader import TraceReader


def k(ts: float, dur: float | None, stream: int = 7, corr: int | None = None) -> dict:
    args = {"device": 0, "stream": stream} | ({"correlation": corr} if corr is not None else {})
    event = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": stream, "ts": ts,
             "args": args}  # fmt: skip
    return event if dur is None else event | {"dur": dur}


def warnings_of(tmp_path: Path, events: list[dict], **top: object) -> list[str]:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, **top}))
    return list(summarize(collect_events(TraceReader(path))).warnings)


def test_overlap_zero_missing_launch_and_unit(tmp_path: Path) -> None:
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
              "ts": 0, "dur": 1, "args": {"correlation": 1}}  # fmt: skip
    events = [launch, k(10, 5, corr=1), k(14, 2), k(30, 0), k(31, 2, stream=9)]
    got = warnings_of(tmp_path, events, displayTimeUnit="ns")
    assert got == [
        "1 GPU activities overlap the previous one on their stream (up to 1.0 µs)",
        "1 GPU activities have a duration of 0",
        "3 GPU activities have no matching launch event (--pstep uses their own start time)",
        "displayTimeUnit is 'ns'; ts and dur are read as µs, as the trace format defines",
    ]


def test_missing_dur_and_bad_numbers_are_counted(tmp_path: Path) -> None:
    events = [k(10, None), k("x", 5), k(20, -3), k(30, 2)]  # type: ignore[arg-type]
    got = warnings_of(tmp_path, events)
    assert "1 events without dur (counted as 0)" in got
    assert "1 events skipped: not an object, or a field of the wrong type" in got  # ts "x"
    assert "1 events skipped: dur negative" in got


def test_numbers_out_of_range_are_named_so(tmp_path: Path) -> None:
    """2^53 + 1 µs is a finite number (exact as an int), only too far for int64 ns sums."""
    got = warnings_of(tmp_path, [k(2**53 + 1, 5), k(10, 2**62), k(30, 2)])
    assert "2 events skipped: ts or dur out of range (beyond ±2^62 ns, about ±146 years)" in got


def test_suspicious_duration(tmp_path: Path) -> None:
    got = warnings_of(tmp_path, [k(0, 20_000_000), k(30_000_000, 1)])
    assert any("longer than 10.00 s (longest 20.00 s)" in w for w in got), got


def test_clean_trace_has_no_warnings(tmp_path: Path) -> None:
    assert warnings_of(tmp_path, [k(0, 1), k(5, 1)]) == [
        "no runtime launch events: --pstep uses each kernel's own start time"
    ]


def test_counts_on_real_traces(real_trace: RealTrace) -> None:
    warnings = summarize(real_trace.gpu_events).warnings
    raw = real_trace.raw
    gpu = ref.gpu_events(raw, ("kernel", "memcpy", "memset"))
    zero = sum(1 for e in gpu if ref.dur_ns(e) == 0)
    assert (f"{zero} GPU activities have a duration of 0" in warnings) == (zero > 0)
    launches = ref.launch_ts_by_correlation(raw)
    if launches:
        missing = sum(1 for e in gpu if (e.get("args") or {}).get("correlation") not in launches)
        before = len(ref.launched_before(raw))  # said apart, with what they are
        line = f"{before} GPU activities were launched before the trace began"
        assert any(w.startswith(line) for w in warnings) == (before > 0)
        line = f"{missing - before} GPU activities have no matching launch event"
        assert any(w.startswith(line) for w in warnings) == (missing - before > 0)

"""Device gaps, host wait and cause, and the steps' device windows, on small hand-made traces:
each case is one way a per-stream or CPU-window view would point at the wrong problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from traceview.analyses.core.steps import step_table
from traceview.analyses.gaps import GapOptions, GapReport, analyse_gaps
from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.cli import app
from traceview.columns.model import TraceEvents
from traceview.columns.parallel import collect_events
from traceview.read.reader import TraceReader


def x(cat: str, name: str, ts: float, dur: float, tid: int = 1, **args: Any) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 9, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def kernel(name: str, ts: float, dur: float, stream: int = 7, device: int = 0, **args: Any) -> dict:
    return x("kernel", name, ts, dur, tid=stream, device=device, stream=stream, **args)


def launch(ts: float, correlation: int) -> dict:
    return x("cuda_runtime", "cudaLaunchKernel", ts, 2, correlation=correlation)


def read(tmp_path: Path, events: list[dict]) -> TraceEvents:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return collect_events(TraceReader(path), keep_cpu=True)


def gaps(events: TraceEvents, **options: Any) -> GapReport:
    return analyse_gaps(events, GapOptions(**options))


def test_a_busy_stream_hides_another_streams_gap(tmp_path: Path) -> None:
    """Stream 7 waits 40 µs between its kernels while stream 8 keeps the GPU busy: a gap per
    stream, none for the device."""
    events = read(
        tmp_path,
        [kernel("a", 0, 10), kernel("b", 50, 10), kernel("copy", 5, 50, stream=8)],
    )
    device = gaps(events)
    assert device.totals.gaps == 0 and device.largest == []
    (d,) = device.devices
    assert (d.window_ns, d.busy_ns, d.idle_ns, d.gaps) == (60_000, 60_000, 0, 0)
    stream = gaps(events, per_stream=True)
    assert stream.totals.gaps == 1 and stream.largest[0].gap_ns == 40_000
    assert [s.gaps for s in stream.streams] == [1, 0]  # the table is the same in both scopes
    assert [s.gaps for s in device.streams] == [1, 0]


def test_a_zero_length_event_never_splits_a_gap(tmp_path: Path) -> None:
    events = read(tmp_path, [kernel("a", 0, 10), kernel("empty", 20, 0), kernel("b", 30, 10)])
    (gap,) = gaps(events).largest
    assert (gap.gap_ns, gap.before, gap.after) == (20_000, "a", "b")
    (d,) = gaps(events).devices
    assert (d.window_ns, d.busy_ns, d.idle_ns) == (40_000, 20_000, 20_000)


def test_a_gap_the_gpu_held_has_no_host_wait(tmp_path: Path) -> None:
    """b was launched at 5, long before a ended, and started 80 µs after it, past the
    launch-latency bound: the GPU waited on something else (cause gpu wait); a sync call
    overlapping the gap is named."""
    events = read(
        tmp_path,
        [
            launch(0, 1),
            launch(5, 2),
            x("cuda_runtime", "cudaStreamSynchronize", 8, 100),
            kernel("a", 10, 10, correlation=1),
            kernel("b", 100, 10, correlation=2),
        ],
    )
    (gap,) = gaps(events).largest
    assert (gap.gap_ns, gap.host_wait_ns, gap.cause) == (80_000, 0, "gpu wait")
    assert gap.context.ops == ()
    assert [(h.name, h.overlap_ns) for h in gap.context.syncs] == [
        ("cudaStreamSynchronize", 80_000)
    ]
    (d,) = gaps(events).devices
    assert (d.idle_ns, d.host_wait_ns, d.launch_latency_ns, d.gpu_wait_ns) == (80_000, 0, 0, 80_000)


def test_a_short_gap_after_a_queued_launch_is_launch_latency(tmp_path: Path) -> None:
    """b was launched at 5 and starts 12 µs after a ends (within the 50 µs bound): launch
    latency; c is launched 30 µs into the gap after b and starts 10 µs after its launch:
    host wait 30, launch latency 10."""
    events = read(
        tmp_path,
        [
            launch(0, 1),
            launch(5, 2),
            kernel("a", 10, 10, correlation=1),
            kernel("b", 32, 10, correlation=2),
            launch(72, 3),
            kernel("c", 82, 10, correlation=3),
        ],
    )
    first, second = sorted(gaps(events).largest, key=lambda g: g.start_ns)
    assert (first.gap_ns, first.host_wait_ns, first.cause) == (12_000, 0, "launch latency")
    assert (second.gap_ns, second.host_wait_ns, second.cause) == (40_000, 30_000, "cpu")
    (d,) = gaps(events).devices
    assert (d.idle_ns, d.host_wait_ns, d.launch_latency_ns, d.gpu_wait_ns) == (
        52_000,
        30_000,
        22_000,
        0,
    )


def test_a_data_loader_gap_is_explained_by_the_loader(tmp_path: Path) -> None:
    """a ends at 100; the loader runs 110-230 on the launching thread; b is launched at 240
    and runs at 245: host wait 140, of which the loader holds 120 and 20 has no op."""
    loader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
    events = read(
        tmp_path,
        [
            launch(0, 1),
            kernel("a", 20, 80, correlation=1),
            x("user_annotation", loader, 110, 120),
            x("cpu_op", "aten::stack", 150, 30),
            launch(240, 2),
            kernel("b", 245, 10, correlation=2),
        ],
    )
    report = gaps(events)
    (gap,) = report.largest
    assert (gap.gap_ns, gap.host_wait_ns, gap.cause) == (145_000, 140_000, "cpu")
    context = gap.context
    assert [(h.name, h.overlap_ns) for h in context.ops] == [
        (loader, 120_000),
        ("aten::stack", 30_000),
    ]
    assert context.covered_ns == 120_000
    (d,) = report.devices
    assert (d.idle_ns, d.host_wait_ns) == (145_000, 140_000)
    r = CliRunner().invoke(app, ["gaps", str(tmp_path / "t.json"), "--no-cache"])
    assert r.exit_code == 0, r.output
    assert f"{loader} 120.0 µs of 140.0 µs host wait" in r.stdout
    assert "nothing recorded for 20.0 µs of the host wait" in r.stdout


def test_gpu_lagging_the_cpu_by_several_steps(tmp_path: Path) -> None:
    """The CPU runs 4 steps of 100 µs and launches a 150 µs kernel at each start; the GPU runs
    them back to back, so it falls further behind every step."""
    events: list[dict] = []
    for n in range(4):
        start = 1000 + 100 * n
        events.append(x("user_annotation", f"ProfilerStep#{n + 1}", start, 100))
        events.append(launch(start + 1, n + 1))
        events.append(kernel(f"k{n}", 1005 + 150 * n, 150, correlation=n + 1))
    rows = step_table(read(tmp_path, events))
    lags = [r.devices[0].lag_ns / 1000 for r in rows]
    queues = [r.devices[0].queue_ns / 1000 for r in rows]
    assert lags == [5.0, 55.0, 105.0, 155.0]
    assert queues == [4.0, 54.0, 104.0, 154.0]
    assert [r.behind(r.devices[0]) for r in rows] == [False, True, True, True]
    assert all(r.devices[0].busy_pct == 100.0 for r in rows)
    r = CliRunner().invoke(app, ["steps", str(tmp_path / "t.json"), "--no-cache"])
    assert r.exit_code == 0, r.output
    assert "behind the CPU in steps 2-4" in r.stdout and "GPU-bound" in r.stdout


def test_two_devices_are_never_merged(tmp_path: Path) -> None:
    """Device 0 is busy 0-100; device 1 runs 50-60 and 200-300. A union over both GPUs would
    say 'busy 200 of 300'; per device: 100% and 110 of 250."""
    events = read(
        tmp_path,
        [
            kernel("a", 0, 100),
            kernel("b", 50, 10, stream=9, device=1),
            kernel("c", 200, 100, stream=9, device=1),
        ],
    )
    report = gaps(events)
    d0, d1 = report.devices
    assert (d0.device, d0.idle_ns, d0.gaps) == (0, 0, 0)
    figures = (d1.device, d1.window_ns, d1.busy_ns, d1.idle_ns, d1.gaps)
    assert figures == (1, 250_000, 110_000, 140_000, 1)
    (gap,) = report.largest
    assert (gap.device, gap.stream, gap.gap_ns) == (1, 9, 140_000)
    kernels = analyse_kernels(events, KernelOptions())
    busy = [(d.device, d.busy_pct) for d in kernels.trace.devices]
    assert busy == [(0, 100.0), (1, 44.0)]
    r = CliRunner().invoke(app, ["kernels", str(tmp_path / "t.json"), "--no-cache"])
    assert "device   0: busy 100.00%" in r.stdout and "device   1: busy 44.00%" in r.stdout


def test_steps_and_kernels_json_shapes(tmp_path: Path) -> None:
    """The documented shapes (docs/json.md): checks outside the project parse them."""
    events = []
    for n in range(2):
        events += [
            x("user_annotation", f"ProfilerStep#{n + 1}", 100 * n, 100),
            launch(100 * n + 1, n + 1),
            kernel(f"k{n}", 100 * n + 5, 50, correlation=n + 1),
        ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    r = CliRunner().invoke(app, ["steps", str(path), "-f", "json", "--no-cache"])
    doc = json.loads(r.stdout)
    assert set(doc) == {"schema_version", "trace", "steps", "notes", "mfu"}
    assert doc["schema_version"] == 2
    step = doc["steps"][0]
    assert set(step) == {
        "step", "name", "cpu_start_us", "cpu_dur_us", "step_time_us", "paced_by", "kernels",
        "kernel_time_us", "devices", "gpu_only", "phase", "batch", "tokens", "degenerate",
        "model_flops", "mfu", "tflops_per_s", "flops_coverage", "tokens_source",
    }  # fmt: skip
    assert step["phase"] == "unknown"  # a ProfilerStep with nothing that tells its phase
    assert (step["name"], step["cpu_start_us"], step["kernels"]) == ("ProfilerStep#1", 0.0, 1)
    assert step["devices"] == [
        {"device": 0, "gpu_start_us": 5.0, "gpu_end_us": 55.0, "window_us": 50.0,
         "busy_us": 50.0, "idle_us": 0.0, "busy_pct": 100.0, "lag_us": 5.0, "queue_us": 4.0,
         "period_us": 50.0}
    ]  # fmt: skip
    r = CliRunner().invoke(app, ["kernels", str(path), "-f", "json", "--pstep", "2", "--no-cache"])
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == 2
    assert doc["trace"]["devices"] == [
        {"device": 0, "window_us": 50.0, "busy_us": 50.0, "busy_pct": 100.0}
    ]
    assert doc["trace"]["device_count"] == 1
    assert (doc["totals"]["gpu_busy_us"], doc["totals"]["gpu_busy_pct"]) == (50.0, 100.0)


def test_a_step_number_in_other_digits_is_not_a_step(tmp_path: Path) -> None:
    """``ProfilerStep#²`` is no step number (str.isdigit accepts it, int() does not)."""
    steps = [x("user_annotation", f"ProfilerStep#{n}", 0, 10) for n in ("²", "3")]
    events = read(tmp_path, [*steps, kernel("k", 1, 2)])
    assert [r.step for r in step_table(events)] == [3]

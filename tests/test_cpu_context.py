"""The CPU context of the largest gaps: what the launching thread was doing."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from traceview.analyses import cpu_context
from traceview.analyses.gaps import GapOptions, analyse_gaps
from traceview.cli import app
from traceview.cpu_rows import ArrayRows, CpuRows, SpillFile, rows
from traceview.events import collect_events
from traceview.read.reader import TraceReader


def x(cat: str, name: str, ts: int, dur: int, tid: int = 1, **args: int) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": 9, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def sync_trace(tmp_path: Path) -> Path:
    """Kernel a ends at 100; the CPU sits in cudaStreamSynchronize inside aten::item until
    300 and launches kernel b at 305, which runs at 310: a 210 µs gap the CPU caused."""
    events = [
        x("user_annotation", "ProfilerStep#1", 0, 400),
        x("cpu_op", "aten::mm", 10, 20),
        x("cuda_runtime", "cudaLaunchKernel", 15, 5, correlation=1),
        x("kernel", "a", 20, 80, tid=7, device=0, stream=7, correlation=1),
        x("cpu_op", "aten::item", 80, 230),
        x("cuda_runtime", "cudaStreamSynchronize", 90, 210, correlation=2),
        x("cpu_op", "aten::add", 303, 10),
        x("cuda_runtime", "cudaLaunchKernel", 305, 4, correlation=3),
        x("kernel", "b", 310, 10, tid=7, device=0, stream=7, correlation=3),
        x("cpu_op", "other_thread_op", 50, 400, tid=2),
    ]
    path = tmp_path / "sync.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_context_names_the_sync_and_the_late_launch(tmp_path: Path) -> None:
    events = collect_events(TraceReader(sync_trace(tmp_path)), keep_cpu=True)
    (gap,) = analyse_gaps(events, GapOptions()).largest
    assert (gap.before, gap.after, gap.length_us) == ("a", "b", 210.0)
    assert gap.context.runtime == "cudaStreamSynchronize"
    assert gap.context.cpu_op == "aten::item"
    assert gap.context.thread == "9/1"
    assert gap.context.launch_delay_us == 205.0
    assert gap.cpu_context == (
        "cudaStreamSynchronize in aten::item; next launch 205.0 µs after the gap began"
    )


def test_context_absent_without_cpu_columns(tmp_path: Path) -> None:
    events = collect_events(TraceReader(sync_trace(tmp_path)))
    (gap,) = analyse_gaps(events, GapOptions()).largest
    assert gap.cpu_context is None


def test_gaps_cli_json_carries_the_context(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["gaps", str(sync_trace(tmp_path)), "-f", "json"])
    assert r.exit_code == 0, r.output
    (largest,) = json.loads(r.stdout)["largest"]
    assert largest["launch"]["runtime"] == "cudaStreamSynchronize"
    assert largest["cpu_context"].startswith("cudaStreamSynchronize in aten::item")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    items=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20)), max_size=40),
    instants=st.sets(st.integers(0, 80), min_size=1, max_size=5),
    cut=st.integers(0, 40),
)
def test_scan_matches_brute_force(
    items: list[tuple[int, int]], instants: set[int], cut: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("traceview.cpu_rows.BLOCK_ROWS", 7)  # blocks, and a partial last one
    start = np.array([s for s, _ in items], dtype=np.int64)
    end = start + np.array([d for _, d in items], dtype=np.int64)
    order = np.arange(len(items), dtype=np.int64)  # the row number, kept as the name id
    table = rows(order, start, end, order, order)
    spill = SpillFile()  # the rows in two sources: a spill file, then memory
    spill.append(table[:cut])
    cpu = CpuRows((spill, ArrayRows(table[cut:])))
    live = cpu_context._scan(cpu, np.array(sorted(instants), dtype=np.int64))
    assert live["name"].tolist() == [
        i for i, (s, d) in enumerate(items) if any(s <= t <= s + d for t in instants)
    ]


def test_no_room_for_cpu_rows_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CPU rows go to a temporary file: when none can be made, gaps says what to do."""

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("tempfile.TemporaryFile", full)
    trace = str(sync_trace(tmp_path))
    r = CliRunner().invoke(app, ["gaps", trace, "--no-cache"])
    assert r.exit_code == 1, r.output
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "No space left on device" in r.stderr
    assert "TMPDIR" in r.stderr and "--largest 0" in r.stderr
    r = CliRunner().invoke(app, ["gaps", trace, "--no-cache", "--largest", "0"])
    assert r.exit_code == 0, r.output


def test_spilled_rows_read_back_in_order(tmp_path: Path) -> None:
    spill = SpillFile()
    table = rows(*(np.arange(n, n + 10, dtype=np.int64) for n in range(0, 50, 10)))
    for piece in np.array_split(table, 3):
        spill.append(piece)
    assert len(spill) == 10
    back = np.concatenate(list(CpuRows((spill,)).blocks(4)))
    assert back.tobytes() == table.tobytes()


def gap_between_launches(tmp_path: Path, cpu: list[dict]) -> Any:
    """The one gap (100 to 310) between kernels a and b, launched at 15 and 305 on thread
    9/1, with the CPU events ``cpu`` beside them; its LargestGap."""
    events = [
        *cpu,
        x("cuda_runtime", "cudaLaunchKernel", 15, 5, correlation=1),
        x("kernel", "a", 20, 80, tid=7, device=0, stream=7, correlation=1),
        x("cuda_runtime", "cudaLaunchKernel", 305, 4, correlation=3),
        x("kernel", "b", 310, 10, tid=7, device=0, stream=7, correlation=3),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    read = collect_events(TraceReader(path), keep_cpu=True)
    (gap,) = analyse_gaps(read, GapOptions()).largest
    return gap


def test_innermost_of_ops_starting_together_is_the_nested_one(tmp_path: Path) -> None:
    outer, inner = x("cpu_op", "aten::to", 50, 300), x("cpu_op", "aten::_to_copy", 50, 260)
    assert gap_between_launches(tmp_path, [outer, inner]).context.cpu_op == "aten::_to_copy"


def test_a_runtime_call_without_correlation_is_still_a_runtime_call(tmp_path: Path) -> None:
    cpu = [
        x("cpu_op", "aten::item", 80, 230),
        x("cuda_runtime", "cudaDeviceSynchronize", 90, 210),  # no correlation id
    ]
    no_dur = {k: v for k, v in x("cuda_runtime", "cudaGetDevice", 1, 0).items() if k != "dur"}
    for extra in ([], [no_dur]):  # converted a batch at a time; event by event (a dur missing)
        context = gap_between_launches(tmp_path, cpu + extra).context
        assert (context.runtime, context.cpu_op) == ("cudaDeviceSynchronize", "aten::item")

"""The CPU context of the largest gaps: what the launching thread was doing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from traceview.analyses import cpu_context
from traceview.analyses.gaps import GapOptions, analyse_gaps
from traceview.cli import app
from traceview.events import CpuColumns, collect_events
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
    rows=st.lists(
        st.tuples(st.integers(0, 50), st.integers(0, 20), st.integers(-1, 9)), max_size=40
    ),
    instants=st.sets(st.integers(0, 80), min_size=1, max_size=5),
    wanted=st.sets(st.integers(0, 9), min_size=1, max_size=4),
)
def test_scan_matches_brute_force(
    rows: list[tuple[int, int, int]],
    instants: set[int],
    wanted: set[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cpu_context, "_BLOCK", 7)  # several blocks, and a partial last one
    start = np.array([s for s, _, _ in rows], dtype=np.int64)
    end = start + np.array([d for _, d, _ in rows], dtype=np.int64)
    correlation = np.array([c for _, _, c in rows], dtype=np.int64)
    zeros = np.zeros(len(rows), dtype=np.int64)
    cpu = CpuColumns(zeros, start, end, zeros, correlation)
    live, launches = cpu_context._scan(
        cpu, np.array(sorted(instants), dtype=np.int64), np.array(sorted(wanted), dtype=np.int64)
    )
    assert live.tolist() == [
        i for i, (s, d, _) in enumerate(rows) if any(s <= t <= s + d for t in instants)
    ]
    assert launches.tolist() == [i for i, (_, _, c) in enumerate(rows) if c in wanted]

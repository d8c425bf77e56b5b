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

from traceview.analyses.core import cpu_context
from traceview.analyses.gaps import GapOptions, analyse_gaps
from traceview.cli import app
from traceview.columns.cpu_rows import FIELDS, ArrayRows, CpuRows, SpillFile, Windows, rows
from traceview.columns.parallel import collect_events
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


def test_context_names_what_held_the_gap(tmp_path: Path) -> None:
    """The gap runs from 100 to 310; the CPU launched b at 305: host wait 205 µs, cause cpu.
    aten::item (80-310) overlaps the host wait [100, 305] by 205, aten::add (303-313) by 2;
    the sync call (90-300) overlaps the gap by 200."""
    events = collect_events(TraceReader(sync_trace(tmp_path)), keep_cpu=True)
    (gap,) = analyse_gaps(events, GapOptions()).largest
    assert (gap.before, gap.after, gap.gap_ns) == ("a", "b", 210_000)
    assert (gap.host_wait_ns, gap.cause) == (205_000, "cpu")
    context = gap.context
    assert context.thread == "9/1" and context.launch_ns == 305_000
    assert [(h.name, h.overlap_ns) for h in context.ops] == [
        ("aten::item", 205_000),
        ("aten::add", 2_000),
    ]
    assert [(h.name, h.overlap_ns) for h in context.syncs] == [("cudaStreamSynchronize", 200_000)]
    assert context.covered_ns == 205_000


def test_context_absent_without_cpu_columns(tmp_path: Path) -> None:
    events = collect_events(TraceReader(sync_trace(tmp_path)))
    (gap,) = analyse_gaps(events, GapOptions()).largest
    assert gap.context.as_dict() is None
    assert gap.cause == "cpu"  # host wait needs only the runtime columns


def test_gaps_cli_json_carries_the_context(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["gaps", str(sync_trace(tmp_path)), "-f", "json"])
    assert r.exit_code == 0, r.output
    (largest,) = json.loads(r.stdout)["largest"]
    assert (largest["cause"], largest["host_wait_us"]) == ("cpu", 205.0)
    assert largest["cpu"]["ops"][0] == {"name": "aten::item", "overlap_us": 205.0}
    assert largest["cpu"]["syncs"] == [{"name": "cudaStreamSynchronize", "overlap_us": 200.0}]
    r = CliRunner().invoke(app, ["gaps", str(sync_trace(tmp_path)), "-f", "json", "--no-context"])
    assert r.exit_code == 0, r.output
    (largest,) = json.loads(r.stdout)["largest"]
    assert (largest["cause"], largest["cpu"]) == ("cpu", None)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    items=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20)), max_size=40),
    windows=st.lists(st.tuples(st.integers(0, 80), st.integers(0, 10)), min_size=1, max_size=5),
    cut=st.integers(0, 40),
)
def test_scan_matches_brute_force(
    items: list[tuple[int, int]],
    windows: list[tuple[int, int]],
    cut: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        "traceview.columns.cpu_rows.BLOCK_ROWS", 7
    )  # blocks, and a partial last one
    start = np.array([s for s, _ in items], dtype=np.int64)
    end = start + np.array([d for _, d in items], dtype=np.int64)
    order = np.arange(len(items), dtype=np.int64)  # the row number, kept as the name id
    table = rows(thread=order, name=order, ts=start, end=end, correlation=order)
    spill = SpillFile()  # the rows in two sources: a spill file, then memory
    spill.append(table[:cut])
    cpu = CpuRows((spill, ArrayRows(table[cut:])))
    lo = np.array([a for a, _ in windows], dtype=np.int64)
    hi = lo + np.array([w for _, w in windows], dtype=np.int64)
    live = cpu_context._scan(cpu, Windows.union_of(lo, hi))
    assert live["name"].tolist() == [
        i
        for i, (s, d) in enumerate(items)
        if any(s <= b and a <= s + d for a, b in zip(lo.tolist(), hi.tolist(), strict=True))
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
    assert "TMPDIR" in r.stderr and "--no-context" in r.stderr
    r = CliRunner().invoke(app, ["gaps", trace, "--no-cache", "--no-context"])
    assert r.exit_code == 0, r.output


def test_spilled_rows_read_back_in_order(tmp_path: Path) -> None:
    spill = SpillFile()
    columns = (np.arange(n, n + 10, dtype=np.int64) for n in range(0, 50, 10))
    table = rows(**dict(zip(FIELDS, columns, strict=False)))
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


def test_ops_of_equal_overlap_rank_the_innermost_first(tmp_path: Path) -> None:
    """Both ops cover the whole host wait [100, 305]: the nested one (same start, earlier
    end) is named first."""
    outer, inner = x("cpu_op", "aten::to", 50, 300), x("cpu_op", "aten::_to_copy", 50, 260)
    context = gap_between_launches(tmp_path, [outer, inner]).context
    assert [h.name for h in context.ops] == ["aten::_to_copy", "aten::to"]


def test_a_sync_call_without_correlation_is_still_a_sync_call(tmp_path: Path) -> None:
    cpu = [
        x("cpu_op", "aten::item", 80, 230),
        x("cuda_runtime", "cudaDeviceSynchronize", 90, 210),  # no correlation id
        x("cuda_runtime", "cudaMemcpyAsync", 95, 5),  # not a sync call
    ]
    no_dur = {k: v for k, v in x("cuda_runtime", "cudaGetDevice", 1, 0).items() if k != "dur"}
    for extra in ([], [no_dur]):  # converted a batch at a time; event by event (a dur missing)
        context = gap_between_launches(tmp_path, cpu + extra).context
        assert [h.name for h in context.syncs] == ["cudaDeviceSynchronize"]
        assert [h.name for h in context.ops] == ["aten::item"]


@pytest.mark.parametrize(
    ("name", "sync"),
    [
        ("cudaStreamSynchronize", True),
        ("cudaDeviceSynchronize", True),
        ("cudaEventSynchronize", True),
        ("cudaMemcpy", True),
        ("cudaMemcpy2D", True),
        ("cudaMemcpyAsync", False),
        ("cudaMemcpy2DAsync", False),
        ("hipDeviceSynchronize", True),
        ("hipMemcpy", True),
        ("hipMemcpyAsync", False),
        ("cuCtxSynchronize", True),
        ("cudaLaunchKernel", False),
        ("cudaStreamWaitEvent", False),
    ],
)
def test_sync_calls(name: str, sync: bool) -> None:
    assert cpu_context.is_sync_call(name) is sync

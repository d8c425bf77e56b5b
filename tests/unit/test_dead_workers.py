"""Workers killed mid-way (issue #34): a run's local engine names the rank; the nsys host
worker's death mid-message, or its not answering in time, falls back to reading its tables in
the main process."""

from __future__ import annotations

import json
import os
import signal
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from traceview import forked
from traceview.analyses.kernels import KernelOptions
from traceview.app.engines import local
from traceview.app.engines.worker import RankTask
from traceview.columns import nsys
from traceview.errors import TraceviewError
from traceview.options import ReadOptions


def _killed_on_rank_1(task: RankTask) -> Any:
    if task.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return task.rank


def test_a_killed_local_worker_names_its_rank(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local, "ingest", _killed_on_rank_1)
    tasks = [
        RankTask(r, tmp_path / f"rank{r}.json", ReadOptions(), KernelOptions()) for r in (0, 1)
    ]
    with pytest.raises(TraceviewError) as caught:
        list(local.summaries(tasks, jobs=1))
    assert caught.value.message.startswith(f"rank 1 ({tmp_path / 'rank1.json'}): the process")
    assert "died" in caught.value.message


def _stuck(conn: Any, *args: Any) -> None:
    time.sleep(600)  # e.g. on a lock held at the fork


def _dies_mid_message(conn: Any, *args: Any) -> None:
    os.write(conn.fileno(), struct.pack("!i", 1000) + b"abc")  # 3 bytes of a 1000-byte message
    os._exit(1)


@pytest.mark.parametrize("fails", ["dies mid-message", "stuck"])
def test_the_nsys_host_worker_dying_or_stuck_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str
) -> None:
    """Also when it is stuck: stopped once out of patience (here 0.5 s)."""
    from nsys_writer import kineto_to_nsys

    events = [
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10 + i, "dur": 1,
         "args": {"device": 0, "stream": 7, "correlation": i}}
        for i in range(50)
    ] + [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 5 + i, "dur": 1, "args": {"correlation": i}}
        for i in range(50)
    ]  # fmt: skip
    path = tmp_path / "t.sqlite"
    kineto_to_nsys(json.loads(json.dumps({"traceEvents": events})), path)
    expected = nsys.collect_nsys(path)
    worker = _dies_mid_message if fails == "dies mid-message" else _stuck
    monkeypatch.setattr(nsys, "_read_host_tables", worker)
    monkeypatch.setattr(forked, "PATIENCE_S", 0.5)
    monkeypatch.setattr(forked, "PATIENCE_FACTOR", 0.0)
    monkeypatch.setenv("TRACEVIEW_NSYS_SPLIT_MIN_ROWS", "0")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    got = nsys.collect_nsys(path)
    assert np.array_equal(got.runtime.ts, expected.runtime.ts)
    assert np.array_equal(got.gpu.ts, expected.gpu.ts) and len(got.runtime.ts) == 50

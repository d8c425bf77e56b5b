"""tests/hangs.py: a hung test is stopped and fails, and tests/hang_report.py prints where it
hung, the processes it forked included (what .ci/run shows at the end of CI's log)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="no /proc here")

HUNG = """
import os, time
from traceview.forked import Aside

def work():
    if os.getpid() != PARENT:
        time.sleep(600)  # the fork never answers
    return 1

PARENT = os.getpid()

def test_quick():
    pass

def test_waits_for_its_fork():
    assert Aside(work, int).result() == 1  # answered here once the fork is stopped

def test_never_ends():
    Aside(work, int)
    time.sleep(600)
"""


def _run(tmp_path: Path, test: str) -> tuple[subprocess.CompletedProcess[str], str, float]:
    (tmp_path / "test_it.py").write_text(HUNG)
    reports = tmp_path / "reports"
    reports.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(HERE),
        "TRACEVIEW_HANG_S": "8",
        "TRACEVIEW_HANG_REPORTS": str(reports),
    }
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "hangs", "-c", os.devnull,
         "--rootdir", str(tmp_path), "-p", "no:cacheprovider", f"test_it.py::{test}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    took = time.monotonic() - started
    shown = subprocess.run(
        [sys.executable, str(HERE / "hang_report.py"), str(reports)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return run, shown.stdout, took


def _fork_shown(report: str) -> None:
    lines = report.splitlines()
    fork = next(i for i, line in enumerate(lines) if line.startswith("  process "))
    assert "sleeping" in lines[fork]
    assert any(line.strip().endswith(" work") for line in lines[fork:]), report  # its stack


def test_a_test_that_ends_once_its_fork_is_stopped_fails(tmp_path: Path) -> None:
    run, report, took = _run(tmp_path, "test_waits_for_its_fork")
    assert run.returncode == 1, run.stdout + run.stderr
    assert "hung for 3 s: its forked processes were stopped" in run.stdout
    assert report.splitlines()[-1] == "==== hung: test_it.py::test_waits_for_its_fork", report
    _fork_shown(report)
    main = report.split("main thread", 1)[1].splitlines()
    innermost = [line.split()[-1] for line in main[-3:-1]]
    assert innermost == ["result", "poll"] and "traceview/forked.py:" in main[-2], report
    assert any(line.endswith("test_it.py:16 test_waits_for_its_fork") for line in main), report
    assert took < 60


def test_a_test_that_never_ends_ends_its_process(tmp_path: Path) -> None:
    run, report, took = _run(tmp_path, "test_never_ends")
    assert run.returncode != 0
    last = report.splitlines()[-2:]
    assert last[0].endswith("/test_it.py:20 test_never_ends"), report  # main's innermost frame
    assert last[1] == "==== hung: test_it.py::test_never_ends"
    _fork_shown(report)
    assert took < 60


def test_no_report_when_nothing_hangs(tmp_path: Path) -> None:
    run, report, _ = _run(tmp_path, "test_quick")
    assert run.returncode == 0, run.stdout + run.stderr
    assert report == ""

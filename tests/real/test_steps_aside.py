"""``steps``' analyses with the op links aside in a forked child (traceview.forked.Aside,
chosen by traceview.app.aside for a big trace) give exactly the serial output, on every real
trace: when the child answers, and when it fails (an exception, an exit without an answer)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, SHARED_TRACES, trace_params
from test_summary_aside import _Counted

from traceview.analyses.ops import step_report as report_module
from traceview.analyses.ops.step_report import StepReport, step_report
from traceview.app.commands import _unused
from traceview.app.reading import read_trace
from traceview.columns.model import TraceEvents
from traceview.forked import Aside
from traceview.options import ReadOptions
from traceview.render import steps as render_steps
from traceview.render.document import to_csv_text, to_json_text, to_plain

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


def _read(path: Path) -> TraceEvents:
    """What ``steps`` reads."""
    options = ReadOptions(quiet=True, cache=False)
    return read_trace(path, options, keep_cpu=True, remember=False, unused=_unused())


def _text(report: StepReport) -> str:
    """The report as JSON, CSV and the table, every step in them."""
    doc = render_steps.document(report.trace, report.rows, 0, report.flops)
    return to_json_text(doc) + to_csv_text(doc) + to_plain(doc)


_H200 = ("train", "decode", "eager", "graphs", "compiled2")  # with steps of every phase


@pytest.mark.parametrize(
    "path",
    trace_params()
    + [pytest.param(SHARED_TRACES / "h200" / f"{n}.json.gz", id=f"h200-{n}") for n in _H200],
)
def test_the_split_steps_are_the_serial_steps(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} is absent")
    events = _read(path)
    serial = _text(step_report(events))
    aside = _Counted()
    assert _text(step_report(events, aside=aside)) == serial
    assert aside.answered == 1  # the op links' known rows, from the child


def _h200(name: str) -> Path:
    path = SHARED_TRACES / "h200" / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


@pytest.mark.parametrize("how", ["raises", "exits", "wrong"])
def test_a_failed_child_is_worked_out_here(monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    events = _read(_h200("train.json.gz"))
    serial = _text(step_report(events))
    parent = os.getpid()
    work = report_module.linked_known_rows

    def failing(*args: Any, **kwargs: Any) -> Any:
        if os.getpid() != parent:  # in the child only
            if how == "raises":
                raise RuntimeError("child")
            if how == "exits":
                os._exit(0)
            return "not the result"
        return work(*args, **kwargs)

    monkeypatch.setattr(report_module, "linked_known_rows", failing)
    assert _text(step_report(events, aside=Aside)) == serial


def _steps(path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[bytes]:
    """``traceview steps PATH ARGS`` as a user runs it, with ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "traceview", "steps", str(path), "--no-cache", "-q", *args],
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **env},
        timeout=120,
    )


@pytest.mark.parametrize("args", [("-f", "json"), ()], ids=["json", "table"])
def test_the_command_line_splits_a_big_traces_steps_to_the_same_bytes(args: tuple[str]) -> None:
    path = _h200("train.json.gz")
    serial = _steps(path, *args, TRACEVIEW_ANALYSES="serial")
    assert serial.returncode == 0, serial.stderr
    split = _steps(path, *args, TRACEVIEW_PARALLEL_MIN_BYTES="1")
    assert (split.returncode, split.stdout, split.stderr) == (0, serial.stdout, serial.stderr)

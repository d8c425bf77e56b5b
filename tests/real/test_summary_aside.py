"""``summary``'s analyses with work aside in forked children (traceview.forked.Aside, chosen
by traceview.app.aside for a big trace) give exactly the serial output, on every real trace:
when the children answer, and when they fail (an exception, an exit without an answer)."""

from __future__ import annotations

import gc
import gzip
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest
from conftest import ROOT, SHARED_TRACES, trace_params

from traceview.analyses import summary
from traceview.analyses.core.devices import GapSet
from traceview.analyses.summary import Overview, overview
from traceview.app import aside
from traceview.app.aside import aside_for
from traceview.app.commands import _unused
from traceview.app.reading import read_trace
from traceview.columns.model import TraceEvents
from traceview.forked import Aside
from traceview.options import ReadOptions
from traceview.render import summary as render_summary

T = TypeVar("T")
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


def _read(path: Path) -> TraceEvents:
    """What ``summary`` reads (phases from overview's pass)."""
    options = ReadOptions(quiet=True, cache=False)
    unused = _unused(flows=True)
    return read_trace(
        path, options, keep_cpu=True, remember=False, memory=True, frames=True, unused=unused
    )


def _text(report: Overview) -> str:
    """The report as JSON and as its table document."""
    return json.dumps(report.as_json()) + repr(render_summary.document(report))


class _Counted:
    """Aside, counting the answers that came from a child."""

    def __init__(self) -> None:
        self.answered = 0

    def __call__(self, work: Callable[[], T], kind: type[T]) -> _Later[T]:
        parent = os.getpid()
        return _Later(self, Aside(lambda: (work(), os.getpid() != parent), tuple))


class _Later(Generic[T]):
    def __init__(self, counted: _Counted, later: Aside[tuple[T, bool]]) -> None:
        self.counted, self.later = counted, later

    def result(self) -> T:
        value, in_child = self.later.result()
        self.counted.answered += in_child
        return value

    def cancel(self) -> None:
        self.later.cancel()


_H200 = ("train", "decode", "eager", "graphs", "compiled2")  # with steps of every phase


@pytest.mark.parametrize(
    "path",
    trace_params()
    + [pytest.param(SHARED_TRACES / "h200" / f"{n}.json.gz", id=f"h200-{n}") for n in _H200],
)
def test_the_split_summary_is_the_serial_summary(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} is absent")
    events = _read(path)
    serial = _text(overview(events, phases_here=True))
    aside = _Counted()
    assert _text(overview(events, phases_here=True, aside=aside)) == serial
    assert aside.answered == 2  # the op calls and kernels, then the devices and hints


def _h200(name: str) -> Path:
    path = SHARED_TRACES / "h200" / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


@pytest.mark.parametrize("how", ["raises", "exits", "wrong"])
def test_a_failed_child_is_worked_out_here(monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    events = _read(_h200("train.json.gz"))
    serial = _text(overview(events, phases_here=True))
    parent = os.getpid()

    def failing(work: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            if os.getpid() != parent:  # in the child only
                if how == "raises":
                    raise RuntimeError("child")
                if how == "exits":
                    os._exit(0)
                return "not the result"
            return work(*args, **kwargs)

        return run

    monkeypatch.setattr(summary, "calls_and_kernels", failing(summary.calls_and_kernels))
    monkeypatch.setattr(summary, "device_hints", failing(summary.device_hints))
    assert _text(overview(events, phases_here=True, aside=Aside)) == serial


@pytest.mark.parametrize("split", [False, True])
def test_the_operators_go_without_the_gaps(monkeypatch: pytest.MonkeyPatch, split: bool) -> None:
    """The hints take the gaps first (here, or lent to the child that works them out, whose
    copy is its own); the operators then hold none of this trace's gaps (18 B a gap), and the
    output is the same."""
    events = _read(_h200("train.json.gz"))
    serial = _text(overview(events, phases_here=True))
    held: list[int] = []
    real = summary.analyse_ops

    def spy(*args: Any, **kwargs: Any) -> Any:
        gc.collect()
        mine = [o for o in gc.get_objects() if isinstance(o, GapSet) and o.ts is events.gpu.ts]
        held.append(len(mine))
        return real(*args, **kwargs)

    monkeypatch.setattr(summary, "analyse_ops", spy)
    assert _text(overview(events, phases_here=True, aside=Aside if split else None)) == serial
    assert held == [0]


def test_the_facts_and_checks_come_before_the_links(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trace's facts (summarize's data checks) and audit's checks are worked out before
    the links are held: their temporaries do not add to the links' peak."""
    events = _read(_h200("train.json.gz"))
    assert events.facts is None  # a read without the cache: worked out by the first to need them
    calls: list[str] = []
    checks, linked = summary.checks_of, summary.linked

    def checks_spy(*args: Any, **kwargs: Any) -> Any:
        calls.append("checks")
        return checks(*args, **kwargs)

    def linked_spy(events: TraceEvents, *args: Any, **kwargs: Any) -> Any:
        calls.append("links" if events.facts is not None else "links without facts")
        return linked(events, *args, **kwargs)

    monkeypatch.setattr(summary, "checks_of", checks_spy)
    monkeypatch.setattr(summary, "linked", linked_spy)
    overview(events, phases_here=True)
    assert calls == ["checks", "links"]


def _summary(path: Path, **env: str) -> subprocess.CompletedProcess[bytes]:
    """``traceview summary PATH -f json`` as a user runs it, with ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "traceview", "summary", str(path), "--no-cache", "-q", "-f", "json"],
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **env},
        timeout=120,
    )


def test_the_command_line_splits_a_big_traces_analyses_to_the_same_bytes() -> None:
    path = _h200("train.json.gz")
    serial = _summary(path, TRACEVIEW_ANALYSES="serial")
    assert serial.returncode == 0, serial.stderr
    split = _summary(path, TRACEVIEW_PARALLEL_MIN_BYTES="1")
    assert (split.returncode, split.stdout, split.stderr) == (0, serial.stdout, serial.stderr)


def test_aside_for_a_big_trace_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Big: as much text as a trace read in two processes, a gzip file's inflated text."""
    path = _h200("train.json.gz")
    events = _read(path)
    text = len(gzip.decompress(path.read_bytes()))
    monkeypatch.delenv("TRACEVIEW_ANALYSES", raising=False)
    monkeypatch.delenv("TRACEVIEW_SPLIT", raising=False)
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", str(text + 1))
    assert aside_for(events) is None
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", str(text))
    assert aside_for(events) is (Aside if (os.cpu_count() or 1) > 1 else None)
    for name, value in (("TRACEVIEW_ANALYSES", "serial"), ("TRACEVIEW_SPLIT", "threads")):
        monkeypatch.setenv(name, value)
        assert aside_for(events) is None
        monkeypatch.delenv(name)


def test_no_aside_past_its_gpu_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace with more GPU activities than ASIDE_MAX_GPU_ROWS is analysed in one process: a
    child's temporaries would come on top of what the main process holds."""
    events = _read(_h200("train.json.gz"))
    rows = len(events.gpu.ts)
    assert rows > 1000
    monkeypatch.delenv("TRACEVIEW_ANALYSES", raising=False)
    monkeypatch.delenv("TRACEVIEW_SPLIT", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1")
    monkeypatch.setattr(aside, "ASIDE_MAX_GPU_ROWS", rows)
    assert aside_for(events) is (Aside if sys.platform.startswith("linux") else None)
    monkeypatch.setattr(aside, "ASIDE_MAX_GPU_ROWS", rows - 1)
    assert aside_for(events) is None

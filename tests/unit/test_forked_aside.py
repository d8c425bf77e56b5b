"""traceview.forked.Aside: a value worked out in a forked child, else here; the child writes
nothing on the parent's standard output or error."""

from __future__ import annotations

import gzip
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from traceview import cache, forked
from traceview.app.aside import ASIDE_MAX_GPU_ROWS, aside_for
from traceview.forked import Aside
from traceview.read.source import text_size_hint

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_the_value_comes_from_the_child() -> None:
    assert Aside(os.getpid, int).result() != os.getpid()


@pytest.mark.parametrize("how", ["raises", "exits", "killed", "wrong type"])
def test_a_failed_child_is_worked_out_here(how: str, capfd: pytest.CaptureFixture[str]) -> None:
    parent = os.getpid()

    def work() -> int:
        if os.getpid() != parent:
            if how == "raises":
                raise RuntimeError("in the child")
            if how == "exits":
                os._exit(0)
            if how == "killed":
                os.kill(os.getpid(), signal.SIGKILL)
            return "a str"  # type: ignore[return-value]
        return 42

    assert Aside(work, int).result() == 42
    assert capfd.readouterr() == ("", "")  # no traceback


def test_the_child_writes_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    def work() -> int:
        print("out")
        print("err", file=sys.stderr)
        os.write(1, b"fd 1")
        os.write(2, b"fd 2")
        return 1

    assert Aside(work, int).result() == 1
    assert capfd.readouterr() == ("", "")


def test_a_cancelled_child_is_stopped() -> None:
    parent = os.getpid()

    def work() -> int:
        if os.getpid() != parent:
            time.sleep(600)
        return 0

    later = Aside(work, int)
    pid = later._child.pid if later._child is not None else None
    later.cancel()
    assert pid is not None
    with pytest.raises(ChildProcessError):  # ended and waited for
        os.waitpid(pid, os.WNOHANG)


def test_a_child_that_does_not_answer_in_time_is_stopped_and_worked_out_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """E.g. a child stuck on a lock another thread held at the fork: this process waits
    ``patience`` (here half a second), stops it and works it out itself."""
    parent = os.getpid()

    def work() -> int:
        if os.getpid() != parent:
            time.sleep(600)
        return 7

    monkeypatch.setattr(forked, "PATIENCE_S", 0.5)
    monkeypatch.setattr(forked, "PATIENCE_FACTOR", 0.0)
    later = Aside(work, int)
    pid = later._child.pid if later._child is not None else None
    assert pid is not None
    assert later.result() == 7
    with pytest.raises(ChildProcessError):  # stopped and waited for
        os.waitpid(pid, os.WNOHANG)


def test_patience_grows_with_the_time_this_process_went_on() -> None:
    now = time.monotonic()
    assert forked.patience(now) == forked.PATIENCE_S
    long_ago = now - 10 * forked.PATIENCE_S
    assert forked.patience(long_ago) >= forked.PATIENCE_FACTOR * 10 * forked.PATIENCE_S


def test_no_fork_is_worked_out_here(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise OSError("no process left")

    monkeypatch.setattr(os, "fork", no_fork)
    later = Aside(os.getpid, int)
    assert later.result() == os.getpid()


def test_no_child_aside_while_a_thread_writes_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fork copies the locks a cache writer's thread holds (say, of a module it imports) and
    not the thread: the analyses then stay in this process."""
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1")
    monkeypatch.delenv("TRACEVIEW_ANALYSES", raising=False)
    monkeypatch.delenv("TRACEVIEW_SPLIT", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    events = SimpleNamespace(size_bytes=10, gpu=SimpleNamespace(ts=range(3)))
    expected = Aside if sys.platform.startswith("linux") else None
    assert aside_for(events) is expected  # type: ignore[arg-type]
    done = threading.Event()
    writer = threading.Thread(target=done.wait)
    monkeypatch.setattr(cache, "_writing", [writer])
    writer.start()
    try:
        assert aside_for(events) is None  # type: ignore[arg-type]
    finally:
        done.set()
        writer.join()
    assert aside_for(events) is expected  # type: ignore[arg-type]


def test_no_child_aside_past_its_gpu_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """More GPU activities than ASIDE_MAX_GPU_ROWS: the analyses stay in this process."""
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1")
    monkeypatch.delenv("TRACEVIEW_ANALYSES", raising=False)
    monkeypatch.delenv("TRACEVIEW_SPLIT", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    at = SimpleNamespace(size_bytes=10, gpu=SimpleNamespace(ts=range(ASIDE_MAX_GPU_ROWS)))
    past = SimpleNamespace(size_bytes=10, gpu=SimpleNamespace(ts=range(ASIDE_MAX_GPU_ROWS + 1)))
    assert aside_for(at) is (Aside if sys.platform.startswith("linux") else None)  # type: ignore[arg-type]
    assert aside_for(past) is None  # type: ignore[arg-type]


def _gzip_events(path: Path) -> SimpleNamespace:
    """What aside_for looks at of a trace read from ``path``: its size on disk."""
    return SimpleNamespace(
        path=str(path), size_bytes=path.stat().st_size, gpu=SimpleNamespace(ts=range(3))
    )


def test_a_gzip_trace_is_as_big_as_its_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """The analyses of a gzip trace are as much work as those of the text it inflates to:
    its inflated size, not the size on disk, decides."""
    monkeypatch.delenv("TRACEVIEW_ANALYSES", raising=False)
    monkeypatch.delenv("TRACEVIEW_SPLIT", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    path = FIXTURES / "demo.json.gz"
    text = len(gzip.decompress(path.read_bytes()))
    events = _gzip_events(path)
    assert events.size_bytes < text // 4
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", str(text))
    expected = Aside if sys.platform.startswith("linux") else None
    assert aside_for(events) is expected  # type: ignore[arg-type]
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", str(text + 1))
    assert aside_for(events) is None  # type: ignore[arg-type]


def test_the_text_size_hint(tmp_path: Path) -> None:
    plain = tmp_path / "t.json"
    plain.write_bytes(b'{"traceEvents": []}')
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(b" " * 100_000))
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(packed.read_bytes()[:3])  # too short for a trailer
    assert text_size_hint(plain, 19) == 19
    assert text_size_hint(packed, packed.stat().st_size) == 100_000
    assert text_size_hint(str(packed), 7) == 100_000
    assert text_size_hint(cut, 3) == 3
    assert text_size_hint(tmp_path / "gone.json.gz", 5) == 5
    assert text_size_hint(tmp_path, 5) == 5  # a directory
    assert text_size_hint("-", 5) == 5  # standard input: never opened again


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_the_text_size_hint_leaves_a_pipe_unread(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.pipe"
    os.mkfifo(fifo)
    assert text_size_hint(fifo, 0) == 0  # opened, it would wait for a writer or take bytes

"""traceview.forked.Aside: a value worked out in a forked child, else here; the child writes
nothing on the parent's standard output or error."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from traceview.forked import Aside

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


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


def test_no_fork_is_worked_out_here(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise OSError("no process left")

    monkeypatch.setattr(os, "fork", no_fork)
    later = Aside(os.getpid, int)
    assert later.result() == os.getpid()

"""Forked workers leave Ctrl-C to the parent (which prints the one line); a forked child
answers through its channels, and one that dies or is stopped mid-way is seen as such."""

from __future__ import annotations

import multiprocessing
import os
import signal
import struct
import threading
import time
from multiprocessing.connection import Connection

import numpy as np
import pytest

from traceview.forked import Channel, Child, in_child, start_child


def _report_handler(conn: Connection) -> None:
    in_child()
    blocked = signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    conn.send((signal.getsignal(signal.SIGINT) == signal.SIG_IGN, blocked))
    conn.close()


def test_a_child_ignores_ctrl_c_and_the_parent_keeps_it() -> None:
    # As Python starts in a terminal; a job started in the background inherits SIGINT ignored.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _check_a_child_ignores_ctrl_c()
    finally:
        signal.signal(signal.SIGINT, previous)


def _check_a_child_ignores_ctrl_c() -> None:
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_report_handler, args=(sender,))
    start_child(child)
    sender.close()
    ignored, blocked = receiver.recv()
    child.join()
    assert ignored and not blocked
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _answer(conn: Channel, question: Channel) -> None:
    asked = question.recv()
    conn.send(("part", asked * 2, signal.getsignal(signal.SIGINT) == signal.SIG_IGN))
    conn.send_bytes(np.arange(5, dtype=np.int64))


def test_a_child_answers_through_its_channels() -> None:
    receiver, sender = Channel.pipe()
    question_in, question_out = Channel.pipe()
    child = Child(_answer, (sender, question_in), close=(receiver, question_out))
    sender.close()
    question_in.close()
    question_out.send(21)
    assert receiver.recv() == ("part", 42, True)
    array = np.zeros(8, dtype=np.int64)
    assert receiver.recv_bytes_into(array) == 40
    assert array.tolist() == [0, 1, 2, 3, 4, 0, 0, 0]
    with pytest.raises(EOFError):  # the child ended: its end is closed
        receiver.recv()
    child.stop()
    receiver.close()
    question_out.close()
    with pytest.raises(ChildProcessError):  # reaped
        os.waitpid(child.pid, os.WNOHANG)


def _half_a_message(conn: Channel) -> None:
    os.write(conn._file.fileno(), struct.pack("<Q", 1000) + b"abc")
    os._exit(1)


def test_a_child_dying_mid_message_is_an_end_of_file() -> None:
    receiver, sender = Channel.pipe()
    child = Child(_half_a_message, (sender,), close=(receiver,))
    sender.close()
    with pytest.raises(EOFError):
        receiver.recv()
    child.stop()
    receiver.close()


def test_stop_kills_a_child_still_running() -> None:
    receiver, sender = Channel.pipe()
    child = Child(time.sleep, (60,), close=(receiver,))
    sender.close()
    started = time.monotonic()
    child.stop()  # killed, then reaped
    child.stop()  # once is enough
    assert time.monotonic() - started < 30
    receiver.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(child.pid, os.WNOHANG)


def test_a_failed_fork_lets_ctrl_c_through_again(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise BlockingIOError("no process left")

    monkeypatch.setattr(os, "fork", no_fork)
    with pytest.raises(BlockingIOError):
        Child(time.sleep, (0,))
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())


def test_a_child_that_says_done_is_joined_before_it_has_exited(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``says_done``: join returns once the target has returned; the child's own end (held
    here until this test lets it go) is waited for later, without blocking."""
    from traceview import forked

    release_read, release_write = os.pipe()
    real_exit = os._exit

    def exit_when_released(code: int) -> None:  # only the child gets here
        os.read(release_read, 1)
        real_exit(code)

    monkeypatch.setattr(os, "_exit", exit_when_released)
    child = Child(time.sleep, (0,), says_done=True)
    os.close(release_read)
    joined = threading.Thread(target=child.join)
    joined.start()
    joined.join(30)
    assert not joined.is_alive()  # the join did not wait for the exit
    assert os.waitpid(child.pid, os.WNOHANG) == (0, 0)  # still running: not reaped yet
    assert child.pid in forked._unreaped
    os.write(release_write, b"x")
    os.close(release_write)
    deadline = time.monotonic() + 30
    while child.pid in forked._unreaped and time.monotonic() < deadline:
        forked._reap()
        time.sleep(0.01)
    assert child.pid not in forked._unreaped
    with pytest.raises(ChildProcessError):  # reaped
        os.waitpid(child.pid, os.WNOHANG)


def test_a_child_killed_before_it_says_done_is_joined() -> None:
    child = Child(time.sleep, (60,), says_done=True)
    os.kill(child.pid, signal.SIGKILL)
    child.join()  # the pipe's end closed by its death
    deadline = time.monotonic() + 30
    while child.pid in _unreaped_pids() and time.monotonic() < deadline:
        time.sleep(0.01)
        Child(time.sleep, (0,)).join()  # a Child started reaps what has exited
    assert child.pid not in _unreaped_pids()


def _unreaped_pids() -> list[int]:
    from traceview import forked

    return forked._unreaped


def test_a_join_cut_short_leaves_the_child_to_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while waiting for a child that says done: stop() then kills and reaps it."""
    child = Child(time.sleep, (60,), says_done=True)
    real_read = os.read

    def interrupted(fd: int, n: int) -> bytes:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "read", interrupted)
    with pytest.raises(KeyboardInterrupt):
        child.join()
    monkeypatch.setattr(os, "read", real_read)
    assert not child.done()
    child.stop()
    assert child.done()
    with pytest.raises(ChildProcessError):  # killed and reaped
        os.waitpid(child.pid, os.WNOHANG)


_LEFT_DONE = """
import os

from traceview import forked


def hold_memory():
    block = b"x" * (200 << 20)  # written: resident
    return len(block)


forked._reap = lambda: None  # none reaped by a later fork or join: left for the exit
child = forked.Child(hold_memory, (), says_done=True)
child.join()
assert forked._unreaped == [child.pid]
"""


def test_a_child_that_said_done_is_waited_for_at_exit() -> None:
    """A child still unwaited when the command ends is waited for then, so the peak memory
    of the children it waited for (what /usr/bin/time gives) counts it."""
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", _LEFT_DONE])
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode == 0
    assert usage.ru_maxrss >= 200 << 10  # KiB: the child's 200 MiB

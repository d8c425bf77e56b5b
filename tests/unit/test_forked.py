"""Forked workers leave Ctrl-C to the parent (which prints the one line)."""

from __future__ import annotations

import multiprocessing
import signal
from multiprocessing.connection import Connection

from traceview.forked import in_child, start_child


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

"""A pure-Python pass over many items on both cores: the second half in a forked process.

The interpreter runs one thread at a time, so a pass that calls Python code per item (short
names of 10^6 kernel names: ~1 s) takes as long on two cores as on one. A forked child
shares this process's memory as it is (nothing is copied or pickled on the way in) and sends
back only its half's result.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import TypeVar

from traceview.forked import in_child, start_child

T = TypeVar("T")


def in_halves(work: Callable[[int, int], T], n: int, min_items: int) -> list[T]:
    """``[work(0, m), work(m, n)]`` (m = n // 2), the second worked out in a forked child
    while this process does the first; ``[work(0, n)]`` below ``min_items`` items, on one
    CPU, without fork, or when this process runs another thread (a fork copies only the
    calling thread: a lock another one holds would stay held in the child). If the child
    fails or dies, its half is worked out here: the result is the same either way."""
    if n < max(min_items, 2) or not _can_fork():
        return [work(0, n)]
    mid = n // 2
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child, args=(sender, work, mid, n), daemon=True)
    start_child(child)
    sender.close()
    answer: tuple[T] | None = None
    try:
        first = work(0, mid)
        try:
            answer = receiver.recv()
        except (EOFError, OSError):  # the child died before it could answer
            answer = None
    finally:
        receiver.close()
        if child.is_alive() and answer is None:
            child.kill()
        child.join()
    return [first, work(mid, n) if answer is None else answer[0]]


def _can_fork() -> bool:
    return (
        (os.cpu_count() or 1) > 1
        and threading.active_count() == 1
        and "fork" in multiprocessing.get_all_start_methods()
    )


def _child(conn: Connection, work: Callable[[int, int], T], lo: int, hi: int) -> None:
    """In the forked child: send ``(work(lo, hi),)``, or None if it fails (the parent then
    works it out, and reports any error itself). Ctrl-C is the parent's to answer (with one
    line; it then stops the child): here it is ignored, so no second message or traceback."""
    in_child()
    try:
        result: tuple[T] | None = (work(lo, hi),)
    except Exception:
        result = None
    try:
        conn.send(result)
    except OSError:  # the parent stopped listening (interrupted)
        pass
    finally:
        conn.close()

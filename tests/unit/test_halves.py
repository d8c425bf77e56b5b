"""A pass split in two processes gives what one process gives, whatever the child does."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

import pytest

from traceview.analyses.core import names
from traceview.analyses.core.halves import in_halves
from traceview.analyses.core.names import display_names

PARENT = os.getpid()


@pytest.fixture(autouse=True)
def _no_dask_offload_thread() -> None:
    """in_halves forks only while this is the process's one thread; a Dask run earlier in the
    session (tests/real/test_ranks.py) leaves distributed's offload thread alive. Its executor
    is swapped for a fresh one (threads made on first use) and the old one's thread ended."""
    import sys
    from concurrent.futures import ThreadPoolExecutor

    utils = sys.modules.get("distributed.utils")
    if utils is not None and getattr(utils, "_offload_executor", None) is not None:
        old = utils._offload_executor
        utils._offload_executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="Dask-Offload"
        )
        old.shutdown(wait=True)


def squares_and_pid(lo: int, hi: int) -> tuple[list[int], int]:
    return [i * i for i in range(lo, hi)], os.getpid()


def test_the_second_half_is_worked_out_in_a_child() -> None:
    (first, here), (second, there) = in_halves(squares_and_pid, 10, min_items=4)
    assert first + second == [i * i for i in range(10)]
    assert here == PARENT and there != PARENT


def test_small_inputs_stay_in_this_process() -> None:
    [(whole, here)] = in_halves(squares_and_pid, 3, min_items=4)
    assert whole == [0, 1, 4] and here == PARENT


def test_no_fork_while_another_thread_runs() -> None:
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        [(whole, here)] = in_halves(squares_and_pid, 10, min_items=4)
    finally:
        stop.set()
        thread.join()
    assert whole == [i * i for i in range(10)] and here == PARENT


def fails_in_a_child(lo: int, hi: int) -> list[int]:
    if os.getpid() != PARENT:
        raise RuntimeError("only in the child")
    return list(range(lo, hi))


def dies_in_a_child(lo: int, hi: int) -> list[int]:
    if os.getpid() != PARENT:
        os._exit(3)
    return list(range(lo, hi))


@pytest.mark.parametrize("work", [fails_in_a_child, dies_in_a_child])
def test_a_failing_child_costs_time_not_the_answer(
    work: Callable[[int, int], list[int]],
) -> None:
    first, second = in_halves(work, 10, min_items=4)
    assert first + second == list(range(10))


def test_display_names_are_the_same_on_one_or_two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """Including a lookalike in the child's half: 'k #2' is also how the second of two
    k<int> calls the template arguments cannot tell apart would show."""
    filler = [f"void ns::k{i // 3}<{i % 3}>(int)" for i in range(300)]
    alike = ["void k<int>(a)", "void k<int>(b)", "k #2"]
    many = filler + alike
    monkeypatch.setattr(names, "_HALVES_FROM", 10**9)
    one = display_names(many)
    alone = {n: one[n] for n in many}
    assert len({alone[n] for n in alike}) == 3
    monkeypatch.setattr(names, "_HALVES_FROM", 10)
    two = display_names(many)
    assert {n: two[n] for n in many} == alone


def sigint_handler(lo: int, hi: int) -> object:
    return signal.getsignal(signal.SIGINT)


def test_the_child_leaves_ctrl_c_to_the_parent() -> None:
    """The parent prints the one line; a child's KeyboardInterrupt would add a traceback."""
    here, there = in_halves(sigint_handler, 10, min_items=4)
    assert here is signal.default_int_handler and there == signal.SIG_IGN

"""A test still running after HANG_S seconds (the slowest take ~25 s) is taken as hung.

Without $TRACEVIEW_HANG_REPORTS, faulthandler writes every thread's stack to stderr then.
Where it names a folder (.ci/run does), this process's file there gets, ``_STOP_S`` into the
test: every thread's stack, then the state of each process the test forked and, for a fork, its
own stack; those processes are then killed and the test fails, whether it then ends or not. If
it still runs at HANG_S, faulthandler writes the stacks again and ends this process, so the run
ends, failing, long before CI's time limit. .ci/run prints the files through tests/hang_report.py,
innermost frames last: CI's log keeps only its tail.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

HANG_S = float(os.environ.get("TRACEVIEW_HANG_S", "240"))
_STOP_S = HANG_S - max(HANG_S / 8, 5.0)  # when the forked processes are asked, then stopped
_state: dict[str, Any] = {}
BEFORE = "before its forked processes were stopped"  # heads the first dump in a file


def pytest_configure(config: pytest.Config) -> None:
    if "stack" in _state:
        return
    folder = os.environ.get("TRACEVIEW_HANG_REPORTS")
    if folder and Path(folder).is_dir():
        # Appended to (O_APPEND): faulthandler, this process and its forks write to each.
        stack = open(Path(folder) / f"hang-{os.getpid()}.txt", "a")  # noqa: SIM115 (to the end)
        forks = open(Path(folder) / f"forks-{os.getpid()}.txt", "a")  # noqa: SIM115
        # A forked process keeps this handler and the file: a signal has it write its stack.
        faulthandler.register(signal.SIGUSR2, file=forks, all_threads=True)
        _state.update(stack=stack, forks=forks, hung=None)
    else:  # stderr as it is now, before a test's output is captured
        _state.update(stack=os.fdopen(os.dup(sys.__stderr__.fileno()), "w"), forks=None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    stack, forks = _state["stack"], _state["forks"]
    stop = None
    if forks is not None:
        for file in (stack, forks):
            file.truncate(0)
        stack.write(f"test: {item.nodeid}\n")
        stack.flush()
        stop = threading.Timer(_STOP_S, _stop_forks, (item.nodeid,))
        stop.daemon = True
        stop.start()
    faulthandler.dump_traceback_later(HANG_S, file=stack, exit=forks is not None)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        if stop is not None:
            stop.cancel()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if _state.get("hung") == item.nodeid and report.when == "call":
        report.outcome = "failed"
        report.longrepr = f"hung for {_STOP_S:.0f} s: its forked processes were stopped"


def _stop_forks(nodeid: str) -> None:
    """Write this process's stacks, then each process it forked (and theirs): its state and,
    for a fork of this one, its stack; then kill them."""
    _state["hung"] = nodeid
    stack, forks = _state["stack"], _state["forks"]
    stack.write(f"{BEFORE}:\n")
    stack.flush()
    faulthandler.dump_traceback(file=stack, all_threads=True)
    found = _descendants(os.getpid())
    command = Path("/proc/self/cmdline").read_bytes()
    for pid in found:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            wchan = Path(f"/proc/{pid}/wchan").read_text()
            fork = Path(f"/proc/{pid}/cmdline").read_bytes() == command
        except OSError:
            continue
        state = next((s for s in status.splitlines() if s.startswith("State:")), "State: ?")
        forks.write(f"process {pid}: {state.removeprefix('State:').strip()}, in {wchan or '-'}\n")
        forks.flush()
        if fork:  # a fork of this one: the handler writes its stack (a program would end)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGUSR2)
            threading.Event().wait(0.3)
    for pid in found:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            continue
        for kid in kids:
            found += [kid, *_descendants(kid)]
    return found

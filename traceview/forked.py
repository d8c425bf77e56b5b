"""Forked worker processes that leave Ctrl-C to their parent.

A terminal sends Ctrl-C to every process of the command. The parent answers it with one
line (``traceview: interrupted``) and stops its children; a child that took it too would
print a traceback of its own. So the signal is held back while a child is forked, and the
child ignores it before letting it through.
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # multiprocessing is imported only when a trace is split (start-up)
    from multiprocessing.process import BaseProcess


def start_child(process: BaseProcess) -> None:
    """``process.start()`` (a fork) with Ctrl-C held back until it is done."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def in_child() -> None:
    """First thing in a child started by ``start_child``: ignore Ctrl-C from now on."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

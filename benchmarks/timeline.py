"""One run of a command, with each process's wall (ms since the shell started it) and CPU
(ms of that process) at the points around the read: imports, fork, each part's read, the
worker's part received, the merge, the analysis (kernels), the output and the exit; with the
cache, its slot's opening, the entry's writer (its imports and tables: a forked writer prints
its own marks) and the wait for it.

The points are function calls wrapped as their modules are imported (this script imports
nothing of traceview before ``main``, so start-up is the command's own). Before each run:

    T0=$(date +%s.%N) PYTHONPATH=<tree> python benchmarks/timeline.py kernels TRACE \\
        --no-cache -q -f json >/dev/null

``SHARE=0.57`` sets the plain split's worker share (``read.reader._PLAIN_WORKER_SHARE``).
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

T0 = float(os.environ.get("T0", time.time()))
MARKS: list[tuple[float, float, int, str]] = []


def mark(what: str) -> None:
    MARKS.append((time.time() - T0, time.process_time(), os.getpid(), what))


def dump() -> None:
    mark("exit")
    for wall, cpu, pid, what in MARKS:
        print(f"{wall * 1000:8.1f} ms  cpu {cpu * 1000:7.1f}  {pid} {what}", file=sys.stderr)
    sys.stderr.flush()


def wrapped(f: Callable[..., Any], label: str, last: bool = False) -> Callable[..., Any]:
    """``f`` marking its start and end (``last``: the worker's last call, its marks printed)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        mark(f"{label} start")
        if last:  # before: once its part is sent, the main process may end the worker
            dump()
            MARKS.clear()
        try:
            return f(*args, **kwargs)
        finally:
            mark(f"{label} end")
            if last:
                dump()

    return call


def _parallel(m: ModuleType) -> None:
    for name, label in [("collect_events", "collect_events"), ("_collect", "read part"),
                        ("_receive", "receive part"), ("_serial", "serial")]:  # fmt: skip
        setattr(m, name, wrapped(getattr(m, name), label))
    for name in ("Child", "start_child"):  # this tree's fork, or an older one's
        if hasattr(m, name):
            setattr(m, name, wrapped(getattr(m, name), "fork"))
    m._send = wrapped(m._send, "worker sends", last=True)
    if hasattr(m._WorkerRenumbers, "finish"):  # the CPU rows wait for the worker's mapping
        m._WorkerRenumbers.finish = wrapped(m._WorkerRenumbers.finish, "rows wait")


def _collect(m: ModuleType) -> None:
    for name in ("absorb_before", "finish"):
        setattr(m.EventCollector, name, wrapped(getattr(m.EventCollector, name), name))


def _commands(m: ModuleType) -> None:
    m.read_trace = wrapped(m.read_trace, "read_trace")
    m.show = wrapped(m.show, "show")


def _reader(m: ModuleType) -> None:
    if os.environ.get("SHARE"):
        m._PLAIN_WORKER_SHARE = (float(os.environ["SHARE"]),) * 2


def _cache(m: ModuleType) -> None:
    m.open_slot = wrapped(m.open_slot, "open_slot")
    m.publish_in_background = wrapped(m.publish_in_background, "publish_in_background")
    m.wait_for_writes = wrapped(m.wait_for_writes, "wait_for_writes")
    m.publish = wrapped(m.publish, "writer publish", last=True)


def _store(m: ModuleType) -> None:
    m.event_tables = wrapped(m.event_tables, "event_tables")
    m._write_cpu = wrapped(m._write_cpu, "write cpu")
    m._write = wrapped(m._write, "write table")


PATCHES: dict[str, Callable[[ModuleType], None]] = {
    "numpy": lambda m: mark("numpy imported"),
    "typer": lambda m: mark("typer imported"),
    "traceview.read.reader": _reader,
    "traceview.columns.parallel": _parallel,
    "traceview.columns.collect": _collect,
    "traceview.app.commands": _commands,
    "traceview.analyses.kernels": lambda m: setattr(
        m, "analyse_kernels", wrapped(m.analyse_kernels, "analyse")
    ),
    "traceview.forked": lambda m: setattr(
        m.Aside, "result", wrapped(m.Aside.result, "answer aside")
    ),
    "traceview.analyses.gaps": lambda m: setattr(
        m, "analyse_gaps", wrapped(m.analyse_gaps, "analyse")
    ),
    "traceview.cache": _cache,
    "traceview.cache.store": _store,
    "pyarrow": lambda m: mark("pyarrow imported"),
    "pyarrow.parquet": lambda m: mark("pyarrow.parquet imported"),
    "diskcache": lambda m: mark("diskcache imported"),
}


class _Patcher(importlib.abc.MetaPathFinder):
    """Applies PATCHES to a module once it is executed."""

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if name not in PATCHES:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            execute(module)
            PATCHES[name](module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def main() -> None:
    mark("interpreter up")
    atexit.register(dump)
    sys.meta_path.insert(0, _Patcher())
    from traceview import cli

    sys.argv = ["traceview", *sys.argv[1:]]
    cli.main()


if __name__ == "__main__":
    main()

"""Where a command's memory goes: RSS per phase (read, analyse, render) of one traceview
command, in one process, and the sizes of what the read keeps.

    python benchmarks/mem_phases.py TRACE [--command kernels|gaps|steps|snapshot] [--parallel]

RSS is sampled every 5 ms from /proc/self/statm by a thread; for each phase the peak during
it and the RSS at its end are printed, in MB. Reading is serial (one process) and without the
cache, so the figures are this process's alone. Sizes: numpy columns and packed names by
``nbytes``, Python strings and lists by ``sys.getsizeof`` (their objects, not the allocator's
slack). The sampling thread itself costs memory: after reading the 1 GB 10^6-name trace in
two processes, 395-403 MB here against 317-334 MB in a process without it (likely glibc
giving the main thread a second malloc arena); compare phases, not against the CLI's peak.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import numpy as np

_PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1 << 20


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


class Sampler:
    """The highest RSS seen since the last ``reset``."""

    def __init__(self) -> None:
        self.peak = rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, rss())

    def reset(self) -> None:
        self.peak = rss()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def phase(sampler: Sampler, name: str) -> Iterator[None]:
    sampler.reset()
    t0 = time.perf_counter()
    yield
    now = rss()
    peak = max(sampler.peak, now)
    print(f"{name:<10} {time.perf_counter() - t0:7.2f} s  peak {peak / MB:7.0f} MB  "
          f"end {now / MB:7.0f} MB", flush=True)  # fmt: skip


def sizes(value: Any, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(field, bytes) of the numpy columns and Python lists of a TraceEvents, recursively."""
    if isinstance(value, np.ndarray):
        yield prefix, value.nbytes
    elif is_dataclass(value) and not isinstance(value, type):
        for f in fields(value):
            yield from sizes(getattr(value, f.name), f"{prefix}.{f.name}".lstrip("."))
    elif hasattr(value, "nbytes") and hasattr(value, "ends"):  # PackedNames
        yield prefix, value.nbytes
    elif isinstance(value, list) and value:
        total = sys.getsizeof(value) + sum(sys.getsizeof(v) for v in value)
        yield prefix, total


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("trace", type=Path)
    p.add_argument("--command", choices=["kernels", "gaps", "steps", "snapshot"], default="kernels")
    p.add_argument(
        "--parallel",
        action="store_true",
        help="read in two processes as the CLI does (the figures are then this process's, "
        "the worker's not included)",
    )
    args = p.parse_args()
    if not args.parallel:
        os.environ["TRACEVIEW_PARALLEL_MIN_BYTES"] = str(1 << 62)  # one process: its RSS is all
    from traceview.columns.parallel import collect_events
    from traceview.read.reader import TraceReader

    sampler = Sampler()
    print(f"start      RSS {rss() / MB:.0f} MB ({args.command}, {args.trace})")
    analyse, render = _command(args.command)
    with phase(sampler, "read"):
        events = collect_events(TraceReader(args.trace), keep_cpu=args.command == "gaps")
    with phase(sampler, "analyse"):
        result = analyse(events)
    with phase(sampler, "render"):
        text = render(result)
    sampler.stop()
    print(f"output     {len(text) / MB:.1f} MB of text")
    for name, size in sorted(sizes(events), key=lambda s: -s[1])[:12]:
        print(f"  {name:<24} {size / MB:8.1f} MB")
    return 0


def _command(command: str) -> tuple[Callable[[Any], Any], Callable[[Any], str]]:
    """The analysis and the (piped text) rendering of a command, as run.py does them."""
    from traceview.render.document import to_plain

    if command == "kernels":
        from traceview.analyses.kernels import KernelOptions, analyse_kernels
        from traceview.render import kernels as render_kernels

        return (lambda e: analyse_kernels(e, KernelOptions())), (
            lambda r: to_plain(render_kernels.document(r, False))
        )
    if command == "gaps":
        from traceview.analyses.gaps import GapOptions, analyse_gaps
        from traceview.render import gaps as render_gaps

        return (lambda e: analyse_gaps(e, GapOptions())), (
            lambda r: to_plain(render_gaps.document(r, False))
        )
    if command == "steps":
        from traceview.analyses.core.steps import step_table
        from traceview.analyses.core.trace import summarize
        from traceview.render import steps as render_steps

        return (lambda e: (summarize(e), step_table(e))), (
            lambda r: to_plain(render_steps.document(*r, 100))
        )
    from traceview.analyses.snapshot import build_snapshot
    from traceview.app.snapshot_file import to_json

    return build_snapshot, to_json


if __name__ == "__main__":
    sys.stdout = io.TextIOWrapper(sys.stdout.buffer, line_buffering=True)
    raise SystemExit(main())

"""The local engine: a process pool over the rank files (``-j N``, default all cores).

The main process receives only the small per-rank summaries, never a rank's columns.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING

from traceview.analyses.runs.collectives import latest_starts
from traceview.analyses.runs.rank_summary import RankSummary
from traceview.app.engines.worker import (
    RankFailure,
    RankTask,
    RunResult,
    evict_later,
    ingest,
    keep_cache_within_limit,
    rolled_up,
    usable,
    waits,
)
from traceview.errors import TraceviewError

if TYPE_CHECKING:
    from traceview.options import RunOptions


def default_jobs() -> int:
    """All cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def summaries(tasks: Sequence[RankTask], jobs: int) -> Iterator[RankSummary | RankFailure]:
    """Each task's summary (or failure), in task order, ``jobs`` files at a time."""
    workers = max(1, min(jobs, len(tasks)))
    context = multiprocessing.get_context("fork")  # no re-import of traceview per worker
    with ProcessPoolExecutor(workers, context, initializer=evict_later) as pool:
        futures = [pool.submit(ingest, task) for task in tasks]
        for i, future in enumerate(futures):
            try:
                yield future.result()
            except BrokenProcessPool:
                raise TraceviewError(_died(tasks[i : i + workers])) from None


def _died(tasks: Sequence[RankTask]) -> str:
    """The error of a worker that died (killed, out of memory): the rank whose result was
    awaited, and the others being read beside it (one of them may be the one)."""
    first, others = tasks[0], [t.rank for t in tasks[1:]]
    beside = f" (or rank {', '.join(map(str, others))}, read beside it)" if others else ""
    return (
        f"rank {first.rank} ({first.path}): the process reading it died{beside}: killed, "
        "or out of memory? (-j 1 reads one rank at a time)"
    )


def run(tasks: Sequence[RankTask], options: RunOptions, partial: bool) -> RunResult:
    """Summaries in the pool; the merge and the pass-2 waits here, on summaries only."""
    jobs = options.jobs if options.jobs is not None else default_jobs()
    results = list(summaries(tasks, jobs))
    keep_cache_within_limit(tasks[0].read if tasks else None)
    found = usable(results, partial)
    rollup = rolled_up(found)
    table = latest_starts(rollup.collectives, rollup.ranks)
    return RunResult(found, rollup, [waits(s, table) for s in found])

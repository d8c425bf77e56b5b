"""The task both engines run per rank: read its file (per-file reader and cache, one
process) and return its summary, or the one-line reason it could not be read."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from traceview.analyses.kernels import KernelOptions
from traceview.analyses.runs.collectives import Waits, rank_waits
from traceview.analyses.runs.rank_summary import RankSummary
from traceview.analyses.runs.rollup import Rollup, merge, of_rank, tree_merge
from traceview.errors import TraceviewError
from traceview.options import ReadOptions
from traceview.render.escape import print_line
from traceview.render.output import stderr_console

# A worker reads its file in one process: the pool already uses every core (and a Dask
# worker may not be allowed to start processes at all).
_SINGLE_PROCESS = str(1 << 62)


@dataclass(frozen=True)
class RankTask:
    """What to read and summarise for one rank."""

    rank: int
    path: Path
    read: ReadOptions
    kernels: KernelOptions
    report: bool = False  # keep the per-file kernels table (--per-rank)
    snapshot: bool = False  # keep the one-file snapshot (snapshot and diff of a run)


@dataclass(frozen=True)
class RankFailure:
    """A rank whose file could not be read: the error's line."""

    rank: int
    path: Path
    message: str


def ingest(task: RankTask) -> RankSummary | RankFailure:
    """Read one rank's file and summarise it (runs in a worker process): the summary stored
    in the file's cache entry when it has one, else worked out and stored there."""
    from traceview.analyses.core.trace import read_warnings
    from traceview.analyses.runs.rank_summary import needs_cpu_rows, summarize_rank
    from traceview.app import rank_cache
    from traceview.app.reading import read_trace

    os.environ["TRACEVIEW_PARALLEL_MIN_BYTES"] = _SINGLE_PROCESS
    try:
        where = rank_cache.place(task.path, task.read)
        tables = task.report or task.snapshot  # the per-file tables need the events
        found = (
            None
            if where is None or tables
            else rank_cache.load(where, task.rank, task.read, task.kernels)
        )
        if found is not None:
            return found
        events = read_trace(task.path, task.read, remember=False, warn=False)
        problems = rank_cache.rank_problems(
            task.rank, task.path, read_warnings(events), task.read.strict
        )
        if needs_cpu_rows(events):  # rare: metadata only on CPU ops (from the cache: cheap)
            _wait_for_cache_writes()  # the entry, so this read hits it if the first wrote it
            events = read_trace(task.path, task.read, keep_cpu=True, remember=False, warn=False)
        summary = summarize_rank(events, task.rank, task.kernels, task.report, task.snapshot)
        if where is not None:
            _wait_for_cache_writes()  # the entry, written in the background
            rank_cache.save(where, task.read, task.kernels, summary)
        return replace(summary, warnings=problems)
    except TraceviewError as e:
        return RankFailure(task.rank, task.path, e.message)
    finally:
        _wait_for_cache_writes()


def evict_later() -> None:
    """In a worker: entries are written without the cache's size limit check (a listing and
    a stat of every entry after each write made a cold run quadratic in ranks); the engine
    checks once, after the run (keep_cache_within_limit)."""
    from traceview import cache

    cache.evict_later()


def ingest_evicting_later(task: RankTask) -> RankSummary | RankFailure:
    """``ingest`` in a worker whose entries wait for keep_cache_within_limit (Dask's task:
    its workers have no initializer of ours)."""
    evict_later()
    return ingest(task)


def keep_cache_within_limit(read: ReadOptions | None) -> None:
    """The size limit check the workers left: once, after the run (none without a cache)."""
    if read is not None and read.cache:
        from traceview import cache

        cache.keep_within_limit(cache.CacheSettings(True, directory=read.cache_dir))


@dataclass(frozen=True)
class RunResult:
    """Every rank's summary and waits (rank order) and the merged roll-up."""

    summaries: list[RankSummary]
    rollup: Rollup
    waits: list[Waits]


def usable(results: Sequence[RankSummary | RankFailure], partial: bool) -> list[RankSummary]:
    """The summaries; a failed rank is an error (one line), or with ``--partial`` a warning."""
    failures = [r for r in results if isinstance(r, RankFailure)]
    if failures and not partial:
        first = failures[0]
        more = f" (and {len(failures) - 1} more ranks)" if len(failures) > 1 else ""
        raise TraceviewError(f"rank {first.rank}: {first.message}{more}; --partial skips it")
    for failure in failures:
        print_line(
            stderr_console(),
            f"traceview: warning: --partial: skipped rank {failure.rank}: {failure.message}",
        )
    summaries = [r for r in results if not isinstance(r, RankFailure)]
    if not summaries:
        raise TraceviewError(f"none of the {len(results)} rank files could be read")
    return summaries


def rolled_up(summaries: Sequence[RankSummary]) -> Rollup:
    """The run's roll-up: the ranks merged pairwise in rank order (both engines' shape)."""
    return tree_merge([of_rank(s) for s in summaries], merge)


def waits(summary: RankSummary, table: dict) -> Waits:  # type: ignore[type-arg]
    """Pass 2 of the stragglers for one rank (runs where its summary is)."""
    return rank_waits(summary.rank, summary.comm, table)


def _wait_for_cache_writes() -> None:
    import sys

    cache = sys.modules.get("traceview.cache")
    if cache is not None:
        cache.wait_for_writes()

"""The Dask engine (``--engine dask``, the optional extra ``traceview[dask]``).

Map: a worker reads one rank file (its cache on the worker's disk) and keeps the summary.
Reduce: the one roll-up merge, as a tree of tasks in rank order (the local engine's shape,
so both give identical numbers). Stragglers in two passes without moving columns: the
pass-1 table (per collective: latest start and its rank) comes back from the reduce, then
every rank's waits are computed where its summary is. ``--scheduler ADDR`` or
``--scheduler-file F`` attaches to a running cluster, else a LocalCluster is started.
``distributed`` is imported only here: importing it takes about 0.5 s.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from traceview.analyses.runs.collectives import latest_starts
from traceview.analyses.runs.rollup import merge, of_rank
from traceview.app.engines.local import default_jobs
from traceview.app.engines.worker import (
    RankFailure,
    RankTask,
    RunResult,
    ingest_evicting_later,
    keep_cache_within_limit,
    usable,
    waits,
)
from traceview.errors import TraceviewError
from traceview.render.escape import visible
from traceview.side_files import read_side_file

# A scheduler file not there yet may be one a scheduler starting now writes: waited for
# this long, said so on stderr.
SCHEDULER_FILE_WAIT_S = 30.0

if TYPE_CHECKING:
    from distributed import Client

    from traceview.options import RunOptions


def run(tasks: Sequence[RankTask], options: RunOptions, partial: bool) -> RunResult:
    """Every rank summarised on the cluster, merged there; waits computed there too."""
    with _client(options, len(tasks)) as client:
        ingested = client.map(ingest_evicting_later, tasks, pure=False)
        outcomes = client.gather(client.map(_failure_or_none, ingested))
        usable([o or _OK for o in outcomes], partial)  # the error, or the warnings
        kept = [f for f, o in zip(ingested, outcomes, strict=True) if o is None]
        rollup = _tree_reduce(client, client.map(of_rank, kept))
        # In a list: a dict is scattered as {key: data}, and an empty one (a run without
        # shared collectives) cannot be.
        [table] = client.scatter([latest_starts(rollup.collectives, rollup.ranks)], broadcast=True)
        rank_waits = client.gather(client.map(waits, kept, table=table))
        summaries = client.gather(kept)
        _keep_caches_within_limit(client, tasks)
    return RunResult(summaries, rollup, rank_waits)


def _keep_caches_within_limit(client: Client, tasks: Sequence[RankTask]) -> None:
    """The size limit check the workers left, once per machine (each has its own cache)."""
    if not tasks or not tasks[0].read.cache:
        return
    from distributed.comm.addressing import get_address_host

    by_host: dict[str, str] = {}
    for address in client.ncores():
        by_host.setdefault(get_address_host(address), address)
    client.run(keep_cache_within_limit, tasks[0].read, workers=list(by_host.values()))


def _failure_or_none(result: Any) -> RankFailure | None:
    return result if isinstance(result, RankFailure) else None


class _Ok:
    """Stands for a summary that stays on its worker while failures are checked."""


_OK: Any = _Ok()


def _tree_reduce(client: Client, futures: list[Any]) -> Any:
    """``tree_merge``'s pairwise shape, as tasks on the cluster; the result fetched."""
    level = list(futures)
    while len(level) > 1:
        pairs = [client.submit(merge, level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        level = pairs + ([level[-1]] if len(level) % 2 else [])
    return level[0].result()


@contextmanager
def _client(options: RunOptions, files: int) -> Iterator[Client]:
    """A client of the named cluster, or of a LocalCluster started (and stopped) here."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise TraceviewError(
            "--engine dask needs dask.distributed: pip install 'traceview[dask]'"
        ) from None
    if options.scheduler_file is not None or options.scheduler is not None:
        with _attached(options) as client:
            yield client
        return
    workers = max(1, min(options.jobs or default_jobs(), files))
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            # The scheduler's HTTP server listens even without a dashboard, on 8787 unless
            # told: a port the system picks, so that two clusters at once neither clash nor warn.
            dashboard_address=":0",
            silence_logs=logging.ERROR,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def _attached(options: RunOptions) -> Client:
    """A client of a running cluster; one clear line when it cannot be reached."""
    from distributed import Client

    address = options.scheduler
    where = address
    if options.scheduler_file is not None:
        address = scheduler_address(options.scheduler_file)
        where = f"{address} (from --scheduler-file {options.scheduler_file})"
    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as e:
        raise TraceviewError(f"cannot reach the Dask scheduler at {where}: {e}") from None


def scheduler_address(path: Path) -> str:
    """The ``address`` in a Dask scheduler file: a file not there yet is waited for (said
    so, up to SCHEDULER_FILE_WAIT_S); one that is not a scheduler file is one line."""
    where = f"--scheduler-file {path}"
    if not path.exists():
        sys.stderr.write(
            f"traceview: waiting up to {SCHEDULER_FILE_WAIT_S:g} s for the scheduler file "
            f"{visible(str(path))} (a scheduler starting writes it)\n"
        )
        sys.stderr.flush()
        deadline = time.monotonic() + SCHEDULER_FILE_WAIT_S
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if not path.exists():
            raise TraceviewError(
                f"{where}: no such file after {SCHEDULER_FILE_WAIT_S:g} s (is the scheduler "
                "started with --scheduler-file naming it?)"
            )
    data = read_side_file(path, "scheduler file", where)
    try:
        doc = json.loads(data)
    except ValueError as e:  # JSON or UTF-8
        raise TraceviewError(f"{where}: not a Dask scheduler file (not JSON: {e})") from None
    address = doc.get("address") if isinstance(doc, dict) else None
    if not isinstance(address, str) or not address:
        raise TraceviewError(f'{where}: not a Dask scheduler file (no "address" in it)')
    return address

"""A rank's summary kept in its trace's cache entry, so a warm run reads and merges.

The summary's numbers (traceview.cache.rank_summaries) are stored in the entry once
they are worked out, under a key of the kernel options, the step regex and the code; a later
run with the same key takes them from there instead of reading the entry's columns and
summarising again. What reading met is still said (or refused with ``--strict``) on each
run, from the entry's metadata, as a read of the entry says it.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from traceview.analyses.runs.rank_summary import RankSummary
from traceview.errors import TraceviewError
from traceview.options import ReadOptions

if TYPE_CHECKING:
    from traceview.analyses.kernels import KernelOptions
    from traceview.cache.derived import Place


def place(path: Path, read: ReadOptions) -> Place | None:
    """Where the trace's entry is, found before the trace is read; None without a cache."""
    from traceview.cache.derived import place_for

    return place_for(path, read)


def load(where: Place, rank: int, read: ReadOptions, kernels: KernelOptions) -> RankSummary | None:
    """The stored summary of the rank; None when there is none to use (or ``--refresh``)."""
    from traceview.analyses.core.trace import read_problems
    from traceview.cache import derived
    from traceview.cache.rank_summaries import from_arrays, summary_key
    from traceview.cache.store import read_figures

    meta = None if read.refresh else derived.entry_meta(where)
    if meta is None:
        return None
    arrays = derived.load(where, summary_key(kernels, read.step_regex))
    if arrays is None:
        return None
    try:
        summary = from_arrays(arrays, rank, str(where.trace))
    except (KeyError, ValueError, TypeError):
        return None  # not what this code writes: worked out again, stored anew
    problems = rank_problems(rank, where.trace, read_problems(*read_figures(meta)), read.strict)
    derived.used(where)
    return replace(summary, warnings=problems)


def save(where: Place, read: ReadOptions, kernels: KernelOptions, summary: RankSummary) -> None:
    """Keep the numbers of a summary worked out from the trace in its entry (written by
    then; nothing is stored without one)."""
    from traceview.cache import derived
    from traceview.cache.rank_summaries import summary_key, to_arrays

    derived.save(where, summary_key(kernels, read.step_regex), to_arrays(summary))


def rank_problems(rank: int, path: Path, problems: list[str], strict: bool) -> tuple[str, ...]:
    """What reading a rank met (a truncation with --partial, skipped events), each warning
    naming the rank and its file, cold or warm: a run's ranks warn alike. They travel with
    the rank's summary to the process that asked (whatever the engine: a Dask worker's
    stderr is its log), which says them; with ``--strict``, an error here."""
    if strict and problems:
        raise TraceviewError(f"{path}: --strict: {'; '.join(problems)}")
    return tuple(f"rank {rank} ({path}): {p}" for p in problems)

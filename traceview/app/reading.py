"""Reading a trace for a command: from its cache entry when it has one, else from the file
(filling the cache), with what reading met said on stderr or refused with --strict."""

from __future__ import annotations

import gc
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from traceview.analyses.core.trace import read_warnings
from traceview.app.last_trace import remember_trace
from traceview.app.memory import release_free_memory
from traceview.columns.schema import FLOWS
from traceview.errors import TraceviewError
from traceview.forked import start_up_done
from traceview.options import ReadOptions
from traceview.render.output import stderr_console

if TYPE_CHECKING:
    from traceview.columns.model import TraceEvents
    from traceview.read.blockhash import BlockHashes


def read_trace(
    path: Path,
    options: ReadOptions,
    keep_cpu: bool = False,
    remember: bool = True,
    warn: bool = True,
    phases: bool = False,
    steps: bool = True,
    memory: bool = False,
    frames: bool = False,
    index: bool = False,
    unused: frozenset[str] = frozenset(),
    frames_from_ns: int = 0,
) -> TraceEvents:
    """Read a trace (from the cache when it holds it); remember it as the last one analysed.
    With ``--step-regex`` the steps are the CPU ranges whose name matches it; without it and
    without ProfilerSteps, a serving framework's step markers. ``warn``: say what reading met
    (False: a second read of a trace whose first said it). ``phases``: work out every step's
    phase (with the CPU rows). ``steps``: whether the command uses the steps; when it does not,
    a read without CPU rows is not followed by a second one to find the markers. ``memory``:
    the command reads the ``[memory]`` events (it alone says those it skipped). ``frames``:
    with the python frames and fwdbwd flows (and the CPU rows). ``index``: a read of the trace
    itself notes its chunks in ``read.index`` (trim; none from the cache). ``unused``: the
    columns the command never reads (schema.DROPPABLE), left out of a read that fills no
    cache entry (an entry holds every column) and of a cache hit; ``frames_from_ns``: of the
    python frames, only those at least this long are kept by such reads (``summary``)."""
    start_up_done()  # the command line's start-up ends here
    regex = None
    keep_cpu = keep_cpu or phases or frames
    if options.step_regex is not None:
        from traceview.analyses.core.steps import compile_step_regex

        regex = compile_step_regex(options.step_regex)  # a usage error before any reading
        keep_cpu = True
    pipe = _is_pipe(path, options)
    events = (
        _read_cached(path, options, keep_cpu, frames, index, unused, frames_from_ns)
        if options.cache and not pipe
        else None
    )
    if events is None:
        events = _ingest(
            path,
            options,
            keep_cpu,
            frames,
            index=index,
            unused=unused,
            frames_from_ns=frames_from_ns,
        )
    if regex is not None:
        from traceview.analyses.core.steps import steps_matching

        events = replace(events, steps=steps_matching(events, regex))
    elif not events.steps and (steps or keep_cpu):
        events = _with_marker_steps(path, options, events, pipe or keep_cpu)
    if phases:
        from traceview.analyses.core.step_markers import step_phases

        events = step_phases(events)
    if warn:
        report_problems(path, read_warnings(events, memory), options.strict)
    # Not a pipe, nor a run's rank files (a write each costs 3 ms), nor without the cache.
    if remember and not pipe and options.cache:
        remember_trace(path, options.cache_dir)
    return events


def _with_marker_steps(
    path: Path, options: ReadOptions, events: TraceEvents, has_cpu: bool
) -> TraceEvents:
    """``events`` with the steps of a serving framework's markers, when its CPU ranges hold
    some; a read without CPU rows (``has_cpu`` False) reads them (from the cache entry, which
    has them); a pipe, which cannot be read twice, has them only when the command kept them."""
    from traceview.analyses.core.step_markers import marker_steps

    with_cpu = events
    if not has_cpu:
        if not events.gpu.ts.size:
            return events
        wait_for_cache_writes()  # the entry the first read is storing: read it back
        again = replace(options, refresh=False)  # a --refresh entry is fresh now
        cached = _read_cached(path, again, True) if options.cache else None
        with_cpu = cached if cached is not None else _ingest(path, options, True)
    found = marker_steps(with_cpu)
    return replace(events, steps=found) if found else events


def report_problems(path: Path, problems: list[str], strict: bool) -> None:
    """What reading met, as warnings on stderr; with ``--strict``, an error."""
    if strict and problems:
        raise TraceviewError(f"{path}: --strict: {'; '.join(problems)}")
    if problems:
        from traceview.render.escape import rich_text

        console = stderr_console()
        for problem in problems:
            console.print(rich_text(f"traceview: warning: {problem}"), soft_wrap=True)


def _read_cached(
    path: Path,
    options: ReadOptions,
    keep_cpu: bool,
    frames: bool = False,
    index: bool = False,
    unused: frozenset[str] = frozenset(),
    frames_from_ns: int = 0,
) -> TraceEvents | None:
    """The events from the cache, or a fresh read stored in it; None when it cannot be used.
    The frames are read (and stored) only by a command that asks for them; ``unused``,
    ``frames_from_ns``: the columns a hit leaves unread, the frames shorter than that it
    leaves out (a fresh read keeps every column and frame, for the entry)."""
    from traceview import cache
    from traceview.analyses.core.trace import with_facts
    from traceview.app.memory import entry_columns_mapped
    from traceview.columns.model import without_columns
    from traceview.forked import cache_writes_forked

    settings = cache.CacheSettings(True, options.refresh, options.cache_dir, options.verify)
    with entry_columns_mapped():
        slot = cache.open_slot(path, settings, keep_cpu, frames, unused, frames_from_ns)
    if slot is None:
        return None
    if slot.events is not None:
        _stop_early_read()  # the command line's guess (traceview.cli): the trace is not read
        return slot.events
    # Read as the command needs it (without CPU rows, a filling run costs about what a
    # --no-cache one does), facts worked out; a command that needs more than an entry holds
    # reads the trace again and completes the entry. Every column is kept for the entry, but
    # a read of the long frames alone (summary's) keeps no other frame nor any flow: its
    # entry says so, and serves no read that wants them (cache.open_slot).
    # A key not known yet: the read hashes the blocks it reads (publish makes the key of them).
    floored = frames_from_ns > 0 and FLOWS.issubset(unused)
    read = _ingest(
        path,
        options,
        keep_cpu=keep_cpu,
        frames=frames,
        hashes=slot.hashes,
        index=index,
        unused=FLOWS if floored else frozenset(),
        frames_from_ns=frames_from_ns if floored else 0,
        shared=cache_writes_forked(),  # the writer maps a column only while it writes it
    )
    events = with_facts(read)
    # A truncated read (--partial) is not stored: a later run without --partial would get it
    # from the cache instead of the truncation error, and the file is most likely still being
    # written, so its entry would never be used again.
    if events.read.truncated_at is None:
        cache.publish_in_background(slot, events, with_cpu=keep_cpu)
    # The entry has them (its writer a forked copy, or a thread that holds its own
    # reference): here the columns this command never reads go, as a --no-cache read leaves
    # them out (summary at 7.83 GB: the launch ids, 10 MB of its peak).
    return without_columns(events, unused)


def _stop_early_read() -> None:
    """Stop the worker the command line forked early for a read that does not happen."""
    parallel = sys.modules.get("traceview.columns.parallel")
    if parallel is not None:
        parallel.stop_early()


# Below this many events the read leaves too little to free (peak RSS of gaps and summary on a
# 210k-event trace: the same with and without the collection).
_COLLECT_FROM_EVENTS = 500_000


def _ingest(
    path: Path,
    options: ReadOptions,
    keep_cpu: bool,
    frames: bool = False,
    hashes: BlockHashes | None = None,
    index: bool = False,
    unused: frozenset[str] = frozenset(),
    frames_from_ns: int = 0,
    shared: bool = False,
) -> TraceEvents:
    """Read the trace itself, with a progress bar on a terminal (``frames``: with the python
    frames and flows; an Nsight Systems export has none; ``hashes``: the blocks read are
    hashed into it; ``unused``, ``frames_from_ns``: what is left out, see read_trace;
    ``shared``: the columns in shared mappings, for a forked cache writer)."""
    from traceview.columns.parallel import collect_events
    from traceview.read.nsys import is_sqlite
    from traceview.read.reader import TraceReader
    from traceview.render.output import ByteProgress

    wait_for_cache_writes()  # no thread may be writing when the reader forks
    if is_sqlite(path):  # an Nsight Systems export, recognised by its content
        from traceview.columns.nsys import collect_nsys

        with ByteProgress(path.stat().st_size, enabled=not options.quiet) as progress:
            return _sums_checked(collect_nsys(path, keep_cpu, lambda done: progress(done, None)))
    reader = TraceReader(path, partial=options.partial, keep_text=index, index=index)
    reader.hashes = hashes
    # gzip: estimated later; a pipe: bytes read without a total
    size = None if reader.info.compressed or reader.info.stream else reader.info.size_bytes
    with ByteProgress(size, enabled=not options.quiet) as progress:
        reader.on_progress = progress
        events = collect_events(reader, keep_cpu, frames, unused, frames_from_ns, shared)
    # A full collection empties the interpreter's free lists, which the read filled (on the
    # 1 GB trace with 10^6 names, 18 MB), and the batches' heap pages go back to the system,
    # before the analyses' peaks. It takes ~10 ms, for nothing on a small trace.
    if events.read.events >= _COLLECT_FROM_EVENTS:
        gc.collect()
        release_free_memory()
    return _sums_checked(events)


def _sums_checked(events: TraceEvents) -> TraceEvents:
    """``events``, refused (one line) when their GPU durations add up beyond int64 ns: the
    analyses sum ns in int64, and a wrapped sum would be a negative total, never an error."""
    from traceview.aggregate import sums

    if not sums.fits(events.gpu.dur):
        raise TraceviewError(
            f"{events.path}: its GPU durations add up to more than int64 ns hold (292 years); "
            "not a trace traceview can sum exactly"
        )
    return events


def _is_pipe(path: Path, options: ReadOptions) -> bool:
    """Whether the trace comes from a pipe (read.stream), said on stderr with what it means."""
    from traceview.read.stream import is_pipe, pipe_note

    if not is_pipe(path):
        return False
    if not options.quiet:
        stderr_console().print(pipe_note(path, options.verify, options.refresh), markup=False)
    return True


def wait_for_cache_writes() -> None:
    """Wait for the cache entries this process started writing (none if the cache is not
    loaded)."""
    cache = sys.modules.get("traceview.cache")  # nothing to wait for if it is not loaded
    if cache is not None:
        cache.wait_for_writes()

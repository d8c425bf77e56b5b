"""The Parquet cache of ingested traces, keyed by a hash of the trace bytes.

``open_slot`` finds the entry of a trace (a hit gives its TraceEvents), ``publish`` stores a
fresh read. A cache problem is never fatal: it prints a warning and the trace is read as usual.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import shutil
import stat
import sys
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from traceview.cache.root import state_dir
from traceview.columns.model import TraceEvents
from traceview.columns.schema import FLOWS
from traceview.console import stderr_console
from traceview.errors import TraceviewError
from traceview.forked import Child, cache_writes_forked
from traceview.read.blockhash import BlockHashes

ENTRIES = "entries"
TMP = "tmp"


@dataclass(frozen=True)
class CacheSettings:
    """Whether and where to cache; ``refresh`` re-ingests and replaces the entry; ``verify``
    re-hashes the trace instead of trusting the (path, size, mtime, inode) index."""

    enabled: bool = True
    refresh: bool = False
    directory: Path | None = None
    verify: bool = False

    def root(self) -> Path:
        """The cache directory: ``--cache-dir``, else traceview's state directory."""
        return self.directory if self.directory is not None else state_dir()


@dataclass(frozen=True)
class Slot:
    """Where a trace's entry lives; ``events`` is set on a hit. ``hashes``: the key is not
    known yet (``key`` is empty): the read hashes the blocks it reads into it, and ``publish``
    makes the key of them (cache.key.trace_key's ``defer``)."""

    root: Path
    key: str
    identity: tuple[str, int, int, int]
    trace: Path
    events: TraceEvents | None
    refresh: bool = False
    hashes: BlockHashes | None = None


def warn(message: str) -> None:
    """A cache warning on stderr."""
    stderr_console().print(f"traceview: warning: {message}", markup=False, soft_wrap=True)


def entry_dir(root: Path, key: str) -> Path:
    """The directory of the entry with this key."""
    return root / ENTRIES / key


def open_slot(
    path: Path,
    settings: CacheSettings,
    keep_cpu: bool,
    frames: bool = False,
    unused: frozenset[str] = frozenset(),
    frames_from_ns: int = 0,
) -> Slot | None:
    """The trace's cache slot (with its events on a hit), or None to read without the cache;
    ``frames``: a hit needs an entry that holds the python frames; ``unused``: the columns a
    hit leaves unread (schema.DROPPABLE); ``frames_from_ns``: of the frames, a hit keeps only
    those at least this long."""
    from traceview.cache.key import identity, trace_key
    from traceview.cache.root import claim

    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None  # a pipe or device: hashing would consume it; the reader reports it
        if not os.access(path, os.R_OK):
            return None  # unreadable: the reader says so (it is not the cache's problem)
    except OSError:
        return None  # missing or unreadable: the reader gives the error
    root = settings.root()
    try:
        claim(root)
    except TraceviewError as e:  # not a traceview cache, or / or $HOME
        warn(f"{e.message}; reading without the cache")
        return None
    except Exception as e:  # unwritable dir: work without the cache
        warn(f"cache {root} unusable ({type(e).__name__}: {e}); reading without the cache")
        return None
    try:
        (root / ENTRIES).mkdir(exist_ok=True)
        ident = identity(path)
        key = trace_key(path, root, settings.refresh, settings.verify, True)
    except TraceviewError:
        raise  # the trace changed while it was hashed
    except OSError as e:
        if e.filename is not None and Path(e.filename) == path:
            return None  # the trace itself cannot be read: the reader says so
        warn(f"cache {root} unusable ({type(e).__name__}: {e}); reading without the cache")
        return None
    except Exception as e:  # unwritable dir, broken index: work without the cache
        warn(f"cache {root} unusable ({type(e).__name__}: {e}); reading without the cache")
        return None
    if key is None:  # no entry can be the trace's: its read makes the key
        return Slot(root, "", ident, path, None, settings.refresh, BlockHashes(ident[1]))
    events = (
        None
        if settings.refresh
        else _load(root, key, path, keep_cpu, frames, unused, frames_from_ns)
    )
    return Slot(root, key, ident, path, events, settings.refresh)


def _load(
    root: Path,
    key: str,
    path: Path,
    keep_cpu: bool,
    frames: bool = False,
    unused: frozenset[str] = frozenset(),
    frames_from_ns: int = 0,
) -> TraceEvents | None:
    """The entry's events, or None on a miss; a damaged entry is removed with a warning."""
    from traceview.cache.entry_child import read_entry_aside
    from traceview.cache.manage import add_path, touch
    from traceview.cache.store import read_meta

    directory = entry_dir(root, key)
    if not directory.is_dir():
        return None
    try:
        meta = read_meta(directory)
        if not _serves(meta, keep_cpu, frames, unused, frames_from_ns):
            return None  # read the trace; publish then upgrades or completes the entry
        events = read_entry_aside(directory, meta, keep_cpu, frames, unused, frames_from_ns)
    except Exception as e:  # damaged, truncated, another schema: rebuild, never crash
        if not directory.exists():
            return None  # removed while we read it (cache prune, clear): a miss
        warn(f"cache entry {key} is damaged or outdated ({e}); rebuilding it")
        remove_tree(directory)
        return None
    touch(directory)
    add_path(directory, path)
    return replace(events, path=str(path))


def _serves(
    meta: dict[str, Any],
    keep_cpu: bool,
    frames: bool = False,
    unused: frozenset[str] = frozenset(),
    frames_from_ns: int = 0,
) -> bool:
    """Whether an entry can give exactly what a read with (or without) CPU rows (and
    frames at least ``frames_from_ns`` long, ``unused`` left out) gives."""
    from traceview.cache.store import entry_frames_from_ns

    if frames and not meta.get("has_frames"):
        return False
    floor = entry_frames_from_ns(meta)  # the entry holds no shorter frame, nor any flow
    if frames and floor and (floor > frames_from_ns or not FLOWS.issubset(unused)):
        return False  # it lacks frames, or the flows, this read keeps
    return bool(meta["has_cpu"]) or not keep_cpu


def publish(
    slot: Slot,
    events: TraceEvents,
    with_cpu: bool = True,
    index: Claim | None = None,
    let_go: bool = False,
) -> None:
    """Store a fresh read (``with_cpu``: one that kept the CPU rows) atomically: write a temp
    dir inside the cache, then rename it. An entry already there stays, unless this is a
    refresh or it lacks the CPU rows or the frames this read has. The trace's key goes into
    the identity index first; with ``index``, last, unless another process took that.
    ``let_go``: a forked writer's, see store.write_entry."""
    from traceview.cache.key import identity, remember_key
    from traceview.cache.manage import evict, max_size
    from traceview.cache.store import entry_frames_from_ns

    try:
        limit = max_size()  # a bad $TRACEVIEW_CACHE_MAX_SIZE: said before anything is written
        slot = _keyed(slot)
        if identity(slot.trace) != slot.identity:
            return  # the trace changed while it was read: its hash is stale
        try:
            if index is None:
                remember_key(slot.trace, slot.root, slot.identity, slot.key)
            target = entry_dir(slot.root, slot.key)
            current = _meta_or_none(target)
            upgrade = current is not None and (
                (with_cpu and not current["has_cpu"])
                or (
                    events.frames_read
                    and (
                        not current.get("has_frames")
                        or entry_frames_from_ns(current) > events.frames_from_ns
                    )
                )
            )
            if current is not None and not (slot.refresh or upgrade):
                return  # published by another process meanwhile, or holding more than this
            _write_entry(slot, events, target, slot.refresh or upgrade, with_cpu, let_go)
        finally:
            if index is not None and index.take():
                remember_key(slot.trace, slot.root, slot.identity, slot.key)
        if _evict_each_write:
            evict(slot.root, limit, keep=slot.key)
    except Exception as e:  # full disk, unwritable dir, unencodable name: no cache this time
        warn(f"could not write the cache entry ({type(e).__name__}: {e})")


def _keyed(slot: Slot) -> Slot:
    """The slot with its key: made of the blocks the read hashed (and the rest) if deferred."""
    if slot.hashes is None:
        return slot
    return replace(slot, key=slot.hashes.key(slot.trace), hashes=None)


class Claim:
    """Which of two processes does a piece of work: the first to ``take`` it (a byte of
    memory shared across a fork). Both may take it if they try at once: only for work that
    may be done twice (writing the same key into the identity index)."""

    def __init__(self) -> None:
        self._taken = mmap.mmap(-1, 1)  # anonymous, shared with the children forked later

    def take(self) -> bool:
        if self._taken[0]:
            return False
        self._taken[0] = 1
        return True


# A run's workers write an entry per rank: checking the size limit after each (a listing
# and a stat of every entry) made a cold run quadratic in ranks. They leave it to the
# process that started them, which checks once when the run is read (keep_within_limit).
_evict_each_write = True


def evict_later() -> None:
    """Publish without the size limit check (a run's worker); see keep_within_limit."""
    global _evict_each_write
    _evict_each_write = False


def keep_within_limit(settings: CacheSettings) -> None:
    """Evict down to the size limit once (after a run whose workers wrote entries); a
    problem is a warning. Only in a directory that is a traceview cache."""
    from traceview.cache.manage import evict, max_size
    from traceview.cache.root import has_marker

    root = settings.root()
    if not has_marker(root):
        return
    try:
        evict(root, max_size())
    except Exception as e:
        warn(f"could not keep the cache within its size limit ({type(e).__name__}: {e})")


class _ForkedWrite:
    """A forked writer (publish). The identity index is written by this process if it waits
    for the writer still at work, else by the writer once its entry is written. The writer's
    pyarrow import and tables take longer than kernels' or gaps' analysis: its index write
    (with diskcache's import, ~10 ms) is done meanwhile here, where the core is idle."""

    def __init__(self, slot: Slot, events: TraceEvents, with_cpu: bool) -> None:
        self.slot = slot
        self.index = Claim()
        work = (slot, events, with_cpu, self.index)
        self.child = Child(_publish_and_flush, work, says_done=True)

    def join(self) -> None:
        if not self.child.done() and self.index.take():
            _remember(self.slot)
        self.child.join()


def _remember(slot: Slot) -> None:
    """Write the trace's key into the identity index (publish's first step, or last)."""
    from traceview.cache.key import remember_key

    try:
        slot = _keyed(slot)
        remember_key(slot.trace, slot.root, slot.identity, slot.key)
    except Exception as e:  # e.g. the trace gone: the entry is found by its hash later
        warn(f"could not remember the trace's key ({type(e).__name__}: {e})")


_writing: list[threading.Thread | _ForkedWrite] = []


def publish_in_background(slot: Slot, events: TraceEvents, with_cpu: bool = True) -> None:
    """``publish`` while the analysis runs; ``wait_for_writes`` waits for it. In a forked
    process where the command line asked for it (forked.fork_cache_writes) and this one runs no
    other thread (a fork copies no thread, nor the locks they hold): its imports (pyarrow,
    diskcache) and its Python work run on a core of their own, not the analysis' (in a thread
    they hold the GIL: a kernels fill of the 0.5 GB trace, ~0.1 s of 0.7 s). Else a thread
    (pyarrow and numpy release the GIL while they write)."""
    if cache_writes_forked() and single_threaded():
        with contextlib.suppress(OSError):  # e.g. no process left: a thread then
            _writing.append(_ForkedWrite(slot, events, with_cpu))
            return
    thread = threading.Thread(target=publish, args=(slot, events, with_cpu), name="traceview-cache")
    thread.start()
    _writing.append(thread)


def _publish_and_flush(slot: Slot, events: TraceEvents, with_cpu: bool, index: Claim) -> None:
    """``publish`` in a forked process, which ends without flushing what it printed, and
    needs no column once written."""
    try:
        publish(slot, events, with_cpu, index, let_go=True)
    finally:
        sys.stderr.flush()


def single_threaded() -> bool:
    """Whether this process runs one thread (the compiled core's count too)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def writing_on_a_thread() -> bool:
    """Whether a thread of this process is writing a cache entry (a fork now would copy the
    locks it holds, e.g. of a module it imports, and no thread to release them)."""
    return any(isinstance(w, threading.Thread) and w.is_alive() for w in _writing)


def wait_for_writes() -> None:
    """Wait for the entries being written (before a reader forks, and as a command ends)."""
    while _writing:
        _writing.pop().join()


def _before_fork() -> None:
    """No fork while a thread writes an entry: the child would copy the state of the SQLite
    identity index that thread has open, a write transaction included, which the child's
    own connections then take for a lock held for ever (a run's reader, forked then, waited
    minutes on the index). A forked writer is not waited for: it copied no such state here."""
    for writer in _writing:
        if isinstance(writer, threading.Thread) and writer is not threading.current_thread():
            writer.join()


if hasattr(os, "register_at_fork"):  # every fork: the engines' pools, Aside, a split read
    os.register_at_fork(before=_before_fork)


def _meta_or_none(directory: Path) -> dict[str, Any] | None:
    from traceview.cache.store import read_meta

    if not directory.is_dir():
        return None
    try:
        return read_meta(directory)
    except Exception:
        return None  # damaged: the next read removes it


def _write_entry(
    slot: Slot, events: TraceEvents, target: Path, replace: bool, with_cpu: bool, let_go: bool
) -> None:
    """Write the entry into a temp dir in the cache, then rename it into place."""
    from traceview.cache.manage import write_paths
    from traceview.cache.root import new_tmp_name
    from traceview.cache.store import write_entry

    tmp = slot.root / TMP / new_tmp_name(slot.key)
    tmp.mkdir(parents=True)
    try:
        write_entry(tmp, events, keep_cpu=with_cpu, let_go=let_go)
        write_paths(tmp, [str(slot.trace.resolve())])
        _rename_into_place(tmp, target, replace)
    finally:
        remove_tree(tmp)


def _rename_into_place(tmp: Path, target: Path, replace: bool) -> None:
    """Publish ``tmp`` as ``target``; an existing entry stays unless ``replace``."""
    from traceview.cache.root import new_tmp_name

    try:
        os.rename(tmp, target)
        return
    except OSError:
        if not target.is_dir():
            raise
    if not replace:
        return  # another process published the same content first: keep theirs
    old = target.parent.parent / TMP / new_tmp_name(target.name, old=True)
    try:
        os.rename(target, old)
    except OSError:
        return  # someone else is replacing it right now
    with contextlib.suppress(OSError):
        os.rename(tmp, target)
    remove_tree(old)


def remove_tree(directory: Path) -> None:
    """Remove a directory tree, ignoring errors (another process may be removing it too)."""
    shutil.rmtree(directory, ignore_errors=True)

"""The cache key: a hash of the trace's blocks (read.blockhash), made by the read that fills the
cache from the blocks it reads (in both processes of a split read), the same as hashing the file
itself; a changed trace gets another key, a copy of a cached one is found without a read."""

from __future__ import annotations

import os
import random
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import xxhash
from conftest import ROOT
from typer.testing import CliRunner

from traceview import cache
from traceview.cache import key, manage
from traceview.cli import app
from traceview.columns.parallel import collect_events
from traceview.read.blockhash import HASH_BLOCK, BlockHashes, file_hash
from traceview.read.reader import TraceReader

runner = CliRunner()


def _by_definition(data: bytes) -> str:
    """xxh3-128 of the size (8 bytes, little-endian) and of each 1 MiB block's xxh3-128."""
    digest = xxhash.xxh3_128(len(data).to_bytes(8, "little"))
    for start in range(0, len(data), HASH_BLOCK):
        digest.update(xxhash.xxh3_128(data[start : start + HASH_BLOCK]).digest())
    return digest.hexdigest()


@pytest.mark.parametrize("size", [0, 1, HASH_BLOCK - 1, HASH_BLOCK, 3 * HASH_BLOCK + 7])
def test_the_key_is_the_hash_of_the_blocks(tmp_path: Path, size: int) -> None:
    path = tmp_path / "blob"
    data = os.urandom(size)
    path.write_bytes(data)
    assert file_hash(path) == key.trace_hash(path) == _by_definition(data)
    other = bytearray(data + b"x")
    other[size // 2] ^= 1  # any byte changed, or one more: another key
    path.write_bytes(other)
    assert file_hash(path) != _by_definition(data)


@pytest.mark.parametrize("seed", range(8))
def test_pieces_read_in_any_order_make_the_same_key(tmp_path: Path, seed: int) -> None:
    """Pieces that start mid-block, jump back or skip ahead: the blocks not seen whole are
    read from the file at the end, the key is the same."""
    rng = random.Random(seed)
    data = rng.randbytes(5 * HASH_BLOCK + 12345)
    path = tmp_path / "blob"
    path.write_bytes(data)
    hashes = BlockHashes(len(data))
    at = rng.randrange(len(data))
    for _ in range(12):
        n = rng.randrange(3 * HASH_BLOCK)
        hashes.feed(at, memoryview(data)[at : at + n])
        at = min(at + n, len(data)) if rng.random() < 0.7 else rng.randrange(len(data))
    assert hashes.key(path) == _by_definition(data)


def test_a_file_cut_before_its_missing_blocks_are_read(tmp_path: Path) -> None:
    path = tmp_path / "blob"
    path.write_bytes(bytes(2 * HASH_BLOCK))
    hashes = BlockHashes(2 * HASH_BLOCK)
    os.truncate(path, HASH_BLOCK)
    with pytest.raises(Exception, match="changed while it was read"):
        hashes.key(path)


@pytest.mark.parametrize("split", ["fork", "serial"])
def test_a_read_hashes_what_it_reads(
    demo: Path, monkeypatch: pytest.MonkeyPatch, split: str
) -> None:
    """In two processes (the worker sends the digests of its blocks) or one: the blocks come
    hashed, bar the few where a part starts or stops."""
    monkeypatch.setenv("TRACEVIEW_SPLIT", "fork")
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1" if split == "fork" else str(1 << 60))
    reader = TraceReader(demo, block_size=64 << 10)
    reader.hashes = BlockHashes(demo.stat().st_size)
    events = collect_events(reader)
    assert (events.read.resume_at is not None) == (split == "fork")
    blocks = -(-demo.stat().st_size // HASH_BLOCK)
    assert len(reader.hashes.missing()) <= (2 if split == "fork" else 0) < blocks
    assert reader.hashes.key(demo) == key.trace_hash(demo)


def _kernels(trace: Path, *extra: str) -> str:
    r = runner.invoke(app, ["kernels", str(trace), "-f", "json", "-q", *extra])
    assert r.exit_code == 0, r.output
    return r.stdout


def _keys() -> list[str]:
    return sorted(e.key for e in manage.entries(Path(os.environ["TRACEVIEW_CACHE_DIR"])))


def test_a_first_read_makes_the_key_without_hashing_the_file_first(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1")  # a split read
    monkeypatch.setenv("TRACEVIEW_SPLIT", "fork")
    with monkeypatch.context() as patched:
        patched.setattr(key, "trace_hash", _no_hash)
        cold = _kernels(demo)
    assert _keys() == [key.trace_hash(demo)]
    monkeypatch.setattr("traceview.app.reading._ingest", _no_read)
    monkeypatch.setattr(key, "trace_hash", _no_hash)  # the index knows the file now
    assert _kernels(demo) == cold


def test_a_copy_is_found_by_its_hash_without_a_read(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file of the size of one already hashed is hashed before it is read: its copy hits."""
    cold = _kernels(demo)
    copy = tmp_path / "copy.json"
    shutil.copy(demo, copy)
    monkeypatch.setattr("traceview.app.reading._ingest", _no_read)
    assert _kernels(copy) == cold.replace(str(demo), str(copy))
    assert len(_keys()) == 1


def test_a_changed_trace_gets_another_entry(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same size, other bytes (a kernel renamed): the index's identity changed, the new
    content is read and stored under a key of its own."""
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1")
    monkeypatch.setenv("TRACEVIEW_SPLIT", "fork")
    cold = _kernels(demo, "--top", "0")
    data = demo.read_bytes()
    name = b'"name": "'
    at = data.index(name, data.index(b'"cat": "kernel"')) + len(name)
    changed = data[:at] + (b"Z" if data[at : at + 1] != b"Z" else b"Y") + data[at + 1 :]
    demo.write_bytes(changed)
    os.utime(demo, ns=(1, 1))  # a new mtime, whatever the clock says
    warm = _kernels(demo, "--top", "0")
    assert warm != cold
    assert len(_keys()) == 2 and key.trace_hash(demo) in _keys()


def test_refresh_makes_the_key_from_its_read(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cold = _kernels(demo)
    with monkeypatch.context() as patched:
        patched.setattr(key, "trace_hash", _no_hash)
        assert _kernels(demo, "--refresh") == cold
    assert _keys() == [key.trace_hash(demo)]


def test_open_slot_defers_the_key_only_where_no_entry_can_be_the_file(
    demo: Path, tmp_path: Path
) -> None:
    settings = cache.CacheSettings(directory=tmp_path / "cache")
    slot = cache.open_slot(demo, settings, keep_cpu=False)
    assert slot is not None and slot.key == "" and slot.hashes is not None
    assert not (tmp_path / "cache" / key.INDEX_DIR).exists()  # a new cache: no index opened
    index = key._open_index(tmp_path / "cache")  # an index that knows no file of this size
    assert index is not None
    index.close()
    again = cache.open_slot(demo, settings, keep_cpu=False)
    assert again is not None and again.key == "" and again.hashes is not None
    verified = cache.open_slot(
        demo, cache.CacheSettings(directory=tmp_path / "c2", verify=True), False
    )
    assert verified is not None and verified.key == key.trace_hash(demo)


def test_the_command_line_writes_the_entry_in_a_process_of_its_own(demo: Path) -> None:
    """The entry is there when the command ends, and what its writer says reaches stderr."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = [sys.executable, "-m", "traceview", "kernels", str(demo), "-q", "-f", "json"]
    r = subprocess.run(run, capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert _keys() == [key.trace_hash(demo)]
    bad_limit = {**env, "TRACEVIEW_CACHE_MAX_SIZE": "5"}  # the writer refuses it, and says so
    r = subprocess.run([*run, "--refresh"], capture_output=True, text=True, env=bad_limit)
    assert r.returncode == 0 and r.stderr.count("could not write the cache entry") == 1, r.stderr


def _no_hash(path: Path) -> str:
    raise AssertionError(f"{path} hashed before it was read")


def _no_read(*args: object, **kwargs: object) -> None:
    raise AssertionError("the trace was read, not served from the cache")


def test_a_process_with_another_thread_is_not_single_threaded() -> None:
    import threading

    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not cache.single_threaded()
    finally:
        release.set()
        other.join()


@pytest.mark.parametrize("single", [True, False])
def test_the_writer_is_a_process_unless_another_thread_runs(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, single: bool
) -> None:
    """A fork copies no thread (nor the locks one holds): with one running, a thread writes."""
    import threading

    from traceview import forked
    from traceview.app.reading import _ingest
    from traceview.options import ReadOptions

    monkeypatch.setattr(forked, "_fork_cache_writes", True)
    monkeypatch.setattr(cache, "single_threaded", lambda: single)
    settings = cache.CacheSettings(directory=tmp_path / "cache")
    slot = cache.open_slot(demo, settings, keep_cpu=False)
    assert slot is not None
    events = _ingest(demo, ReadOptions(quiet=True), keep_cpu=False, hashes=slot.hashes)
    cache.publish_in_background(slot, events, with_cpu=False)
    assert isinstance(cache._writing[-1], threading.Thread) != single
    cache.wait_for_writes()
    warm = cache.open_slot(demo, settings, keep_cpu=False)
    assert warm is not None and warm.events is not None and warm.key == key.trace_hash(demo)


def _index_writer(root: Path, started: threading.Event) -> None:
    """A cache writer's thread inside a write transaction of the identity index."""
    index = key._open_index(root)
    assert index is not None
    with index, index.transact():
        index.set("being written", 1)
        started.set()
        time.sleep(0.5)


def test_a_fork_waits_for_the_writers_threads_and_its_child_reads_the_index(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork copies the state of the SQLite index a writer's thread has open, a write
    transaction too, which the child's own connection then takes for a lock held for ever (a
    run's rank reader, forked then, waited minutes): every fork waits for those threads."""
    root = tmp_path / "cache"
    root.mkdir()
    started = threading.Event()
    writer = threading.Thread(target=_index_writer, args=(root, started))
    monkeypatch.setattr(cache, "_writing", [writer])
    writer.start()
    started.wait()
    pid = os.fork()
    if pid == 0:  # the child: the index read within diskcache's first wait, or a failure
        code = 1
        try:
            code = 0 if key.trace_key(demo, root) == key.trace_hash(demo) else 2
        finally:
            os._exit(code)
    alive = writer.is_alive()
    deadline = time.monotonic() + 30
    while (ended := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if ended[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert not alive  # waited for before the fork
    assert ended[0] == pid and os.waitstatus_to_exitcode(ended[1]) == 0


def _slow_writer(slot: object, events: object, with_cpu: bool, index: cache.Claim) -> None:
    """A forked writer that waits to be let go (a byte on fd _GO), then says whether it took
    the index write (a byte on fd _TOOK)."""
    if select.select([_GO[0]], [], [], 30)[0]:  # not let go: a failure, not a hang
        os.read(_GO[0], 1)
    os.write(_TOOK[1], b"1" if index.take() else b"0")


_GO: list[int] = []
_TOOK: list[int] = []


@pytest.mark.parametrize("writer_first", [True, False])
def test_the_index_is_written_once_by_whoever_is_free_first(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer_first: bool
) -> None:
    """The command writes the identity index itself when it waits for its writer still at
    work; a writer done by then has written it."""
    go, took = os.pipe(), os.pipe()
    monkeypatch.setattr(sys.modules[__name__], "_GO", list(go))
    monkeypatch.setattr(sys.modules[__name__], "_TOOK", list(took))
    monkeypatch.setattr(cache, "_publish_and_flush", _slow_writer)
    remembered: list[str] = []

    def remember(slot: cache.Slot) -> None:
        remembered.append(slot.key)
        os.write(go[1], b"x")  # the writer goes on once this process has taken the write

    monkeypatch.setattr(cache, "_remember", remember)
    settings = cache.CacheSettings(directory=tmp_path / "cache", verify=True)
    slot = cache.open_slot(demo, settings, keep_cpu=False)
    assert slot is not None and slot.key
    write = cache._ForkedWrite(slot, None, False)  # type: ignore[arg-type]
    try:
        if writer_first:
            os.write(go[1], b"x")
            assert os.read(took[0], 1) == b"1"  # the writer took it, and said done after
            deadline = time.monotonic() + 60
            while not write.child.done() and time.monotonic() < deadline:
                time.sleep(0.01)
        write.join()
        if not writer_first:
            assert os.read(took[0], 1) == b"0"  # this process took it first
        assert remembered == ([] if writer_first else [slot.key])
    finally:
        for fd in (*go, *took):
            os.close(fd)

"""The one-process read on threads (traceview.read.threaded) gives exactly what a serial read
gives, on generated traces, plain and gzip; and the compiled core's ChunkScanner under it."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from conftest import load_generator
from reader_paths import COMPILED
from threaded_reads import Watch, read

import traceview.read.threaded as threaded
from traceview.read.compiled import scanner

pytestmark = pytest.mark.skipif(not COMPILED, reason="the compiled core is not installed")
generate = load_generator()


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("layout", ["kineto", "lines", "compact"])
@pytest.mark.parametrize("hostile", [False, True])
def test_threaded_equals_serial(
    tmp_path: Path, layout: str, hostile: bool, compressed: bool
) -> None:
    path = tmp_path / "t.json"
    generate.write_trace(path, steps=6, seed=3, layout=layout, hostile_names=hostile)
    if compressed:
        path = path.with_suffix(".gz")
        path.write_bytes(gzip.compress((tmp_path / "t.json").read_bytes(), 1))
    for keep_cpu, frames in ((False, False), (True, False), (True, True)):
        watch = Watch()
        with watch.watching():
            on_threads = read(path, keep_cpu, frames, block_size=32 << 10)
        assert watch.started == 1
        assert on_threads == read(path, keep_cpu, frames, on_threads=False, block_size=32 << 10)


def test_the_pure_python_reader_keeps_the_fork(monkeypatch: pytest.MonkeyPatch) -> None:
    from traceview.read.reader import TraceReader

    path = Path(__file__).parents[2] / "fixtures" / "demo.json.gz"
    monkeypatch.setenv("TRACEVIEW_SPLIT", "threads")
    assert threaded.threads_win(TraceReader(path))
    monkeypatch.setenv("TRACEVIEW_READER", "python")
    assert not threaded.threads_win(TraceReader(path))


def _chunk(n: int) -> bytes:
    return b",".join(
        b'{"ph": "X", "cat": "kernel", "name": "k%d", "pid": 0, "tid": 7, "ts": %d, "dur": 3, '
        b'"args": {"correlation": %d, "device": 0, "stream": 7}}' % (i % 5, 100 + i, i)
        for i in range(n)
    )


def test_chunk_scanner_gives_scan_chunks_results_in_order() -> None:
    core = scanner()
    assert core is not None
    chunks = [_chunk(n) for n in (300, 1, 40, 7)] + [b'{"ph": "X", "ts": '] + [_chunk(2)]
    pipe = core.ChunkScanner(2, 8, False)
    for chunk in chunks:
        assert pipe.submit(chunk, False)
    assert pipe.in_flight() == len(chunks)
    for chunk in chunks:
        assert pipe.next() == core.scan_chunk(chunk, False, False)  # a refusal too
        assert pipe.last_text() == chunk
    with pytest.raises(RuntimeError):
        pipe.next()  # none in flight
    pipe.close()


def test_chunk_scanner_takes_no_more_than_ahead() -> None:
    core = scanner()
    assert core is not None
    pipe = core.ChunkScanner(1, 2, True)
    assert pipe.submit(_chunk(3), True) and pipe.submit(_chunk(4), False)
    assert not pipe.submit(_chunk(5), False)
    assert pipe.in_flight() == 2
    assert pipe.next()["events"] == 3
    assert pipe.submit(_chunk(5), False)
    pipe.close()
    assert pipe.in_flight() == 0 and not pipe.submit(_chunk(1), False)


@pytest.mark.parametrize("members", [1, 3])
def test_gzip_inflated_in_place_then_by_blocks(tmp_path: Path, members: int) -> None:
    """read_into (the compiled inflater writing into the reader's buffer) gives the text in
    pieces of any size, and blocks() goes on where it stopped (the trailer's read)."""
    from traceview.read.source import TraceSource, check_path

    data = bytes(range(256)) * 5000
    step = len(data) // members + 1
    path = tmp_path / "blob.gz"
    path.write_bytes(b"".join(gzip.compress(data[i : i + step]) for i in range(0, len(data), step)))
    with TraceSource(check_path(path), 100_000) as source:
        assert source.inflates_in_place()
        got = bytearray()
        for size in (7, 150_000, 99_999, 3):
            room = bytearray(size)
            read = source.read_into(memoryview(room))
            assert 0 < read <= size
            got += room[:read]
        assert source.position == len(got)
        got += b"".join(source.blocks())
        assert source.read_into(memoryview(bytearray(10))) == 0
    assert got == data

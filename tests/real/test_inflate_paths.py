"""The compiled core's gzip reader (rust/src/inflate.rs, inflating on a thread of its own)
against the Python path's zlib-ng (``TRACEVIEW_READER=python``): the same bytes in the same
blocks, the same end, the same error at the same decompressed offset, on the gzip traces of
../shared/traces and fixtures/ whole, in several members, truncated, corrupted, padded,
followed by other data, and a gzip of an empty file; seeks forward and backward too."""

from __future__ import annotations

import gzip
import hashlib
import os
import signal
import struct
import zlib
from pathlib import Path

import pytest
from conftest import ROOT, SHARED_TRACES
from reader_paths import COMPILED, python_reader
from typer.testing import CliRunner

from traceview.cli import app
from traceview.errors import TraceviewError
from traceview.read import source
from traceview.read.source import TraceSource, TruncatedInput, check_path

pytestmark = pytest.mark.skipif(not COMPILED, reason="the compiled core is not installed")

Result = tuple[str, list[int], tuple[str, str | int], int]


def _traces() -> list[Path]:
    found = sorted(SHARED_TRACES.glob("*.json.gz")) if SHARED_TRACES.is_dir() else []
    found += [p for p in sorted(SHARED_TRACES.glob("h200/*.json.gz")) if p.name != "big.json.gz"]
    return found + sorted((ROOT / "fixtures").rglob("*.json.gz"))


def _read(path: Path, block_size: int) -> Result:
    """What a source gives: the bytes' hash, each block's end, how it ended, and the file
    bytes the inflater consumed."""
    digest, ends = hashlib.sha256(), []
    with TraceSource(check_path(path), block_size) as src:
        try:
            for block in src.blocks():
                digest.update(block)
                ends.append(src.position)
            end: tuple[str, str | int] = ("end", src.decompressed_bytes)
        except TruncatedInput as e:
            end = ("truncated", e.offset)
        except TraceviewError as e:
            end = ("error", str(e))
        return digest.hexdigest(), ends, end, src.compressed_consumed


def _both(path: Path, block_size: int = 1 << 16) -> Result:
    compiled = _read(path, block_size)
    with python_reader():
        python = _read(path, block_size)
    assert compiled == python
    return compiled


@pytest.mark.parametrize("path", _traces(), ids=lambda p: p.name.removesuffix(".json.gz"))
def test_whole_traces(path: Path) -> None:
    _digest, _ends, end, _consumed = _both(path)
    assert end[0] == "end"


@pytest.fixture(scope="module")
def packed() -> bytes:
    """A real trace's gzip (about 150 KB), or the demo's without ../shared."""
    eager = SHARED_TRACES / "h200" / "eager.json.gz"
    return (eager if eager.is_file() else ROOT / "fixtures" / "demo.json.gz").read_bytes()


def _write(tmp_path: Path, data: bytes, name: str = "t.json.gz") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_members_padding_and_trailing_data(tmp_path: Path, packed: bytes) -> None:
    text = gzip.decompress(packed)
    members = b"".join(
        gzip.compress(text[i : i + 40_000], mtime=0) for i in range(0, len(text), 40_000)
    )
    for data, ends_with in [
        (members, "end"),
        (packed + gzip.compress(b"") + packed, "end"),
        (packed + bytes(100), "end"),
        (packed + b"\n", "error"),
        (packed + bytes(10) + b"x", "error"),
        (packed + gzip.compress(b"[]")[:-3], "truncated"),
        (packed + b"\x1f", "error"),
        (gzip.compress(b""), "end"),
        (gzip.compress(b"") + bytes(5), "end"),
    ]:
        path = _write(tmp_path, data)
        assert _both(path)[2][0] == ends_with, data[-16:]
        assert _both(path, block_size=4096)[2][0] == ends_with


def test_read_boundaries(tmp_path: Path, packed: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """File reads of a few bytes: members, padding and magic bytes split across them."""
    monkeypatch.setattr(source, "_GZIP_READ", 7)
    for data in [
        packed + gzip.compress(b"{}", mtime=0),
        packed + bytes(20),
        packed + bytes(20) + b"\x1f\x8b",
        packed + b"\x00\x1f\x8b",
    ]:
        _both(_write(tmp_path, data), block_size=1000)


def test_truncated_at_many_offsets(tmp_path: Path, packed: bytes) -> None:
    n = len(packed)
    cuts = sorted({2, 3, 9, 10, 11, 12, 100, n - 9, n - 8, n - 4, n - 1, *range(13, n, n // 37)})
    for cut in cuts:
        end = _both(_write(tmp_path, packed[:cut]), block_size=8192)[2]
        assert end[0] in ("truncated", "error"), cut


def test_corrupted_bytes(tmp_path: Path, packed: bytes) -> None:
    """Bytes flipped in the header, the deflate data and the trailer (CRC, length)."""
    n = len(packed)
    spots = sorted({2, 3, 8, 9, 10, 11, 20, n - 8, n - 5, n - 1, *range(30, n - 8, n // 41)})
    outcomes = set()
    for spot in spots:
        for flip in (0x01, 0x80, 0xFF):
            data = bytearray(packed)
            data[spot] ^= flip
            outcomes.add(_both(_write(tmp_path, bytes(data)), block_size=8192)[2][0])
    assert "error" in outcomes


def _member(text: bytes, flags: int, extra: bytes = b"", header_crc: int | None = None) -> bytes:
    """A gzip member with the optional header fields ``flags`` asks for."""
    header = b"\x1f\x8b\x08" + bytes([flags]) + bytes(4) + b"\x00\xff"
    if flags & 4:
        header += struct.pack("<H", len(extra)) + extra
    if flags & 8:
        header += b"trace.json\x00"
    if flags & 16:
        header += b"a comment\x00"
    if flags & 2:
        crc = zlib.crc32(header) & 0xFFFF if header_crc is None else header_crc
        header += struct.pack("<H", crc)
    body = zlib.compressobj(6, zlib.DEFLATED, -15)
    deflated = body.compress(text) + body.flush()
    return header + deflated + struct.pack("<II", zlib.crc32(text), len(text) & 0xFFFFFFFF)


def test_header_fields(tmp_path: Path) -> None:
    text = b'{"traceEvents": []}'
    for data in [
        _member(text, 4 | 8 | 16 | 2, extra=b"ab\x02\x00xy"),
        _member(text, 8) + _member(text, 16),
        _member(text, 2, header_crc=1),  # a wrong header CRC
        _member(text, 0x20),  # a reserved flag
    ]:
        _both(_write(tmp_path, data))


def test_seeks(packed: bytes, tmp_path: Path) -> None:
    """Forward seeks skip blocks unsent, backward ones inflate again: the same bytes."""
    path = _write(tmp_path, packed)
    size = len(gzip.decompress(packed))

    def reads() -> list[bytes]:
        with TraceSource(check_path(path), 4096) as src:
            out = [src.read_at(size // 2, 100), src.read_at(10, 50)]
            src.seek(size - 5000)
            out.append(b"".join(src.blocks()))
            return out

    compiled = reads()
    with python_reader():
        assert compiled == reads()
    assert compiled[2] == gzip.decompress(packed)[size - 5000 :]


def test_command_errors_agree(tmp_path: Path, packed: bytes) -> None:
    """A command on damaged gzip: the same exit code and message from both paths."""
    runner = CliRunner()
    for name, data in [
        ("cut.json.gz", packed[: len(packed) * 2 // 3]),
        ("bad.json.gz", packed[: len(packed) // 2] + b"\x00garbage" * 20),
        ("tail.json.gz", packed + b"garbage"),
        ("empty.json.gz", gzip.compress(b"")),
    ]:
        path = _write(tmp_path, data, name)
        for extra in ([], ["--partial"]):
            args = ["kernels", str(path), "--no-cache", "-f", "json", *extra]
            compiled = runner.invoke(app, args)
            with python_reader():
                python = runner.invoke(app, args)
            assert (compiled.exit_code, compiled.output) == (python.exit_code, python.output)


def test_a_fork_while_inflating_does_not_hang(tmp_path: Path, packed: bytes) -> None:
    """A child forked while the inflate thread runs has no such thread: reading there is an
    error, not a wait for ever (nor is the reader's close, which leaves the channels the
    thread may have held a lock of at the fork); the parent reads on. Forked 100 times: at
    any point of the thread's work (~4 ms each)."""
    path = _write(tmp_path, packed)
    for trial in range(100):
        with TraceSource(check_path(path), 4096) as src:
            blocks = src.blocks()
            first = next(blocks)
            pid = os.fork()
            if pid == 0:  # pragma: no cover (the child)
                signal.alarm(10)
                code = 3
                try:
                    next(blocks)
                except OSError:
                    code = 0
                finally:
                    os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, f"fork {trial}"
            if trial == 0:
                assert first + b"".join(blocks) == gzip.decompress(packed)

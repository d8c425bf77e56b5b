"""A big gzip trace is read in one process, its chunks scanned on threads
(traceview.read.threaded): on real traces that read is the serial read, field by field
(every column, names in their interning order, the read stats with the chunk counts), and a
damaged gzip file gives the serial read's error, or with --partial its events.
h200/big.json.gz (519 MB) runs under the slow marker."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from conftest import SHARED_TRACES
from reader_paths import COMPILED
from threaded_reads import Watch, read

import traceview.read.threaded as threaded

pytestmark = pytest.mark.skipif(not COMPILED, reason="the compiled core is not installed")

MODES = {"gpu": (False, False), "cpu": (True, False), "frames": (True, True)}
_TRACES = [
    "h200/train.json.gz",
    "h200/decode.json.gz",
    "h200/eager.json.gz",
    "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.json.gz",
    "tracelens__b200__eager_trace.json.gz",
    "param__dlrm_8rank_worker0.json.gz",
    pytest.param("h200/big.json.gz", marks=pytest.mark.slow),
]


def _path(name: str) -> Path:
    path = SHARED_TRACES / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", _TRACES, ids=lambda n: n.split("__")[-1])
def test_the_threaded_read_is_the_serial_read(name: str, mode: str) -> None:
    path = _path(name)
    keep_cpu, frames = MODES[mode]
    watch = Watch()
    with watch.watching():
        on_threads = read(path, keep_cpu, frames)
    serial = read(path, keep_cpu, frames, on_threads=False)
    assert (watch.done, watch.failed) == (1, 0)  # read on threads, to the end
    assert on_threads == serial


def _damaged(tmp_path: Path, how: str) -> Path:
    """h200/train.json.gz damaged: its gzip stream cut short, a byte of it changed, data
    after it, or its JSON broken in the middle (compressed again)."""
    raw = _path("h200/train.json.gz").read_bytes()
    path = tmp_path / f"{how}.json.gz"
    if how == "truncated":
        path.write_bytes(raw[: len(raw) * 3 // 5])
    elif how == "corrupt":
        at = len(raw) * 3 // 5
        path.write_bytes(raw[:at] + bytes([raw[at] ^ 0x55]) + raw[at + 1 :])
    elif how == "trailing":
        path.write_bytes(raw + b"not gzip")
    else:
        text = gzip.decompress(raw)
        at = text.index(b'"dur"', len(text) * 3 // 5)
        path.write_bytes(gzip.compress(text[:at] + b'"dur": @' + text[at + 6 :], 1))
    return path


@pytest.mark.parametrize("partial", [False, True], ids=["strict", "partial"])
@pytest.mark.parametrize("how", ["truncated", "corrupt", "trailing", "malformed"])
def test_damaged_gzip_gives_the_serial_reads_error(tmp_path: Path, how: str, partial: bool) -> None:
    path = _damaged(tmp_path, how)
    for keep_cpu, frames in MODES.values():
        watch = Watch()
        with watch.watching():
            on_threads = read(path, keep_cpu, frames, partial)
        serial = read(path, keep_cpu, frames, partial, on_threads=False)
        assert watch.started == 1
        # Broken JSON: the chunk that holds it does not decode, the serial read says why
        # (a corrupt stream may inflate to broken JSON before zlib sees it).
        if how != "corrupt":
            assert watch.failed == (how == "malformed")
        assert on_threads == serial
        if not partial or how != "truncated":
            assert isinstance(serial, str) and serial.startswith("error: ")


def test_chunks_in_flight_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """No more chunks (their text, their rows) in flight than ``ahead``, on a trace of many
    times that many chunks: memory does not grow with the trace."""
    path = _path("h200/decode.json.gz")
    monkeypatch.setattr(threaded.ThreadedReader, "ahead", 3)
    watch = Watch()
    with watch.watching():
        result = read(path, True, block_size=256 << 10)
    assert not isinstance(result, str)
    assert result[1]["chunks"] > 10 * 3
    assert watch.most_in_flight == 3

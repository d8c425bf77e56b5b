"""The reader on hostile shapes of input: linear time, bounded memory, errors at the damage.

The linear-time tests read a generated file of size N and one of size 4N in the same run and
compare the best of a few alternated timings: a linear path takes ~4x as long, a quadratic one
~16x. The bound sits half-way between, on a log scale, so that a busy machine (whose memory
bandwidth is shared: CPU time of one process does not shut that out) cannot push a linear
path over it.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from traceview.columns.parallel import collect_events
from traceview.errors import TraceviewError
from traceview.read import reader as reader_module
from traceview.read.decode import ChunkError, decode_chunk
from traceview.read.jsonscan import split_values, value_end
from traceview.read.reader import REPEATED_EVENTS_KEY, TraceReader

MB = 1 << 20
FACTOR = 4
MAX_RATIO = 8.0  # sqrt(FACTOR * FACTOR**2)


@pytest.fixture(autouse=True)
def _python_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read the Python reader's decoded events (the compiled scanner converts
    GPU rows itself: tests/real/test_reader_paths.py compares the two)."""
    monkeypatch.setenv("TRACEVIEW_READER", "python")


def _event(i: int, name: str = "k") -> str:
    return json.dumps(
        {
            "ph": "X",
            "cat": "kernel",
            "name": name,
            "pid": 0,
            "tid": 7,
            "ts": 1000 + 10 * i,
            "dur": 5,
            "args": {"device": 0, "stream": 7, "correlation": i},
        }
    )


def _events(n: int, first: int = 0) -> str:
    return ",\n".join("  " + _event(first + i) for i in range(n))


def _plain(size: int) -> str:
    """A multi-line trace of about ``size`` bytes."""
    return '{"traceEvents": [\n' + _events(size // (len(_event(0)) + 4)) + "\n]}\n"


def _read_all(path: Path, partial: bool = False) -> int:
    reader = TraceReader(path, partial=partial)
    return sum(len(batch) for batch in reader.batches())


def _fails(path: Path) -> None:
    with pytest.raises(TraceviewError):
        _read_all(path)


def _cpu_time(run: Callable[[], object]) -> float:
    """CPU time of ``run``: the reader reads in this one process, and CPU time, unlike the
    wall clock, does not count the time other processes of a busy machine take."""
    start = time.process_time()
    run()
    return time.process_time() - start


def _alternated_ratio(small: Callable[[], object], large: Callable[[], object]) -> float:
    """The best time of ``large`` over the best time of ``small``, run alternately so that a
    busy moment of the machine hits both alike."""
    times: list[list[float]] = [[], []]
    for _ in range(4):
        for run, spent in zip((small, large), times, strict=True):
            spent.append(_cpu_time(run))
    return min(times[1]) / min(times[0])


def _ratio(tmp_path: Path, make: Callable[[int], str], size: int) -> float:
    """Time to read make(FACTOR * size) over the time to read make(size)."""
    paths = []
    for n in (size, FACTOR * size):
        path = tmp_path / f"trace-{n}.json"
        path.write_text(make(n))
        paths.append(path)
    return _alternated_ratio(lambda: _read_all(paths[0]), lambda: _read_all(paths[1]))


def _leading_whitespace(n: int) -> str:
    return " " * n + '{"traceEvents": [' + _events(10) + "]}"


def _header_string(n: int) -> str:
    """Half a string in the header, half events (decoding them steadies the timing)."""
    events = _events(n // 2 // (len(_event(0)) + 4))
    return '{"x": "' + "a" * (n // 2) + '", "traceEvents": [' + events + "]}"


def _stack_frames(n: int, events: int = 10) -> str:
    frame = '"{}": {{"name": "frame", "parent": 1}}'
    count = n // len(frame.format(10**6))
    frames = ", ".join(frame.format(i) for i in range(count))
    return '{"stackFrames": {' + frames + '}, "traceEvents": [' + _events(events) + "]}"


def _stack_frames_and_events(n: int) -> str:
    """Half a stackFrames object in the header, half events (as _header_string)."""
    return _stack_frames(n // 2, n // 2 // (len(_event(0)) + 4))


def _cut_marks_in_a_name(n: int) -> str:
    """An event whose name is full of what looks like event boundaries."""
    name = _event(10, "},{" * (n // 3))
    return '{"traceEvents": [' + _events(10) + ",\n" + name + ",\n" + _events(10, 11) + "]}"


@pytest.mark.parametrize(
    ("make", "size"),
    [
        (_leading_whitespace, 32 * MB),
        (_header_string, 12 * MB),
        (_stack_frames_and_events, 12 * MB),
        (_cut_marks_in_a_name, 8 * MB),
    ],
    ids=["leading-whitespace", "header-string", "stack-frames", "cut-marks-in-a-name"],
)
@pytest.mark.slow
def test_reading_is_linear(tmp_path: Path, make: Callable[[int], str], size: int) -> None:
    assert _ratio(tmp_path, make, size) <= MAX_RATIO


@pytest.mark.slow
def test_a_lost_quote_is_reported_where_it_is_in_linear_time(tmp_path: Path) -> None:
    runs = []
    for n in (2 * MB, FACTOR * 2 * MB):
        text = _plain(n)
        at = text.index('"name": "k"', len(text) // 10) + len('"name": "k')
        path = tmp_path / f"lost-{n}.json"
        path.write_text(text[:at] + text[at + 1 :])  # the name's closing quote is lost

        def run(path: Path = path, at: int = at) -> None:
            match = f"malformed JSON at byte {at + 3}: Expecting"
            with pytest.raises(TraceviewError, match=match):
                _read_all(path)

        runs.append(run)
    assert _alternated_ratio(*runs) <= MAX_RATIO


def test_a_lost_quote_in_the_last_events_is_reported_where_it_is(tmp_path: Path) -> None:
    text = _plain(64 << 10)
    at = text.rindex('"name": "k"') + len('"name": "k')
    path = tmp_path / "lost.json"
    path.write_text(text[:at] + text[at + 1 :])
    with pytest.raises(TraceviewError, match=f"malformed JSON at byte {at + 3}:"):
        _read_all(path)


@pytest.mark.parametrize(
    "body", [b"a" * (2 * MB), b"\\n" * MB, b'\\"' * MB, b"ab\\u00e9" * (MB // 4)]
)
def test_scanning_a_long_string_takes_little_memory(body: bytes) -> None:
    text = b'{"name": "' + body + b'", "args": {"a": [1]}}'
    tracemalloc.start()
    try:
        assert value_end(text, 0) == len(text)
        assert value_end(text, 9) == len(text) - len(', "args": {"a": [1]}}')
        assert split_values(text[:-5]) == (0, 0)  # it ends inside the event
        with pytest.raises(ChunkError):  # the NaN-tolerant path scans the strings too
            decode_chunk(text + b', {"a": NaN', False, Counter())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 * len(text), peak


# --- messages that name the real cause ----------------------------------------------------


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + _plain(4096).encode())
    assert _read_all(path) == len(json.loads(_plain(4096))["traceEvents"])


def test_a_gzip_stream_cut_in_its_header_says_so(tmp_path: Path) -> None:
    path = tmp_path / "cut.json.gz"
    path.write_bytes(gzip.compress(_plain(4096).encode())[:10])  # the gzip header only
    with pytest.raises(TraceviewError, match="the gzip stream ends early, after 0 decompressed"):
        _read_all(path)


@pytest.mark.parametrize("gzipped", [False, True])
def test_text_after_the_trace_is_reported_at_its_file_offset(tmp_path: Path, gzipped: bool) -> None:
    text = (_plain(3 << 20) + " garbage").encode()
    path = tmp_path / "after.json"
    path.write_bytes(gzip.compress(text, 1) if gzipped else text)
    with pytest.raises(TraceviewError, match=f"after the trace at byte {text.index(b'garbage')}$"):
        _read_all(path, partial=True)  # a plain file not ending in } or ] needs it


# --- a trace that another program changes while it is read -----------------------------------


def _traceview(*args: str | Path) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "traceview", *map(str, args)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow  # timed against a run: run alone, with no other test's load
def test_a_trace_cut_while_it_is_read_is_one_clear_error(tmp_path: Path) -> None:
    """Cut to half at several moments of a run: never a crash (the memory-mapped reading
    stopped the process with SIGBUS), at most one line naming the cause."""
    original = tmp_path / "original.json"
    original.write_text(_plain(48 * MB))
    path = tmp_path / "t.json"
    shutil.copyfile(original, path)
    whole = float("inf")
    for _ in range(2):  # the quicker of two runs: the first may pay for a cold start
        start = time.perf_counter()
        first = _traceview("kernels", "-q", "--no-cache", path)
        assert first.communicate(timeout=60)[1] == ""
        whole = min(whole, time.perf_counter() - start)
    errors = []
    for share in (0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        shutil.copyfile(original, path)
        run = _traceview("kernels", "-q", "--no-cache", path)
        time.sleep(whole * share)
        os.truncate(path, original.stat().st_size // 2)
        _, err = run.communicate(timeout=60)
        assert run.returncode in (0, 1), (share, run.returncode, err)
        if run.returncode:
            assert len(err.splitlines()) == 1 and err.startswith("traceview: error: "), err
            errors.append(err)
    assert errors, "the cut never came during the run"


_CUT_WHILE_HASHING = """
import os, sys
from pathlib import Path
from typing import Any
import xxhash
from traceview.errors import TraceviewError
from traceview.columns.parallel import collect_events

path, real = Path(sys.argv[1]), xxhash.xxh3_128


class CutFirst:
    \"\"\"The hash, whose first update comes after another program cut the file.\"\"\"

    def __init__(self):
        self.digest, self.cut = real(), False

    def update(self, data):
        if not self.cut:
            os.truncate(path, 4096)
            self.cut = True
        self.digest.update(data)

    def hexdigest(self):
        return self.digest.hexdigest()


xxhash.xxh3_128 = CutFirst
from traceview.cache.key import content_hash

try:
    content_hash(path)
except TraceviewError as e:
    sys.exit(str(e))
"""


def test_a_trace_cut_while_it_is_hashed_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(_plain(24 * MB))
    size = path.stat().st_size
    run = subprocess.run(
        [sys.executable, "-c", _CUT_WHILE_HASHING, str(path)], capture_output=True, text=True
    )
    assert run.returncode == 1, (run.returncode, run.stderr)  # it was -7: SIGBUS
    assert len(run.stderr.splitlines()) == 1
    assert f"the file changed while it was read (it got shorter: {size} bytes" in run.stderr


_CUT_WHILE_DECODING = """
import os, sys
from pathlib import Path
from typing import Any
import traceview.read.reader as reader
from traceview.errors import TraceviewError
from traceview.columns.parallel import collect_events

path, real = Path(sys.argv[1]), reader.decode_span


def cut_first(*args, **kwargs):
    \"\"\"Decode, after another program cut the file to 4 KB (the first time).\"\"\"
    if os.stat(path).st_size > 4096:
        os.truncate(path, 4096)
    return real(*args, **kwargs)


reader.decode_span = cut_first
try:
    for _ in reader.TraceReader(path).batches():
        pass
except TraceviewError as e:
    sys.exit(str(e))
"""


def test_a_trace_cut_while_a_block_is_decoded_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(_plain(8 * MB))
    size = path.stat().st_size
    run = subprocess.run(
        [sys.executable, "-c", _CUT_WHILE_DECODING, str(path)], capture_output=True, text=True
    )
    assert run.returncode == 1, (run.returncode, run.stderr)  # it was -7: SIGBUS
    assert len(run.stderr.splitlines()) == 1
    assert f"the file changed while it was read (it got shorter: {size} bytes" in run.stderr


# --- what the path names --------------------------------------------------------------------


def test_a_symlink_loop_is_named(tmp_path: Path) -> None:
    (tmp_path / "a.json").symlink_to(tmp_path / "b.json")
    (tmp_path / "b.json").symlink_to(tmp_path / "a.json")
    with pytest.raises(TraceviewError, match=r"a\.json: too many levels of symbolic links"):
        TraceReader(tmp_path / "a.json")


# --- values ----------------------------------------------------------------------------------


def _big_int_trace(n: int) -> str:
    """Kernels and launches whose pid, tid, device and stream go beyond 64 bits."""
    events = []
    for i in range(n):
        args = {"device": 2**70, "stream": 2**64 if i % 3 else 7, "correlation": i}
        kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 2**64 + i % 2,
                  "tid": -(2**63) - 5, "ts": 100 + 10 * i, "dur": 5, "args": args}  # fmt: skip
        launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 2**64,
                  "tid": 2**65, "ts": 98 + 10 * i, "dur": 1, "args": args}  # fmt: skip
        events += [kernel, launch]
    return json.dumps({"traceEvents": events}, indent=1)


@pytest.mark.parametrize(
    "command", [["gaps", "-f", "json"], ["kernels", "-f", "json"], ["snapshot"]]
)
def test_integers_beyond_64_bits_are_carried_as_text(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "big.json"
    path.write_text(_big_int_trace(40))
    run = subprocess.run(
        [sys.executable, "-m", "traceview", *command, "--no-cache", str(path)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    if command[0] == "gaps":
        devices = {s["device"] for s in json.loads(run.stdout)["streams"]}
        assert devices == {str(2**70)}


def test_integers_beyond_64_bits_read_in_parallel_as_serially(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.json"
    path.write_text(_big_int_trace(3000))
    got = []
    for min_bytes in ("1", str(1 << 60)):  # two processes, then one
        monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", min_bytes)
        reader = TraceReader(path, block_size=4096)
        events = collect_events(reader, keep_cpu=True)
        got.append((events.streams, events.threads, events.gpu.stream.tolist()))
        assert (events.read.resume_at is not None) == (min_bytes == "1")  # read in two parts
    assert got[0] == got[1]
    assert got[0][0] == [(str(2**70), 7), (str(2**70), str(2**64))]


def test_a_repeated_trace_events_key_is_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "twice.json"
    second = '"traceEvents": [' + _events(5, 100) + "]"
    path.write_text(_plain(4096).rstrip().removesuffix("}") + ", " + second + ', "x": 1}')
    reader = TraceReader(path)
    assert sum(len(batch) for batch in reader.batches()) == len(
        json.loads(_plain(4096))["traceEvents"]
    )
    assert reader.stats.skipped == {REPEATED_EVENTS_KEY: 1}
    assert "traceEvents" not in reader.header and reader.header["x"] == 1
    run = subprocess.run(
        [sys.executable, "-m", "traceview", "kernels", "--no-cache", "--strict", str(path)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1
    assert (
        run.stderr.startswith("traceview: error: ") and '1 "traceEvents" arrays after' in run.stderr
    )


def test_text_appended_while_the_trace_is_read_is_reported_at_its_file_offset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.json"
    path.write_text(_plain(1 << 20))
    size = path.stat().st_size
    real = reader_module.decode_span

    def append_first(*args: Any, **kwargs: Any) -> list[Any]:
        if path.stat().st_size == size:
            with path.open("ab") as f:
                f.write(b"{appended}")  # another program writes on meanwhile
        return real(*args, **kwargs)

    monkeypatch.setattr(reader_module, "decode_span", append_first)
    with pytest.raises(TraceviewError, match=f"unexpected text after the trace at byte {size}$"):
        for _ in TraceReader(path, block_size=64 << 10).batches():
            pass


@pytest.mark.parametrize("block_size", [97, 150, 257, 1000])
def test_a_lone_surrogate_at_the_end_of_a_chunk_is_cleaned_not_an_error(
    tmp_path: Path, block_size: int
) -> None:
    """msgspec says "Input data was truncated" for ``\\ud800`` a few bytes before the end of
    its input: that must not pass for a chunk cut short."""
    event = '{"ph": "X", "cat": "kernel", "ts": %d, "dur": 1, "name": "\\ud800"}'
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [\n' + ",\n".join(event % i for i in range(300)) + "\n]}")
    reader = TraceReader(path, block_size=block_size)
    names = [e.name for batch in reader.batches() for e in batch]
    assert names == ["\ufffd"] * 300


def test_a_big_header_value_traceview_does_not_read_is_not_kept(tmp_path: Path) -> None:
    path = tmp_path / "frames.json"
    path.write_text(_stack_frames(4 * MB))
    tracemalloc.start()
    try:
        reader = TraceReader(path)
        assert sum(len(batch) for batch in reader.batches()) == 10
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    text = path.read_text()
    size = text.index(', "traceEvents"') - len('{"stackFrames": ')
    assert reader.header["stackFrames"] == f"<{size} bytes, not kept>"
    assert peak < 6 * (4 * MB), peak  # decoded, the frames took ~20 bytes a byte

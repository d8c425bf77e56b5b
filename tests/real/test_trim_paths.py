"""``traceview trim`` through both readers: the compiled one (each chunk's events as columns,
traceview.read.spans) and the Python one (``TRACEVIEW_READER=python``) write the same file,
byte for byte, and the same lines on stderr, for every real trace and option (--pstep, a
serving trace's step markers, --window, --around-gap, --device, --no-cpu); damaged traces
give the same output or the same error; a chunk the core takes gives the fields the Python
decoder gives."""

from __future__ import annotations

import functools
import gzip
import random
from collections import Counter
from pathlib import Path

import msgspec
import pytest
from conftest import SHARED_TRACES, real_traces
from reader_paths import COMPILED, event_spans, mutations, python_reader, seed_chunks

import traceview.read.reader as reader_module
import traceview.read.spans as spans_module
from traceview.app import commands, trim_copy
from traceview.app.trim import Cut, TrimOptions
from traceview.app.trim_copy import (
    Copy,
    Judge,
    _correlation,
    learn_indexed,
    learn_pass,
    ts_ns,
    write_trimmed,
)
from traceview.columns.parallel import collect_events
from traceview.errors import TraceviewError
from traceview.options import ReadOptions
from traceview.read.compiled import scanner
from traceview.read.decode import ChunkError
from traceview.read.raw import decode_raw_span
from traceview.read.reader import ReadStats, TraceReader
from traceview.read.spans import ChunkKey, SpanChunk, decode_spans

pytestmark = [
    pytest.mark.skipif(not COMPILED, reason="the compiled core is not installed"),
    pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="../shared/traces is absent"),
]
H200 = ("train", "decode", "graphs", "eager", "compiled2")
OPTIONS = {
    "pstep1": TrimOptions(steps=((1, 1),)),  # a serving trace's: its first step marker
    "pstep1-2-device0": TrimOptions(steps=((1, 2),), devices=("0",)),
    "window": TrimOptions(window="1ms:20ms"),
    "gap1-nocpu": TrimOptions(around_gap=1, cpu=False),
}
SEEDS = [
    "hta__trace_compare__base__base.json.gz",
    "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.json.gz",
    "kineto__resnet50_profiler_api_nw0.json.gz",
    "hta__with_gpu_user_annotation__step_based_trace_2543932.json.gz",
]


judge_unread = Judge.unread


def _traces() -> list[Path]:
    paths = [*real_traces(), *(SHARED_TRACES / "h200" / f"{n}.json.gz" for n in H200)]
    return [p for p in paths if p.exists()]


def _trim(
    path: Path, options: TrimOptions, out: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[bytes, str]:
    """The trimmed file and stderr (or the error) of one run."""
    capsys.readouterr()
    try:
        commands.trim(path, options, ReadOptions(quiet=True, cache=False), out, force=True)
    except TraceviewError as e:
        return b"", f"error: {e}\n{capsys.readouterr().err}"
    return out.read_bytes(), capsys.readouterr().err.replace(str(out), "OUT")


def _both(
    path: Path,
    options: TrimOptions,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[tuple[bytes, str], tuple[bytes, str], Counter[str]]:
    """(compiled, python) runs, and how the compiled run's chunks were read."""
    read: Counter[str] = Counter()

    def counted(*args: object) -> object:
        batch = decode_spans(*args)  # type: ignore[arg-type]
        if scanner() is not None:  # the compiled run's
            read["columns" if isinstance(batch, SpanChunk) else "python"] += 1
        return batch

    def unread(self: Judge, key: ChunkKey) -> int | None:
        count = judge_unread(self, key)
        read["unread"] += count is not None and scanner() is not None
        return count

    monkeypatch.setattr(spans_module, "decode_spans", counted)
    monkeypatch.setattr(Judge, "unread", unread)
    compiled = _trim(path, options, tmp_path / "out.json", capsys)
    with python_reader():
        python = _trim(path, options, tmp_path / "out.json", capsys)
    return compiled, python, read


@pytest.mark.parametrize("option", OPTIONS)
@pytest.mark.parametrize("path", _traces(), ids=lambda p: p.name.removesuffix(".json.gz"))
def test_same_file_both_readers(
    path: Path,
    option: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    compiled, python, read = _both(path, OPTIONS[option], tmp_path, capsys, monkeypatch)
    assert compiled[1] == python[1]
    assert compiled[0] == python[0]
    if compiled[0]:  # the columns path was taken (every real trace's chunks are accepted),
        # or every chunk was left unread (what the read that found the cut saw of each)
        assert (read["columns"] or read["unread"]) and not read["python"], read


@pytest.mark.slow
@pytest.mark.parametrize(
    "option",
    [TrimOptions(steps=((3, 3),)), TrimOptions(window="100ms:300ms"), TrimOptions()],
    ids=["pstep3", "window", "all"],
)
def test_big_trace_both_readers(
    option: TrimOptions,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = SHARED_TRACES / "h200" / "big.json.gz"
    if not path.exists():
        pytest.skip("big.json.gz is absent")
    compiled, python, read = _both(path, option, tmp_path, capsys, monkeypatch)
    assert compiled == python
    assert read["columns"] + read["unread"] > 100 and not read["python"]
    if option.steps:  # the read that found the step showed which chunks may hold it
        assert read["unread"] > 100 and read["columns"] < 50, read


@pytest.mark.parametrize("option", ["pstep", "window"])
@pytest.mark.parametrize("name", ["h200/train", "kineto__resnet50_profiler_api_nw0"])
def test_small_chunks_left_unread(
    name: str,
    option: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chunks of 16 KB: the second pass leaves unread those the first showed it keeps
    nothing of, and writes the same file."""
    path = SHARED_TRACES / f"{name}.json.gz"
    if not path.exists():
        pytest.skip(f"{path.name} is absent")
    small = functools.partial(TraceReader, block_size=16 << 10)
    monkeypatch.setattr(spans_module, "TraceReader", small)
    monkeypatch.setattr(reader_module, "TraceReader", small)  # the read that finds the cut
    options = OPTIONS["window"]
    if option == "pstep":  # the trace's second step
        steps = sorted({w.step for w in collect_events(TraceReader(path)).steps})
        options = TrimOptions(steps=((steps[1], steps[1]),))
    compiled, python, read = _both(path, options, tmp_path, capsys, monkeypatch)
    assert compiled == python
    assert read["columns"] and not read["python"]
    assert read["unread"] > 20, read


def _synthetic() -> bytes:
    """A trace whose every kind of event trim tells apart recurs through it: CPU ops,
    kernels (correlation n, one without), flows, annotations, events without a ts, and
    metadata with and without one."""
    events = ['{"ph":"M","name":"process_name","pid":0,"args":{"name":"gpu"}}']
    for n in range(1500):
        ts, corr = n * 10, n if n != 700 else '"x"'
        events += [
            f'{{"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":2,"ts":{ts},"dur":5}}',
            f'{{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":{ts + 1}.5,"dur":2,'
            f'"args":{{"device":0,"correlation":{corr}}}}}',
            f'{{"ph":"s","id":{n},"pid":1,"tid":2,"ts":{ts},"cat":"ac2g","name":"f"}}',
            f'{{"ph":"f","id":{n},"pid":0,"tid":7,"ts":{ts + 1}.5,"cat":"ac2g","name":"f"}}',
        ]
        if n % 300 == 150:
            events.append('{"ph":"i","name":"mark","pid":1,"tid":2}')
        if n % 400 == 399:
            events.append(f'{{"ph":"M","name":"thread_name","pid":1,"tid":{n},"ts":{ts}}}')
        if n % 250 == 0:
            events.append(
                f'{{"ph":"X","cat":"gpu_user_annotation","name":"a","pid":0,"tid":7,"ts":{ts},"dur":9}}'
            )
    return ('{"traceEvents":[\n' + ",\n".join(events) + '\n],"displayTimeUnit":"ms"}').encode()


@pytest.mark.parametrize(
    "cut",
    [
        Cut(start_ns=5_000_000, end_ns=6_000_000),
        Cut(start_ns=5_000_000, devices=frozenset({"1"})),
        Cut(end_ns=2_000_000, cpu=False),
        Cut(4_000_000, 4_100_000, steps=True, correlations=frozenset({20, 400, 401, 1400})),
        Cut(4_000_000, 4_100_000, steps=True, by_ts={-1: frozenset({7_001_500})}),
    ],
    ids=["window", "device", "no-cpu", "steps", "steps-by-ts"],
)
def test_synthetic_chunks_left_unread(
    cut: Cut, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks of 4 KB of a trace with every kind of event throughout: the same file through
    both readers, some chunks left unread by the second pass."""
    path, out = tmp_path / "trace.json", tmp_path / "out.json"
    path.write_bytes(_synthetic())
    unread: Counter[bool] = Counter()

    def counted(self: Judge, key: ChunkKey) -> int | None:
        count = judge_unread(self, key)
        unread[count is not None] += scanner() is not None
        return count

    monkeypatch.setattr(
        spans_module, "TraceReader", functools.partial(TraceReader, block_size=4096)
    )
    monkeypatch.setattr(Judge, "unread", counted)
    compiled = _copy(path, cut, False, out, capsys)
    with python_reader():
        python = _copy(path, cut, False, out, capsys)
    assert compiled == python
    assert unread[True] and unread[False], unread


@pytest.mark.parametrize(
    ("packed", "held"),
    [(False, trim_copy.HELD_BYTES), (True, 0), (True, 10_000), (True, trim_copy.HELD_BYTES)],
    ids=["plain", "gzip-none-held", "gzip-some-held", "gzip-all-held"],
)
def test_second_pass_reads_at_places(
    packed: bool,
    held: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the first pass read every chunk as columns, the second takes the chunks it may
    keep from as the first held them (gzip, up to HELD_BYTES) or reads them at the places the
    first found (no second reader cuts the file), and writes what the Python reader writes."""
    monkeypatch.setattr(trim_copy, "HELD_BYTES", held)
    text = _synthetic()
    path, out = tmp_path / ("trace.json.gz" if packed else "trace.json"), tmp_path / "out.json"
    path.write_bytes(gzip.compress(text) if packed else text)
    readers: Counter[bool] = Counter()

    def reader(*args: object, **kwargs: object) -> TraceReader:
        readers[scanner() is not None] += 1
        return TraceReader(*args, block_size=4096, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(spans_module, "TraceReader", reader)
    cut = Cut(start_ns=5_000_000, end_ns=6_000_000)
    compiled = _copy(path, cut, False, out, capsys)
    with python_reader():
        python = _copy(path, cut, False, out, capsys)
    assert compiled == python
    assert readers == {True: 1, False: 2}


def test_file_changed_between_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk read again at its place whose ends are not what the first pass read: an error."""
    monkeypatch.setattr(trim_copy, "HELD_BYTES", 0)
    text = _synthetic()
    path = tmp_path / "trace.json"
    path.write_bytes(text)
    judge = Judge(Cut(start_ns=5_000_000, end_ns=6_000_000))
    learned = learn_pass(path, judge, False, None)
    assert learned.places
    path.write_bytes(text.replace(b'"process_name"', b'"process_nome"'))
    with pytest.raises(TraceviewError, match="changed while it was read"):
        b"".join(Copy(path, judge, False, None, learned).chunks(False))


# --- the read that finds the cut notes its chunks ---------------------------------------------


def _indexed(path: Path, block_size: int = 4096) -> ReadStats:
    """The stats of a read without CPU rows (as trim's) that notes its chunks."""
    reader = TraceReader(path, block_size=block_size, keep_text=True, index=True)
    return collect_events(reader).read


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize(
    "cut",
    [
        Cut(start_ns=5_000_000, end_ns=6_000_000),
        Cut(end_ns=2_000_000),
        Cut(4_000_000, 4_100_000, steps=True, correlations=frozenset({20, 400, 401, 1400})),
        Cut(4_000_000, 4_100_000, steps=True, by_ts={-1: frozenset({7_001_500})}),
        Cut(),
        Cut(start_ns=5_000_000, devices=frozenset({"1"})),
        Cut(end_ns=2_000_000, cpu=False),
    ],
    ids=["window", "to", "steps", "steps-by-ts", "all", "device", "no-cpu"],
)
def test_first_pass_from_the_index(
    cut: Cut,
    packed: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The chunks the read that found the cut noted stand in for trim's first pass: only
    those that may hold a kept event are read (and, for a cut that needs every GPU process,
    those that show one), and the file written is the one the full first pass writes."""
    text = _synthetic()
    path, out = tmp_path / ("trace.json.gz" if packed else "trace.json"), tmp_path / "out.json"
    path.write_bytes(gzip.compress(text) if packed else text)
    stats = _indexed(path)
    assert stats.index is not None and len(stats.index.chunks) == stats.chunks > 30
    # (the chunk with a kernel whose correlation is text is the Python decoder's: not seen)
    seen = [seen is not None and seen[0] for *_, seen in stats.index.chunks]
    assert sum(seen) > len(seen) // 2 and not all(seen)
    whole = _copy(path, cut, False, out, capsys)
    decoded: Counter[bool] = Counter()

    def counted(*args: object) -> object:
        decoded[True] += 1
        return decode_spans(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(spans_module, "decode_spans", counted)
    monkeypatch.setattr(spans_module, "TraceReader", None)  # (the full first pass's reader)
    capsys.readouterr()
    assert learn_indexed(path, Judge(cut), stats, None) is not None
    decoded.clear()
    write_trimmed(path, cut, ReadOptions(quiet=True), out, True, (path,), stats)
    assert (out.read_bytes(), capsys.readouterr().err) == whole
    if cut.devices is None and cut.cpu and (cut.start_ns is not None or cut.end_ns is not None):
        assert decoded[True] < stats.chunks // 2, decoded


@pytest.mark.parametrize("split", ["fork", "threads"])
def test_index_of_a_split_read(split: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read split in two processes, or scanned on threads, notes every chunk in file order
    (their places tile the event array) with what the scanner saw, as a serial read does."""
    path = SHARED_TRACES / "h200" / "train.json.gz"
    if not path.exists():
        pytest.skip(f"{path.name} is absent")
    plain = tmp_path / "train.json"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    target = path if split == "threads" else plain
    monkeypatch.setenv("TRACEVIEW_SPLIT", split)
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1")
    size = 64 << 10
    split_index = _indexed(target, size).index
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", str(1 << 60))
    serial = _indexed(plain, size)
    assert serial.index is not None and split_index is not None
    text = plain.read_bytes()
    for index in (serial.index, split_index):
        ends = [0]
        for end, length, head, tail, seen in index.chunks:
            between = text[ends[-1] : end - length]
            assert not between.strip(b" \t\r\n,") or ends == [0]
            assert text[end - length : end].startswith(head) and text[:end].endswith(tail)
            assert seen is not None and seen[0]
            ends.append(end)
        assert not text[ends[-1] :].split(b"]", 1)[0].strip()
        assert sum(seen[1] for *_, seen in index.chunks if seen) == serial.events
    assert (split_index.header_text, split_index.trailer_text) == (
        serial.index.header_text,
        serial.index.trailer_text,
    )


# --- damaged inputs -------------------------------------------------------------------------


def _text(name: str) -> bytes:
    return gzip.decompress((SHARED_TRACES / name).read_bytes())


def _small(text: bytes) -> tuple[bytes, int, int]:
    """A small whole trace holding the seed's first metadata, flows, GPU activities and
    annotations, runtime calls and ops; and its first and last ts (µs, as ns)."""
    spans = event_spans(text)
    picked: set[tuple[int, int]] = set()
    for needle in (b'"m"', b'"s"', b'"f"', b"kernel", b"annotation", b"runtime", b'"x"'):
        picked.update([s for s in spans if needle in text[s[0] : s[1]].lower()][:3])
    events = [text[a:b] for a, b in sorted(picked)]
    times = [ts for e in events if (ts := _ts(e)) is not None]
    body = b",\n  ".join(events)
    return text[: spans[0][0]] + body + text[spans[-1][1] :], min(times), max(times)


def _ts(event: bytes) -> int | None:
    value = msgspec.json.decode(event)
    ts = value.get("ts") if isinstance(value, dict) else None
    return ts_ns(msgspec.json.encode(ts)) if ts is not None else None


def _copy(
    path: Path, cut: Cut, partial: bool, out: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[bytes, str]:
    capsys.readouterr()
    try:
        write_trimmed(path, cut, ReadOptions(quiet=True, partial=partial), out, True, (path,))
    except TraceviewError as e:
        return b"", f"error: {e}\n{capsys.readouterr().err}"
    return out.read_bytes(), capsys.readouterr().err


@pytest.mark.parametrize("name", SEEDS, ids=lambda n: n.split("__")[1])
def test_damaged_files(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, first, last = _small(_text(name))
    middle = (first + last) // 2
    cuts = [
        Cut(),
        Cut(start_ns=middle),
        Cut(end_ns=middle, cpu=False),
        Cut(start_ns=first, end_ns=middle),
    ]
    path, out = tmp_path / "damaged.json", tmp_path / "out.json"
    rng = random.Random(name)
    failed = 0
    cases = [trace, trace[: len(trace) // 2], *mutations(trace, 60, rng)]
    for n, damaged in enumerate(cases):
        path.write_bytes(damaged)
        cut, partial = cuts[n % len(cuts)], n % 3 == 0
        compiled = _copy(path, cut, partial, out, capsys)
        with python_reader():
            python = _copy(path, cut, partial, out, capsys)
        assert compiled == python, (n, damaged)
        failed += compiled[1].startswith("error")
    assert 0 < failed < len(cases)


def _fields(pieces: list[tuple[object, object]]) -> list[tuple[object, ...]]:
    from traceview.read.raw import raw_args

    core = scanner()
    assert core is not None
    return [
        (
            bytes(raw),  # type: ignore[call-overload]
            e.ph, e.cat, e.pid,  # type: ignore[attr-defined]
            _ns(e.ts),  # type: ignore[attr-defined]
            _ns(e.dur),  # type: ignore[attr-defined]
            _correlation(e),  # type: ignore[arg-type]
            raw_args(e).device,  # type: ignore[arg-type]
            core.flow_id_hash(bytes(e.id)),  # type: ignore[attr-defined]
        )
        for raw, e in pieces
    ]  # fmt: skip


def _ns(raw: msgspec.Raw) -> int | None:
    return None if bytes(raw) == b"null" else ts_ns(bytes(raw))


def _columns(batch: SpanChunk) -> list[tuple[object, ...]]:
    c = batch.columns
    return [
        (
            bytes(c.data[c.offset + c.start[i] : c.offset + c.end[i]]),
            c.phs[c.ph[i]], c.cats[c.cat[i]], c.pids[c.pid[i]],
            int(c.ts[i]) if c.has_ts[i] else None,
            int(c.dur[i]) if c.has_dur[i] else None,
            int(c.correlation[i]),
            None if c.device[i] < 0 else c.devices[c.device[i]],
            int(c.flow[i]),
        )
        for i in range(batch.total)
    ]  # fmt: skip


def _decoded(chunk: bytes, compiled: bool) -> object:
    data = bytearray(b"[" + chunk + b"]")
    try:
        if compiled:
            return decode_spans(data, 1, len(data) - 1, False, Counter())
        return decode_raw_span(data, 1, len(data) - 1, False, Counter())
    except ChunkError as e:
        return f"ChunkError at {e.pos}: {e.why}"


@pytest.mark.parametrize("name", SEEDS, ids=lambda n: n.split("__")[1])
def test_chunk_columns_are_the_python_fields(name: str) -> None:
    text = _text(name)
    rng = random.Random(name)
    chunks = seed_chunks(text, size=12)[:4]
    cases = [*chunks, *(m for chunk in chunks for m in mutations(chunk, 60, rng))]
    taken, judge = 0, Judge(Cut())
    for n, chunk in enumerate(cases):
        compiled, python = _decoded(chunk, True), _decoded(chunk, False)
        if isinstance(compiled, SpanChunk):
            assert isinstance(python, list)
            assert _columns(compiled) == _fields(python), (n, chunk)
            # a flow of a chunk read either way pairs with one of a chunk read the other way
            flows = [judge._flow(e) for _, e in python]  # type: ignore[attr-defined]
            assert judge._flow_hashes(compiled.columns).tolist() == flows  # type: ignore[arg-type]
            taken += 1
        elif isinstance(compiled, list):  # refused: read by the Python decoder
            assert isinstance(python, list)
            assert _fields(compiled) == _fields(python), (n, chunk)
        else:
            assert compiled == python, (n, chunk)
    assert taken >= len(chunks)

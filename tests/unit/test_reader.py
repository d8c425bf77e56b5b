"""The block reader against a stdlib-json reference: layouts, cuts, edge files, truncation."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
import pytest
import reference as slow
from conftest import load_generator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceview.columns.numbers import NeedsExactTimes, to_ns, value_of
from traceview.columns.parallel import collect_events
from traceview.errors import TraceviewError
from traceview.read.decode import check_raw_numbers, has_raw_numbers
from traceview.read.reader import TraceReader

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
EDGE = FIXTURES / "edge"
BLOCK_SIZES = (257, 4096, 1 << 20)


gen = load_generator()


@pytest.fixture(autouse=True)
def _python_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests read the Python reader's decoded events (the compiled scanner converts
    GPU rows itself: tests/real/test_reader_paths.py compares the two)."""
    monkeypatch.setenv("TRACEVIEW_READER", "python")


def _exact_batches(reader: TraceReader) -> Iterator[list[Any]]:
    """Batches as collect_events sees them: a batch with float ts too big for ns is redecoded."""
    for batch in reader.batches():
        try:
            if has_raw_numbers(batch):
                check_raw_numbers(batch)
        except msgspec.ValidationError:
            batch = reader.redecode_slow()
        try:
            for e in batch:
                for value in (value_of(e.ts), value_of(e.dur)):
                    if value is not None:
                        to_ns(value)
        except NeedsExactTimes:
            batch = reader.redecode_exact()
        yield batch


def _read(path: Path, **kwargs: Any) -> tuple[TraceReader, list[Any]]:
    reader = TraceReader(path, **kwargs)
    return reader, [e for batch in _exact_batches(reader) for e in batch]


def _ns(value: Any) -> int | None:
    """Exact ns of a stdlib-decoded number (int or Decimal), or None when absent."""
    if value is None:
        return None
    scaled = Decimal(value) * 1000
    assert scaled == scaled.to_integral_value(), value
    return int(scaled)


def _key(e: Any) -> tuple[Any, ...]:
    ts = value_of(e.ts)
    return (e.ph, e.cat, e.name, None if ts is None else to_ns(ts), _dur(e))


def _dur(e: Any) -> int | None:
    dur = value_of(e.dur)
    return None if dur is None else to_ns(dur)


def _ref_key(d: dict[str, Any]) -> tuple[Any, ...]:
    return (
        d.get("ph", ""),
        d.get("cat", ""),
        d.get("name", ""),
        _ns(d.get("ts")),
        _ns(d.get("dur")),
    )


def _reference(data: bytes) -> list[dict[str, Any]]:
    doc = json.loads(data, parse_float=Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return events  # type: ignore[no-any-return]


# --- 1. generated traces, every layout, against stdlib json -------------------------------


@pytest.mark.parametrize("layout", ["kineto", "lines", "compact"])
@pytest.mark.parametrize("ts_mode", ["int", "ns"])
def test_generated_matches_stdlib(tmp_path: Path, layout: str, ts_mode: str) -> None:
    path = tmp_path / "t.json"
    gen.write_trace(path, steps=1, seed=3, layout=layout, ts_mode=ts_mode, hostile_names=True)
    ref = [_ref_key(d) for d in _reference(path.read_bytes())]
    assert len(ref) > 1000
    for block_size in BLOCK_SIZES:
        reader, events = _read(path, block_size=block_size)
        assert len(events) == len(ref), block_size
        assert [_key(e) for e in events] == ref, block_size
        assert not reader.stats.skipped
        assert reader.stats.truncated_at is None
        assert {"traceName", "displayTimeUnit", "baseTimeNanoseconds"} <= reader.header.keys()


@pytest.mark.parametrize("layout", ["kineto", "compact"])
def test_generated_gzip_matches_stdlib(tmp_path: Path, layout: str) -> None:
    path = tmp_path / "t.json.gz"
    gen.write_trace(path, steps=1, seed=4, layout=layout, ts_mode="ns", hostile_names=True)
    ref = [_ref_key(d) for d in _reference(gzip.decompress(path.read_bytes()))]
    for block_size in BLOCK_SIZES:
        _, events = _read(path, block_size=block_size)
        assert [_key(e) for e in events] == ref, block_size


def test_collect_events_matches_stdlib_gpu_times(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    gen.write_trace(path, steps=1, seed=5, layout="kineto", ts_mode="ns", hostile_names=True)
    ref = _reference(path.read_bytes())
    gpu_cats = {"kernel", "gpu_memcpy", "gpu_memset"}
    want = sorted(
        (_ns(d["ts"]), _ns(d["dur"]))
        for d in ref
        if d.get("ph") == "X" and d.get("cat") in gpu_cats
    )
    for block_size in (257, 1 << 20):
        te = collect_events(TraceReader(path, block_size=block_size))
        got = sorted(zip(te.gpu.ts.tolist(), te.gpu.dur.tolist(), strict=True))
        assert got == want


# --- 2. hypothesis: random events, hostile names, random layouts and block sizes -----------

NAME_PIECE = st.one_of(
    st.sampled_from(["{", "}", "},{", "}, {", "},\n  {", '"', "\\", "\n", "\t", ",", "[", "]"]),
    st.sampled_from(["é", "漢", "🚀", "\u0000", "\u2028", "\x7f", ":", " "]),
    st.characters(blacklist_categories=("Cs",), blacklist_characters="@"),
)
NAME_TEXT = st.lists(NAME_PIECE, max_size=10).map("".join)

TS_NS = st.one_of(
    st.integers(0, 10**12),  # small: float64 holds it to the ns
    st.integers(10**18, 2 * 10**18),  # epoch scale: needs exact decoding
)


def _ts_text(ns: int, as_int: bool) -> str:
    if as_int:
        return str(ns // 1000)
    return f"{ns // 1000}.{ns % 1000:03d}"


EVENT = st.fixed_dictionaries(
    {
        "name": NAME_TEXT,
        "cat": st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "x},{y"]),
        "ts": TS_NS,
        "dur": st.integers(0, 10**9),
        "ascii": st.booleans(),
        "extra": st.booleans(),
    }
)


def _serialize(events: list[dict[str, Any]], style: str, int_ts: bool) -> tuple[bytes, list]:
    """A trace document in one of several layouts; returns bytes and the expected keys."""
    parts = []
    expected = []
    for i, ev in enumerate(events):
        ts = ev["ts"] // 1000 * 1000 if int_ts else ev["ts"]
        dur = ev["dur"] // 1000 * 1000 if int_ts else ev["dur"]
        obj: dict[str, Any] = {"ph": "X", "cat": ev["cat"], "name": ev["name"], "pid": i}
        obj["ts"] = "@@TS@@"
        obj["dur"] = "@@DUR@@"
        if ev["extra"]:
            obj["args"] = {"correlation": i, "note": ev["name"], "list": [{"a": "},{"}, {}]}
        indent = 2 if style == "indent" else None
        sep = (",", ": ") if style in ("indent", "spaced") else (",", ":")
        text = json.dumps(obj, indent=indent, separators=sep, ensure_ascii=ev["ascii"])
        text = text.replace('"@@TS@@"', _ts_text(ts, int_ts))
        text = text.replace('"@@DUR@@"', _ts_text(dur, int_ts))
        parts.append(text)
        expected.append(("X", ev["cat"], ev["name"], ts, dur))
    joiner = {"indent": ",\n", "lines": ",\n", "spaced": ", ", "compact": ","}[style]
    body = joiner.join(parts)
    if style == "indent":
        doc = '{\n  "traceEvents": [\n' + body + '\n  ],\n  "traceName": "h"\n}\n'
    elif style == "lines":
        doc = '{"traceEvents": [\n' + body + '\n], "traceName": "h"}'
    else:
        doc = '{"traceEvents":[' + body + '],"traceName":"h"}'
    return doc.encode("utf-8"), expected


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(EVENT, min_size=0, max_size=25),
    style=st.sampled_from(["indent", "lines", "spaced", "compact"]),
    int_ts=st.booleans(),
    block_size=st.integers(16, 600),
)
def test_random_events_roundtrip(
    tmp_path_factory: pytest.TempPathFactory,
    events: list[dict[str, Any]],
    style: str,
    int_ts: bool,
    block_size: int,
) -> None:
    data, expected = _serialize(events, style, int_ts)
    assert [_ref_key(d) for d in _reference(data)] == expected  # the serializer itself
    path = tmp_path_factory.mktemp("h") / "t.json"
    path.write_bytes(data)
    reader, got = _read(path, block_size=block_size)
    assert [_key(e) for e in got] == expected
    assert reader.header.get("traceName") == "h"
    assert not reader.stats.skipped


# --- 3. the hand-written edge fixtures ------------------------------------------------------

CLEAN = [
    "bare_array.json",
    "big_ints.json",
    "capitalised_2021.json",
    "cpu_only.json",
    "hostile_strings.json",
    "nested_args_arrays.json",
    "no_runtime.json",
    "ns_timestamps.json",
    "one_line.json",
    "pid_strings.json",
    "steps_no_kernels.json",
    "trace_events_last.json",
    "empty_events.json",
]


@pytest.mark.parametrize("name", CLEAN)
@pytest.mark.parametrize("block_size", [31, 257, 1 << 20])
def test_edge_clean_files_match_stdlib(name: str, block_size: int) -> None:
    path = EDGE / name
    ref = _reference(path.read_bytes())
    reader, events = _read(path, block_size=block_size)
    assert [_key(e) for e in events] == [_ref_key(d) for d in ref]
    assert reader.stats.events >= len(ref)
    assert not reader.stats.skipped
    assert reader.stats.truncated_at is None
    doc = json.loads(path.read_bytes(), parse_float=Decimal)
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key != "traceEvents":
                assert key in reader.header
                if isinstance(value, str | int):
                    assert reader.header[key] == value
    te = collect_events(TraceReader(path, block_size=block_size))
    gpu = slow.gpu_events(slow.load_trace(path)[1], ("kernel", "memcpy", "memset"))
    want = sorted((slow.ts_ns(e), slow.dur_ns(e)) for e in gpu)
    assert sorted(zip(te.gpu.ts.tolist(), te.gpu.dur.tolist(), strict=True)) == want


def test_edge_counts() -> None:
    counts = {name: len(_read(EDGE / name)[1]) for name in CLEAN}
    assert counts["bare_array.json"] == 5
    assert counts["empty_events.json"] == 0
    assert counts["trace_events_last.json"] == len(
        json.loads((EDGE / "trace_events_last.json").read_bytes())["traceEvents"]
    )
    te = collect_events(TraceReader(EDGE / "bare_array.json"))
    assert len(te.gpu.ts) == 2
    assert int(te.gpu.dur.sum()) == 80_000


def test_edge_header_after_events() -> None:
    reader, _ = _read(EDGE / "trace_events_last.json", block_size=64)
    assert reader.header["traceName"] == "/tmp/libkineto_activities_10.json"
    assert reader.header["displayTimeUnit"] == "ms"
    assert reader.header["baseTimeNanoseconds"] == 1727000000000000000
    assert reader.header["INFO"][1] == "a trailing } and ] in a string"
    assert reader.header["metadata"] == {
        "traceEvents": "not the event list either",
        "nested": [{"a": 1}, {"b": [2, 3]}],
    }


def test_edge_hostile_names() -> None:
    ref = _reference((EDGE / "hostile_strings.json").read_bytes())
    _, events = _read(EDGE / "hostile_strings.json", block_size=17)
    assert [e.name for e in events] == [d["name"] for d in ref]
    assert any("},{" in e.name for e in events)
    assert any(e.name.endswith("\\") for e in events)


def test_edge_nan_tokens() -> None:
    path = EDGE / "nan_tokens.json"
    ref = json.loads(path.read_bytes())["traceEvents"]
    finite = [d for d in ref if all(json.dumps(d.get(k)) not in ("NaN",) for k in ("ts", "dur"))]
    for block_size in (31, 1 << 20):
        reader, events = _read(path, block_size=block_size)
        assert [e.name for e in events] == [d["name"] for d in finite]
        assert sum(reader.stats.skipped.values()) == len(ref) - len(finite) == 1
        te = collect_events(TraceReader(path, block_size=block_size))
        assert sum(te.read.skipped.values()) + sum(te.quality.values()) >= 1
        assert len(te.gpu.ts) == 2  # the memcpy and the triton kernel


@pytest.mark.parametrize("name", ["invalid_utf8.json", "lone_surrogate.json"])
def test_edge_bad_text_is_replaced(name: str) -> None:
    for block_size in (31, 1 << 20):
        reader, events = _read(EDGE / name, block_size=block_size)
        assert len(events) == 3
        assert not reader.stats.skipped
        bad = events[1].name
        assert "\ufffd" in bad
        bad.encode("utf-8")  # printable: no lone surrogate survives
        assert events[2].name == "fine_kernel"
        te = collect_events(TraceReader(EDGE / name, block_size=block_size))
        assert len(te.gpu.ts) == 2


def test_edge_truncated() -> None:
    path = EDGE / "truncated.json"
    with pytest.raises(TraceviewError, match="truncated"):
        _read(path)
    with pytest.raises(TraceviewError, match="truncated"):
        collect_events(TraceReader(path))
    for block_size in (31, 257, 1 << 20):
        reader, events = _read(path, partial=True, block_size=block_size)
        assert len(events) == 4
        assert reader.stats.truncated_at is not None
        assert 0 < reader.stats.truncated_at < path.stat().st_size
        # truncated_at is just after the last whole event's closing brace
        text = path.read_bytes()[: reader.stats.truncated_at]
        assert text.endswith(b"}")


@pytest.mark.parametrize("name", ["execution_trace.json", "not_json.txt"])
@pytest.mark.parametrize("partial", [False, True])
def test_edge_not_a_trace(name: str, partial: bool) -> None:
    with pytest.raises(TraceviewError):
        _read(EDGE / name, partial=partial)


# --- 4. exact nanoseconds --------------------------------------------------------------------


def test_ns_timestamps_exact() -> None:
    te = collect_events(TraceReader(EDGE / "ns_timestamps.json"))
    ref = [
        d
        for d in _reference((EDGE / "ns_timestamps.json").read_bytes())
        if d.get("ph") == "X" and d.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ]
    assert sorted(te.gpu.ts.tolist()) == sorted(_ns(d["ts"]) for d in ref)
    assert sorted(te.gpu.dur.tolist()) == sorted(_ns(d["dur"]) for d in ref)
    ends = {t + d for t, d in zip(te.gpu.ts.tolist(), te.gpu.dur.tolist(), strict=True)}
    assert ends & set(te.gpu.ts.tolist())  # kernel 2 starts exactly where kernel 1 ends


def test_sub_ns_digits_differ_exactly(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": "@1", "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": "@2", "dur": 1},
        {"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": "@3", "dur": 12.345},
    ]
    text = json.dumps({"traceEvents": events}, indent=2)
    text = text.replace('"@1"', "1712195495505582.988").replace('"@2"', "1712195495505583.001")
    text = text.replace('"@3"', "1712195495505590.5")
    path = tmp_path / "ns.json"
    path.write_text(text)
    for block_size in (16, 1 << 20):
        te = collect_events(TraceReader(path, block_size=block_size))
        ts = te.gpu.ts.tolist()
        assert ts == [1712195495505582988, 1712195495505583001, 1712195495505590500]
        assert ts[1] - ts[0] == 13
        assert te.gpu.dur.tolist() == [1000, 1000, 12345]


def test_float_mode_small_fractions_exact(tmp_path: Path) -> None:
    values = ["12.345", "0.001", "0.1", "8589934.591", "123456.789", "5"]
    events = ",\n".join(
        f'{{"ph": "X", "cat": "kernel", "name": "k{i}", "ts": {v}, "dur": {v}}}'
        for i, v in enumerate(values)
    )
    path = tmp_path / "f.json"
    path.write_text('{"traceEvents": [\n' + events + "\n]}")
    te = collect_events(TraceReader(path))
    assert not te.read.exact_times
    want = [_ns(Decimal(v)) for v in values]
    assert te.gpu.ts.tolist() == want
    assert te.gpu.dur.tolist() == want
    for v in values:
        assert to_ns(float(v)) == _ns(Decimal(v))
        assert to_ns(Decimal(v)) == _ns(Decimal(v))


# --- 5. truncation at many offsets -----------------------------------------------------------


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, list[tuple]]:
    text = gen.trace_text(size_bytes=60_000, seed=7, layout="kineto", ts_mode="ns")
    data = text.encode("utf-8")
    return data, [_ref_key(d) for d in _reference(data)]


def _check_cut(path: Path, ref: list[tuple], block_size: int, in_events: bool) -> None:
    """Without partial: TraceviewError. With it: a prefix of the events (or, only for a cut
    before the event array starts, TraceviewError)."""
    with pytest.raises(TraceviewError):
        _read(path, block_size=block_size)
    try:
        reader, events = _read(path, partial=True, block_size=block_size)
    except TraceviewError:
        assert not in_events, path.stat().st_size
        return
    got = [_key(e) for e in events]
    assert got == ref[: len(got)]
    assert reader.stats.truncated_at is not None


@pytest.mark.parametrize("block_size", [257, 1 << 20])
def test_truncated_plain_at_many_offsets(
    tmp_path: Path, small_trace: tuple[bytes, list[tuple]], block_size: int
) -> None:
    data, ref = small_trace
    array_end = data.rindex(b"]", 0, data.index(b'"traceName"')) + 1
    offsets = {1, 2, 50, array_end - 1, array_end, len(data) - 2}
    offsets |= {array_end * i // 31 + i for i in range(1, 31)}
    path = tmp_path / "cut.json"
    for offset in sorted(offsets):
        path.write_bytes(data[:offset])
        _check_cut(path, ref, block_size, offset > data.index(b'"traceEvents"') + 20)
    for offset in (len(data), len(data) - 1):  # whole, or only the final newline missing
        path.write_bytes(data[:offset])
        _, events = _read(path, block_size=block_size)
        assert [_key(e) for e in events] == ref


@pytest.mark.parametrize("tail", ["],", '],\n  "INFO', '"baseTimeNanose'])
def test_truncated_inside_trailer_key_partial(
    tmp_path: Path, small_trace: tuple[bytes, list[tuple]], tail: str
) -> None:
    data, ref = small_trace
    offset = data.rindex(tail.encode()) + len(tail)
    path = tmp_path / "cut.json"
    path.write_bytes(data[:offset])
    reader, events = _read(path, partial=True)
    assert [_key(e) for e in events] == ref
    assert reader.stats.truncated_at is not None


@pytest.mark.parametrize("block_size", [257, 1 << 20])
def test_truncated_gzip_at_many_offsets(
    tmp_path: Path, small_trace: tuple[bytes, list[tuple]], block_size: int
) -> None:
    data, ref = small_trace
    packed = gzip.compress(data, compresslevel=1, mtime=0)
    offsets = sorted(
        {1, 10, 20, len(packed) - 1, len(packed) - 4, len(packed) - 8}
        | {len(packed) * i // 31 + i for i in range(1, 31)}
    )
    path = tmp_path / "cut.json.gz"
    for offset in sorted(offsets):
        path.write_bytes(packed[:offset])
        _check_cut(path, ref, block_size, offset > len(packed) // 10)
    # a plain-text cut inside a complete gzip stream is a truncation too
    for offset in (len(data) // 3, len(data) - 5):
        path.write_bytes(gzip.compress(data[:offset], mtime=0))
        _check_cut(path, ref, block_size, True)


# --- 6. the file itself ------------------------------------------------------------------


def test_reading_never_writes_the_trace(tmp_path: Path) -> None:
    """Brackets are written around each chunk in the reader's buffer: the file stays as it was."""
    path = tmp_path / "t.json"
    gen.write_trace(path, steps=4, seed=2, layout="kineto", hostile_names=True)
    digest, stat = hashlib.sha256(path.read_bytes()).hexdigest(), path.stat()
    for block_size in (300, 1 << 20):
        collect_events(TraceReader(path, block_size=block_size), keep_cpu=True)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert path.stat().st_mtime_ns == stat.st_mtime_ns
    assert os.access(path, os.R_OK)


def test_a_file_shortened_while_read_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    gen.write_trace(path, steps=2, seed=1, layout="kineto")
    size = path.stat().st_size
    reader = TraceReader(path, block_size=4096)
    batches = reader.batches()
    next(batches)
    os.truncate(path, size // 2)  # another program rewrites the trace meanwhile
    with pytest.raises(TraceviewError, match="the file changed while it was read"):
        for _ in batches:
            pass

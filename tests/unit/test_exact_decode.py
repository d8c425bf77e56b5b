"""Exact decoding keeps ts and dur as raw text: the values, and which chunks take the slow path,
are those of the decoder it replaced (``Decimal | None`` fields)."""

from __future__ import annotations

import json
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from traceview.columns.numbers import value_of
from traceview.columns.parallel import collect_events
from traceview.read import decode
from traceview.read.reader import TraceReader


class _OldExactEvent(msgspec.Struct):
    """The exact event before raw numbers: the reference."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    ts: Decimal | None = None
    dur: Decimal | None = None


def _reference(chunk: bytes) -> tuple[list[tuple[Any, Any]], Counter[str]]:
    skipped: Counter[str] = Counter()
    try:
        events: list[Any] = msgspec.json.decode(b"[" + chunk + b"]", type=list[_OldExactEvent])
    except msgspec.ValidationError:
        events = decode._decode_slow(chunk, True, skipped)
    return [(e.ts, e.dur) for e in events], skipped


def _new(chunk: bytes) -> tuple[list[tuple[Any, Any]], Counter[str]]:
    """As the collector takes a chunk: numbers checked (the bulk parse checks those it
    parses), the slow path where one is not what the old fields took."""
    skipped: Counter[str] = Counter()
    events = decode.decode_chunk(chunk, True, skipped)
    try:
        if decode.has_raw_numbers(events):
            decode.check_raw_numbers(events)
    except msgspec.ValidationError:
        events = decode.decode_slow(chunk, True, skipped)
    return [(value_of(e.ts), value_of(e.dur)) for e in events], skipped


VALUES = st.one_of(
    st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str),
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(["null", "true", "false", "[]", "{}", '"12.5"', '"x"', '" 7 "', "1e5"]),
    st.just(None),  # the key left out
)


def _event(cat: str, ts: str | None, dur: str | None) -> bytes:
    fields = [f'"ph": "X", "cat": {json.dumps(cat)}']
    fields += [f'"{key}": {value}' for key, value in (("ts", ts), ("dur", dur)) if value]
    return ("{" + ", ".join(fields) + "}").encode()


@given(st.lists(st.tuples(st.sampled_from(["kernel", "fwdbwd"]), VALUES, VALUES), max_size=8))
def test_exact_decoding_as_before(events: list[tuple[str, str | None, str | None]]) -> None:
    chunk = b",\n".join(_event(*e) for e in events)
    assert _new(chunk) == _reference(chunk)


def test_a_dropped_events_bad_ts_sends_the_chunk_to_the_slow_path() -> None:
    """As with the old decoder, whatever the event's category: it is skipped and counted."""
    chunk = _event("fwdbwd", "true", None) + b"," + _event("kernel", "4891434721856.368", "1.5")
    values, skipped = _new(chunk)
    assert values == [(Decimal("4891434721856.368"), Decimal("1.5"))]
    assert sum(skipped.values()) == 1


def test_a_decimal_string_is_a_number_when_exact() -> None:
    values, skipped = _new(_event("kernel", '"12.5"', "3"))
    assert values == [(Decimal("12.5"), Decimal("3"))]
    assert not skipped


def _trace(tmp_path: Path, events: list[bytes]) -> Path:
    path = tmp_path / "t.json"
    path.write_bytes(b'{"traceEvents": [\n' + b",\n".join(events) + b"\n]}")
    return path


KERNEL = (
    b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1712195495505582.988,'
    b' "dur": 1.5, "args": {"device": 0, "stream": 7, "correlation": 1}}'
)


def test_a_dropped_events_bad_number_is_skipped_and_counted(tmp_path: Path) -> None:
    """Through the collector: a flow event's ts is true, so the chunk takes the slow path,
    which skips that event and counts it, as the old decoder's rejection did."""
    flow = b'{"ph": "f", "cat": "fwdbwd", "name": "f", "pid": 0, "tid": 7, "ts": true}'
    events = collect_events(TraceReader(_trace(tmp_path, [KERNEL, flow, KERNEL])))
    assert events.read.exact_times
    assert events.gpu.ts.tolist() == [1712195495505582988] * 2
    assert sum(events.read.skipped.values()) == 1


def test_a_kept_events_bad_number_is_skipped_and_counted(tmp_path: Path) -> None:
    bad = KERNEL.replace(b'"dur": 1.5', b'"dur": [1]')
    events = collect_events(TraceReader(_trace(tmp_path, [KERNEL, bad, KERNEL])))
    assert events.gpu.ts.tolist() == [1712195495505582988] * 2
    assert sum(events.read.skipped.values()) == 1


def test_a_decimal_string_through_the_collector(tmp_path: Path) -> None:
    odd = KERNEL.replace(b'"dur": 1.5', b'"dur": "2.25"')
    events = collect_events(TraceReader(_trace(tmp_path, [KERNEL, odd])))
    assert events.gpu.dur.tolist() == [1500, 2250]
    assert not events.read.skipped


def test_every_number_of_an_event_is_checked_before_one_is_used(tmp_path: Path) -> None:
    """ts null and dur true: the old decoder rejected the dur (slow path: a skipped event),
    where the per-event path alone would stop at the missing ts (a bad number)."""
    bad = KERNEL.replace(b'"ts": 1712195495505582.988', b'"ts": null').replace(
        b'"dur": 1.5', b'"dur": true'
    )
    events = collect_events(TraceReader(_trace(tmp_path, [KERNEL, bad])))
    assert sum(events.read.skipped.values()) == 1
    assert not events.quality

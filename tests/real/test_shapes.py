"""Each CPU op's Input Dims / Input type / Concrete Inputs reach its CPU row, read serially,
in two processes and from the cache, on every real trace (against a plain json read)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import reference as ref
from conftest import trace_params

from traceview.columns.cpu_rows import OP
from traceview.columns.model import TraceEvents
from traceview.columns.parallel import collect_events
from traceview.read.reader import TraceReader


def _expected(raw: list[dict[str, Any]]) -> Counter[tuple[str, Any, Any, Any]]:
    """Per cpu_op (name, dims, types, concrete), as the trace has them (dims None if absent)."""
    out: Counter[tuple[str, Any, Any, Any]] = Counter()
    for e in raw:
        if ref._cat(e) not in ("cpu_op", "operator") or e.get("ph") != "X":
            continue
        if ref.event_name(e).startswith("ProfilerStep#") or e.get("ts") is None:
            continue
        args = e.get("args") or {}
        dims = args.get("Input Dims", args.get("Input dims"))
        key = None if dims is None else (args.get("Input type"), args.get("Concrete Inputs"))
        out[(ref.event_name(e), json.dumps(dims), *map(json.dumps, key or (None, None)))] += 1
    return out


def _got(events: TraceEvents) -> Counter[tuple[str, Any, Any, Any]]:
    out: Counter[tuple[str, Any, Any, Any]] = Counter()
    for block in events.cpu.blocks():
        ops = block[block["correlation"] == OP]
        for name, shape in zip(ops["name"].tolist(), ops["shape"].tolist(), strict=True):
            if shape < 0:
                out[(events.names[name], "null", "null", "null")] += 1
                continue
            dims, types, concrete = (json.loads(t) if t else None for t in events.shapes[shape])
            out[(events.names[name], *map(json.dumps, (dims, types, concrete)))] += 1
    return out


@pytest.mark.parametrize("path", trace_params())
def test_shapes_reach_the_cpu_rows(path: Path) -> None:
    _, raw = ref.load_trace(path)
    want = _expected(raw)
    got = _got(collect_events(TraceReader(path), keep_cpu=True))
    assert got == want


def test_shapes_survive_the_split_and_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import SHARED_TRACES

    source = SHARED_TRACES / "tracelens__mi300__resnet_act_checkpoint.json.gz"
    if not source.is_file():
        pytest.skip("../shared/traces is absent")
    import gzip

    plain = tmp_path / "t.json"
    plain.write_bytes(gzip.decompress(source.read_bytes()))
    serial = _got(collect_events(TraceReader(plain), keep_cpu=True))
    assert sum(n for k, n in serial.items() if k[1] != "null") > 1000
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1000")
    assert _got(collect_events(TraceReader(plain), keep_cpu=True)) == serial

    from traceview.cache import store

    entry = tmp_path / "entry"
    entry.mkdir()
    events = collect_events(TraceReader(plain), keep_cpu=True)
    store.write_entry(entry, events, keep_cpu=True)
    back = store.read_entry(entry, store.read_meta(entry), keep_cpu=True)
    assert _got(back) == serial
    assert np.array_equal(
        np.concatenate(list(back.cpu.blocks()))["shape"],
        np.concatenate(list(events.cpu.blocks()))["shape"],
    )

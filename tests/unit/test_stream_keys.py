"""Streams are named (device, stream) keys, however the trace was read: serially, in two
processes, or from the cache."""

from __future__ import annotations

from pathlib import Path

import pytest
import reference as ref
from conftest import ROOT

from traceview import cache
from traceview.columns.model import StreamKey
from traceview.columns.parallel import collect_events
from traceview.read.reader import TraceReader

DEMO = ROOT / "fixtures" / "demo.json.gz"


def test_streams_are_named_keys_from_every_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = []
    monkeypatch.setenv("TRACEVIEW_SPLIT", "fork")  # a big gzip trace is read on threads else
    for min_bytes in ("1", str(1 << 60)):  # two processes, then one
        monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", min_bytes)
        events = collect_events(TraceReader(DEMO, block_size=64 << 10), keep_cpu=True)
        assert (events.read.resume_at is not None) == (min_bytes == "1")
        reads.append(events)
    settings = cache.CacheSettings(directory=tmp_path / "cache")
    slot = cache.open_slot(DEMO, settings, keep_cpu=True)
    assert slot is not None and slot.events is None
    cache.publish(slot, reads[-1])
    warm = cache.open_slot(DEMO, settings, keep_cpu=True)
    assert warm is not None and warm.events is not None
    reads.append(warm.events)
    for events in reads:
        assert events.streams == reads[0].streams
        assert all(type(key) is StreamKey for key in events.streams)
    _, raw = ref.load_trace(DEMO)
    want = {ref.stream_key(e) for e in ref.gpu_events(raw, ("kernel", "memcpy", "memset"))}
    assert [(k.device, k.stream) for k in reads[0].streams] == sorted(want)

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


def test_stream_ids_are_renumbered_in_place_in_the_order_of_their_values() -> None:
    """The join's stream column is renumbered where it is (a slice at a time, across the
    slices' bounds): ids in the order of the (device, stream) values, numbers before text."""
    import numpy as np

    from traceview.columns import collect

    streams: list[tuple[object, object]] = [(1, 7), (0, "x"), (0, 3), (1, 2), ("cpu", 0)]
    n = 3 * collect._RENUMBER_ROWS + 5
    ids = (np.arange(n, dtype=np.int64) * 7 % len(streams)).astype(np.int32)
    read = ids.copy()
    renumbered, keys = collect._sorted_streams(ids, streams)
    assert renumbered is ids
    assert keys == [StreamKey(0, 3), StreamKey(0, "x"), StreamKey(1, 2), StreamKey(1, 7),
                    StreamKey("cpu", 0)]  # fmt: skip
    named = [keys[i] for i in renumbered.tolist()]
    assert named == [StreamKey(*streams[i]) for i in read.tolist()]

"""The collectives' metadata the reader keeps (traceview.columns.comms): every kernel and CPU op
carrying ``Collective name`` has its row, with the values an independent parse finds; a read in
two processes, from the cache, or without CPU rows keeps the same rows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import ranks_reference as rr
import reference
from conftest import SHARED_TRACES, RealTrace

from traceview.columns.comms import count
from traceview.columns.model import TraceEvents, without_cpu
from traceview.columns.parallel import collect_events
from traceview.columns.schema import COMM_COLUMNS
from traceview.read.reader import TraceReader

NCCL = SHARED_TRACES / "hta__nccl_parser_config__nccl_data.json.gz"
needs_nccl = pytest.mark.skipif(not NCCL.is_file(), reason="../shared/traces is absent")
_FIELDS = ("In msg nelems", "Out msg nelems", "Group size", "Seq")


def expected_rows(raw: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """(side, name, ts, end, process group, collective, dtype, counts...) of every GPU
    activity and CPU op (not ProfilerStep#) whose args have a text ``Collective name``."""
    rows: Counter[tuple[Any, ...]] = Counter()
    cpu_categories = {"cpu_op", "operator", "user_annotation"}
    for e in raw:
        args = e.get("args")
        if not rr.carries(e):
            continue
        if reference.gpu_kind(e) is not None:
            side = "gpu"
        elif (
            e.get("ph") == "X"
            and str(e.get("cat")).lower() in cpu_categories
            and reference.ts_ns(e) is not None
            and not reference.event_name(e).startswith("ProfilerStep#")
        ):
            side = "cpu"
        else:
            continue
        start, end = reference.interval_ns(e)
        meta = (rr.text(args.get(k)) for k in ("Process Group Name", "Collective name", "dtype"))
        counts = (rr.count(args.get(k)) for k in _FIELDS)
        rows[(side, reference.event_name(e), start, end, *meta, *counts)] += 1
    return rows


def found_rows(events: TraceEvents, raw_names: bool = True) -> Counter[tuple[Any, ...]]:
    """The same tuples from traceview's table (a kernel's name from its GPU row; a CPU op's
    name is not in the table, so the reference's is matched by window)."""
    table, gpu = events.comms, events.gpu
    rows: Counter[tuple[Any, ...]] = Counter()
    for i in range(len(table.key)):
        row = int(table.gpu_row[i])
        start, end = int(table.ts[i]), int(table.end[i])
        if row >= 0:
            assert (int(gpu.ts[row]), int(gpu.ts[row] + gpu.dur[row])) == (start, end)
            side, name = "gpu", events.names[int(gpu.name[row])]
        else:
            side, name = "cpu", None
        meta = events.comm_keys[int(table.key[i])]
        counts = (
            int(getattr(table, f)[i]) for f in ("in_nelems", "out_nelems", "group_size", "seq")
        )
        rows[(side, name, start, end, *meta, *counts)] += 1
    return rows


def _without_cpu_names(rows: Counter[tuple[Any, ...]]) -> Counter[tuple[Any, ...]]:
    return Counter({(r[0], r[1] if r[0] == "gpu" else None, *r[2:]): n for r, n in rows.items()})


def test_every_carrying_event_has_its_row(real_trace: RealTrace) -> None:
    """With CPU rows each op's thread is known; without, the same rows, threads unknown."""
    want = _without_cpu_names(expected_rows(real_trace.raw))
    full, alone = real_trace.events.comms, real_trace.gpu_events.comms
    assert found_rows(real_trace.events) == want
    assert (full.thread[full.gpu_row < 0] >= 0).all()
    assert found_rows(real_trace.gpu_events) == want
    assert (alone.thread == -1).all()


def _same_table(a: TraceEvents, b: TraceEvents) -> None:
    assert a.comm_keys == b.comm_keys
    for c in COMM_COLUMNS:
        assert (getattr(a.comms, c.name) == getattr(b.comms, c.name)).all(), c.name


@needs_nccl
def test_the_nccl_trace_has_kernels_and_ops_with_metadata() -> None:
    events = collect_events(TraceReader(NCCL), keep_cpu=True)
    sides = Counter("gpu" if r >= 0 else "cpu" for r in events.comms.gpu_row.tolist())
    assert sides == {"gpu": 21, "cpu": 27}
    assert ("0", "allreduce", "Float") in events.comm_keys
    assert 2049000 in events.comms.in_nelems.tolist()


def _resolved(events: TraceEvents) -> Counter[tuple[Any, ...]]:
    """The rows with thread ids resolved (ids may differ between two reads)."""
    rows = found_rows(events)
    threads = Counter(events.threads[t] for t in events.comms.thread.tolist() if t >= 0)
    return rows + Counter({("threads", str(k)): n for k, n in threads.items()})


@needs_nccl
def test_a_read_in_two_processes_keeps_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gzip

    plain = tmp_path / "nccl.json"
    plain.write_bytes(gzip.decompress(NCCL.read_bytes()))
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", str(1 << 60))
    serial = collect_events(TraceReader(plain, block_size=64 << 10), keep_cpu=True)
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1")
    parallel = collect_events(TraceReader(plain, block_size=64 << 10), keep_cpu=True)
    assert parallel.read.resume_at is not None  # really read in two parts
    assert _resolved(parallel) == _resolved(serial)
    assert sum(_resolved(serial).values()) > 48


@needs_nccl
def test_the_cache_keeps_the_rows(tmp_path: Path) -> None:
    from traceview.cache.store import read_entry, read_meta, write_entry

    events = collect_events(TraceReader(NCCL), keep_cpu=True)
    write_entry(tmp_path, events, keep_cpu=True)
    back = read_entry(tmp_path, read_meta(tmp_path), keep_cpu=True)
    assert _resolved(back) == _resolved(events)
    alone = read_entry(tmp_path, read_meta(tmp_path), keep_cpu=False)
    assert found_rows(alone) == found_rows(without_cpu(events))
    fresh = collect_events(TraceReader(NCCL), keep_cpu=False)
    _same_table(fresh, alone)  # a read without CPU rows is exactly without_cpu's


@pytest.mark.parametrize(
    ("value", "expected"),
    [(5, 5), ("2049000", 2049000), (" 7 ", 7), (-1, -1), (2.5, -1), ("1e3", -1), ([1], -1),
     (True, -1), (None, -1), (2**63, -1), ("٣", -1)],
)  # fmt: skip
def test_counts(value: Any, expected: int) -> None:
    assert count(value) == expected == rr.count(value)

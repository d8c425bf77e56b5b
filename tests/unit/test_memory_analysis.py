"""Edge cases of ``traceview memory`` on small hand-made traces: frees of memory allocated
before the trace, negative totals, several devices, host memory apart, a peak before the first
event, nested ops, bad fields, a bounded timeline; each checked by hand and against the simple
loop of tests/memory_reference.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import memory_reference
import reference

from traceview.analyses.memory import TIMELINE_POINTS, DeviceMemory, analyse_memory
from traceview.columns.allocations import SKIPPED
from traceview.columns.parallel import collect_events
from traceview.read.reader import TraceReader
from traceview.render import memory as render_memory

_MIB = 1 << 20


def mem(
    ts: float, size: int, addr: int | None, allocated: int, reserved: int = 0, **kw: Any
) -> dict[str, Any]:
    args = {"Device Type": kw.get("kind", 1), "Device Id": kw.get("device", 0), "Bytes": size,
            "Total Allocated": allocated, "Total Reserved": reserved}  # fmt: skip
    if addr is not None:
        args["Addr"] = addr
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1,
            "tid": kw.get("tid", 1), "ts": ts, "args": args}  # fmt: skip


def op(name: str, ts: float, dur: float, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}


def step(n: int, ts: float, dur: float) -> dict[str, Any]:
    return {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}", "pid": 1, "tid": 1,
            "ts": ts, "dur": dur}  # fmt: skip


def read(tmp_path: Path, events: list[dict[str, Any]], header: dict[str, Any] | None = None):  # type: ignore[no-untyped-def]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({**(header or {}), "traceEvents": events}))
    return collect_events(TraceReader(path), keep_cpu=True), path


def figures(d: DeviceMemory) -> dict[str, Any]:
    return {
        "peak_allocated_bytes": d.peak_allocated_bytes,
        "peak_reserved_bytes": d.peak_reserved_bytes,
        "peak_ts_ns": d.peak_ts_ns,
        "peak_step": d.peak_step,
        "allocations": d.allocations,
        "frees": d.frees,
        "start_allocated_bytes": d.start_allocated_bytes,
        "end_allocated_bytes": d.end_allocated_bytes,
        "holders": [(h.op, h.bytes, h.count) for h in d.holders],
        "steps": [(s.step, s.peak_allocated_bytes, s.growth_bytes) for s in d.steps],
    }


def check_reference(path: Path, events: Any) -> Any:
    report = analyse_memory(events)
    want = memory_reference.figures(reference.load_trace(path)[1])
    assert {d.device: figures(d) for d in report.devices} == want["devices"]
    assert (None if report.cpu is None else figures(report.cpu)) == want["cpu"]
    return report


def test_frees_of_memory_allocated_before_the_trace(tmp_path: Path) -> None:
    """A free without its allocation lowers the level; the level before the first event is
    worked back from it; only what was allocated in the trace has a holder."""
    events, path = read(tmp_path, [
        op("aten::zeros", 9, 3),
        mem(10, -4 * _MIB, 0x100, 6 * _MIB, 16 * _MIB),
        mem(11, 1 * _MIB, 0x200, 7 * _MIB, 16 * _MIB),
        mem(20, -1 * _MIB, 0x300, 6 * _MIB, 16 * _MIB),
    ])  # fmt: skip
    d = check_reference(path, events).devices[0]
    assert (d.start_allocated_bytes, d.end_allocated_bytes) == (10 * _MIB, 6 * _MIB)
    assert d.peak_allocated_bytes == 10 * _MIB  # the level before the first event
    assert d.peak_ts_ns == 10_000 and d.holders == ()
    assert (d.allocations, d.frees) == (1, 2)
    assert d.held_before_bytes == 10 * _MIB
    assert any(
        "made before the trace" in n for n in render_memory.notes(check_reference(path, events))
    )


def test_the_live_allocations_at_the_peak_by_innermost_op(tmp_path: Path) -> None:
    events, path = read(tmp_path, [
        op("aten::linear", 0, 100), op("aten::addmm", 5, 10), op("aten::empty", 6, 2),
        mem(7, 100, 0xA, 100, 2048),  # inside empty (innermost), kept
        mem(12, 50, 0xB, 150, 2048),  # inside addmm, freed before the peak
        mem(13, -50, 0xB, 100, 2048),
        mem(14, 300, 0xB, 400, 2048),  # the address again: live
        mem(50, 200, 0xC, 600, 2048),  # in linear only: the peak
        mem(60, -200, 0xC, 400, 2048),
        mem(200, 24, 0xD, 424, 2048),  # after the peak: not a holder
    ])  # fmt: skip
    d = check_reference(path, events).devices[0]
    assert d.peak_allocated_bytes == 600 and d.peak_ts_ns == 50_000
    assert [(h.op, h.bytes, h.count) for h in d.holders] == [
        ("aten::addmm", 300, 1), ("aten::linear", 200, 1), ("aten::empty", 100, 1)
    ]  # fmt: skip
    assert d.reserved_at_peak_bytes == 2048 and d.slack > 0.3


def test_several_devices_and_host_memory_apart(tmp_path: Path) -> None:
    events, path = read(
        tmp_path,
        [
            mem(1, 10, 0x1, 10, 20, device=1), mem(2, 30, 0x2, 30, 40, device=0),
            mem(3, 64, 0x3, 64, 0, kind=0, device=-1), mem(4, 5, 0x4, 15, 20, device=1),
        ],
        {"deviceProperties": [{"id": 0, "totalGlobalMem": 40}, {"id": 1, "totalGlobalMem": 80}]},
    )  # fmt: skip
    report = check_reference(path, events)
    assert [(d.device, d.peak_allocated_bytes) for d in report.devices] == [(0, 30), (1, 15)]
    assert report.cpu is not None and report.cpu.peak_allocated_bytes == 64
    assert [d.peak_reserved_pct for d in report.devices] == [100.0, 25.0]
    data = render_memory.as_json(_summary(events), report)
    assert [d["device"] for d in data["devices"]] == [0, 1]
    assert data["cpu"]["peak_allocated_bytes"] == 64
    assert any("little headroom" in n for n in data["notes"])


def test_steps_peak_and_growth(tmp_path: Path) -> None:
    events, path = read(tmp_path, [
        step(1, 0, 100), step(2, 100, 100),
        mem(10, 100, 0x1, 100), mem(50, 100, 0x2, 200), mem(60, -100, 0x2, 100),
        mem(150, 100, 0x3, 200),
    ])  # fmt: skip
    d = check_reference(path, events).devices[0]
    assert [(s.step, s.peak_allocated_bytes, s.growth_bytes) for s in d.steps] == [
        (1, 200, 100), (2, 200, 100)
    ]  # fmt: skip
    assert d.peak_step == 1
    assert any(
        "rose in every one of the 2 steps" in n
        for n in render_memory.notes(check_reference(path, events))
    )


def test_bad_events_are_skipped_and_counted(tmp_path: Path) -> None:
    bad = mem(2, 1, 0x2, 1)
    bad["args"]["Total Allocated"] = "12"
    no_addr = mem(3, 8, None, 8)
    events, path = read(tmp_path, [mem(1, 4, 0x1, 4), bad, no_addr])
    assert events.quality[SKIPPED] == 1
    d = check_reference(path, events).devices[0]
    assert d.allocations == 2 and [(h.bytes, h.count) for h in d.holders] == [(4, 1)]


def test_the_timeline_is_bounded_and_keeps_the_peak(tmp_path: Path) -> None:
    levels = [(i * 7919) % 1000 for i in range(1, 1001)]
    levels[617] = 5000
    rows = [mem(i + 1, 1, i + 1, level) for i, level in enumerate(levels)]
    events, path = read(tmp_path, rows)
    d = check_reference(path, events).devices[0]
    assert len(d.timeline) == TIMELINE_POINTS
    assert (618_000, 5000, 0) in d.timeline


def test_no_memory_events(tmp_path: Path) -> None:
    events, _ = read(tmp_path, [op("aten::mm", 0, 5)])
    report = analyse_memory(events)
    assert report.events == 0 and report.devices == () and report.cpu is None
    assert render_memory.notes(report) == [render_memory.NO_EVENTS]


def _summary(events: Any) -> Any:
    from traceview.analyses.core.trace import summarize

    return summarize(events)


def test_events_out_of_time_order_are_taken_in_time_order(tmp_path: Path) -> None:
    events, path = read(tmp_path, [
        mem(30, -100, 0x1, 50), mem(10, 100, 0x1, 150), mem(20, 200, 0x2, 350),
        mem(20, -200, 0x2, 150),  # equal times: file order
    ])  # fmt: skip
    d = check_reference(path, events).devices[0]
    assert (d.start_allocated_bytes, d.peak_allocated_bytes, d.end_allocated_bytes) == (50, 350, 50)
    assert d.peak_ts_ns == 20_000
    assert [(h.op, h.bytes, h.count) for h in d.holders] == [("(no op)", 300, 2)]


def old(ts: float, size: int, kind: int = 1, device: int = 0) -> dict[str, Any]:
    """A [memory] event of an older PyTorch: Bytes alone, no address, no totals."""
    return {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
            "args": {"Device Type": kind, "Device Id": device, "Bytes": size}}  # fmt: skip


def test_bytes_alone_rebuild_the_level_from_their_running_sum(tmp_path: Path) -> None:
    """Old kineto traces (issue 49: kineto resnet50, 12,838 such events): the level is the
    running sum of Bytes in time order from the trace's start; the reserve unknown."""
    events, path = read(tmp_path, [
        step(1, 0, 50), step(2, 50, 50),
        old(30, 4 * _MIB), old(10, 2 * _MIB), old(20, -1 * _MIB),  # time order: 2, -1, 4
        old(60, 8 * _MIB), old(70, -8 * _MIB), old(80, -5 * _MIB),
        old(15, 64, kind=0, device=-1),
    ])  # fmt: skip
    report = check_reference(path, events)
    (d,) = report.devices
    assert d.rebuilt and not d.addressed
    assert d.peak_allocated_bytes == 13 * _MIB and d.peak_ts_ns == 60_000  # 2-1+4+8
    assert (d.start_allocated_bytes, d.end_allocated_bytes) == (0, 0)
    assert [(s.step, s.peak_allocated_bytes, s.growth_bytes) for s in d.steps] == [
        (1, 5 * _MIB, 5 * _MIB), (2, 13 * _MIB, -5 * _MIB)]  # fmt: skip
    doc = render_memory.device_json(d)
    assert doc["peak_reserved_bytes"] is None and doc["reserved_at_peak_bytes"] is None
    assert doc["level"] == "rebuilt from Bytes" and doc["held_before_bytes"] is None
    assert all(p["reserved_bytes"] is None for p in doc["timeline"])
    notes = render_memory.notes(report)
    assert any("carry only Bytes" in n and "reserve is unknown" in n for n in notes), notes
    assert "device 0: addresses missing: holders unknown" in notes
    assert not any("made before the trace" in n for n in notes)
    assert report.cpu is not None and report.cpu.peak_allocated_bytes == 64


def test_allocations_without_addresses_have_unknown_holders(tmp_path: Path) -> None:
    events, path = read(tmp_path, [
        mem(10, 5 * _MIB, None, 5 * _MIB, 8 * _MIB), mem(20, -5 * _MIB, None, 0, 8 * _MIB),
    ])  # fmt: skip
    report = check_reference(path, events)
    notes = render_memory.notes(report)
    assert "device 0: addresses missing: holders unknown" in notes
    assert not any("made before the trace" in n for n in notes), notes


def test_negative_totals_are_skipped_and_counted(tmp_path: Path) -> None:
    from traceview.columns.allocations import NEGATIVE

    events, path = read(tmp_path, [
        mem(10, 5, 0xA, -5, 0), mem(11, 5, 0xB, 5, -1), mem(12, 7, 0xC, 7, 8),
    ])  # fmt: skip
    report = check_reference(path, events)
    assert events.quality[NEGATIVE] == 2 and SKIPPED not in events.quality
    assert report.devices[0].peak_allocated_bytes == 7

"""An independent, deliberately simple computation of the ``memory`` figures: a plain loop
over the events as stdlib json parses them (reference.load_trace), no numpy, no traceview.

Definitions as in docs/metrics.md ("memory"); what it shares with traceview is only the
reference's own ts and step-window helpers.
"""

from __future__ import annotations

from typing import Any

import reference

OP_CATEGORIES = {"cpu_op", "operator"}
_FIELDS = ("Device Type", "Device Id", "Bytes")
_TOTALS = ("Total Allocated", "Total Reserved")


def memory_events(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The usable ``[memory]`` instants, each with its ns time and file position."""
    out = []
    for position, e in enumerate(raw):
        if e.get("name") != "[memory]" or e.get("ph") not in ("i", "I"):
            continue
        args = e.get("args")
        t = reference.ts_ns(e)
        if not isinstance(args, dict) or t is None:
            continue
        if not all(type(args.get(k)) is int for k in _FIELDS):
            continue
        # an older PyTorch's event: Bytes alone (its level rebuilt below)
        bytes_only = all(args.get(k) is None for k in _TOTALS)
        if not bytes_only and not all(type(args.get(k)) is int and args[k] >= 0 for k in _TOTALS):
            continue
        out.append({**args, "ts_ns": t, "position": position, "bytes_only": bytes_only,
                    "thread": (e.get("pid"), e.get("tid"))})  # fmt: skip
    return out


def figures(raw: list[dict[str, Any]]) -> dict[str, Any]:
    """{"devices": {device id: figures}, "cpu": figures or None, "events": n}."""
    events = memory_events(raw)
    steps = reference.step_windows(raw)
    ops = _cpu_ops(raw)
    by_key: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for e in events:
        by_key.setdefault((e["Device Type"], e["Device Id"]), []).append(e)
    devices, cpu = {}, None
    for (kind, device), members in sorted(by_key.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        result = _device(members, steps, ops)
        if kind == 0:
            cpu = result
        else:
            devices[device] = result
    return {"devices": devices, "cpu": cpu, "events": len(events)}


def _device(
    members: list[dict[str, Any]],
    steps: dict[int, tuple[int, int, str]],
    ops: dict[Any, list[tuple[int, int, str]]],
) -> dict[str, Any]:
    members = sorted(members, key=lambda e: (e["ts_ns"], e["position"]))
    if any(e["bytes_only"] for e in members):  # the level: the running sum of Bytes from 0
        running, rebuilt = 0, []
        for e in members:
            running += e["Bytes"]
            rebuilt.append({**e, "Total Allocated": running, "Total Reserved": 0})
        members = rebuilt
    start = members[0]["Total Allocated"] - members[0]["Bytes"]
    peak_index, highest = 0, members[0]["Total Allocated"]
    for i, e in enumerate(members):
        if e["Total Allocated"] > highest:
            peak_index, highest = i, e["Total Allocated"]
    live: dict[int, dict[str, Any]] = {}
    if highest >= start:
        for e in members[: peak_index + 1]:
            if type(e.get("Addr")) is not int:
                continue
            if e["Bytes"] > 0:
                live[e["Addr"]] = e
            else:
                live.pop(e["Addr"], None)
    else:
        peak_index = 0
    peak_ts = members[peak_index]["ts_ns"]
    return {
        "peak_allocated_bytes": max(highest, start),
        "peak_reserved_bytes": max(e["Total Reserved"] for e in members),
        "peak_ts_ns": peak_ts,
        "peak_step": next((n for n, (s, t, _) in steps.items() if s <= peak_ts <= t), None),
        "allocations": sum(1 for e in members if e["Bytes"] > 0),
        "frees": sum(1 for e in members if e["Bytes"] < 0),
        "start_allocated_bytes": start,
        "end_allocated_bytes": members[-1]["Total Allocated"],
        "holders": _holders(list(live.values()), ops),
        "steps": [_step(n, s, t, members, start) for n, (s, t, _) in steps.items()],
    }


def _holders(
    live: list[dict[str, Any]], ops: dict[Any, list[tuple[int, int, str]]]
) -> list[tuple[str, int, int]]:
    sums: dict[str, list[int]] = {}
    for e in live:
        name = _innermost(ops.get(e["thread"], []), e["ts_ns"])
        entry = sums.setdefault(name, [0, 0])
        entry[0] += e["Bytes"]
        entry[1] += 1
    return sorted(((n, b, c) for n, (b, c) in sums.items()), key=lambda h: (-h[1], h[0]))


def _innermost(ops: list[tuple[int, int, str]], t: int) -> str:
    """The op whose [start, end] holds t with the latest start, then the shortest, then the
    smallest name; "(no op)" when none does."""
    best = None
    for start, end, name in ops:
        if start <= t <= end:
            key = (-start, end - start, name)
            if best is None or key < best:
                best = key
    return "(no op)" if best is None else best[2]


def _step(
    number: int, start: int, end: int, members: list[dict[str, Any]], before: int
) -> tuple[int, int, int]:
    """(step, peak, growth): the level is ``before`` until the first event, then the
    Total Allocated of the last event at or before each moment."""
    level_at_start, level_at_end = before, before
    peak = None
    for e in members:
        if e["ts_ns"] < start:
            level_at_start = e["Total Allocated"]
        if e["ts_ns"] <= end:
            level_at_end = e["Total Allocated"]
        if start <= e["ts_ns"] <= end:
            peak = e["Total Allocated"] if peak is None else max(peak, e["Total Allocated"])
    highest = level_at_start if peak is None else max(peak, level_at_start)
    return (number, highest, level_at_end - level_at_start)


def _cpu_ops(raw: list[dict[str, Any]]) -> dict[Any, list[tuple[int, int, str]]]:
    """The CPU ops (not ProfilerStep#N) by thread (pid, tid): (start, end, name)."""
    ops: dict[Any, list[tuple[int, int, str]]] = {}
    for e in raw:
        if e.get("ph") != "X" or str(e.get("cat")).lower() not in OP_CATEGORIES:
            continue
        name = reference.event_name(e)
        if name.startswith("ProfilerStep#") or reference.ts_ns(e) is None:
            continue
        start, end = reference.interval_ns(e)
        ops.setdefault((e.get("pid"), e.get("tid")), []).append((start, end, name))
    return ops

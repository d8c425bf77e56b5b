"""Independent reference for the multi-rank figures, for tests only (tests/reference.py style:
whole files loaded with stdlib json, exact integer ns, plain loops). Never imports traceview.

A rank's communication kernels are its ``kernel`` events whose name contains nccl or rccl
(any case), in (start, file order) order, on the epoch clock (``baseTimeNanoseconds`` added
when the header has it). A kernel's metadata: its own args with a text ``Collective name``,
else (field by field for the counts) those of the CPU op that launched it: of the carrying
cpu_op/user_annotation events on the thread of the kernel's launch (the earliest runtime call
with its correlation) starting at or before the launch, the last to start (last in the file
among equal starts), if it is still running at the launch. A kernel with metadata and a
sequence number is collective (collective, group, seq); with metadata but no number, the k-th
of (collective, group) on the rank; without, the k-th of its name. Several kernels of one of
these on a rank are one instance, from the first start to the last end; a collective counts
when every rank of its group has it (the group size, else every rank of the run).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from fractions import Fraction
from pathlib import Path
from typing import Any

import reference

COMM = re.compile("nccl|rccl", re.IGNORECASE)


ELEMENT_BYTES = {"Float": 4, "BFloat16": 2, "Half": 2, "Double": 8, "Long": 8, "Int": 4,
                 "Short": 2, "Char": 1, "Byte": 1, "Bool": 1}  # fmt: skip
_COUNTS = ("In msg nelems", "Out msg nelems", "Group size", "Seq")
_CPU = {"cpu_op", "operator", "user_annotation"}
_RUNTIME = {"cuda_runtime", "cuda_driver", "runtime"}


def load_run(paths: dict[int, Path]) -> dict[int, list[dict[str, Any]]]:
    """rank → its kernel events as dicts with exact ns ``start`` and ``dur``, ``name`` and
    ``meta`` (None, or group, collective, dtype and the counts, −1 where absent)."""
    run = {}
    for rank, path in paths.items():
        header, events = reference.load_trace(path)
        base = header.get("baseTimeNanoseconds")
        base = base if isinstance(base, int) and not isinstance(base, bool) else 0
        launch_of = _launching_ops(events)
        kernels = []
        for e in reference.gpu_events(events, ("kernel",)):
            start = reference.ts_ns(e)
            if start is None:
                continue
            kernels.append(
                {"name": reference.event_name(e), "start": start + base,
                 "dur": reference.dur_ns(e), "meta": _meta(e, launch_of(e))}
            )  # fmt: skip
        run[rank] = kernels
    return run


def carries(e: dict[str, Any]) -> bool:
    args = e.get("args")
    return isinstance(args, dict) and isinstance(args.get("Collective name"), str)


def count(value: Any) -> int:
    """A count as the reference reads it: an int in [0, 2^63) or a text of ASCII digits, else −1."""
    if type(value) is int and 0 <= value < 2**63:
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdecimal():
        return int(value) if int(value) < 2**63 else -1
    return -1


def text(value: Any) -> str:
    """Text as is, an int as its digits, anything else ""."""
    return value if isinstance(value, str) else str(value) if type(value) is int else ""


def _meta(kernel: dict[str, Any], op: dict[str, Any] | None) -> dict[str, Any] | None:
    own = kernel["args"] if carries(kernel) else None
    if own is None and op is None:
        return None
    keyed = own if own is not None else op["args"]  # type: ignore[index]
    meta: dict[str, Any] = {
        "group": text(keyed.get("Process Group Name")),
        "collective": text(keyed.get("Collective name")),
        "dtype": text(keyed.get("dtype")),
    }
    for field in _COUNTS:
        value = count(own.get(field)) if own is not None else -1
        if value < 0 and op is not None:
            value = count(op["args"].get(field))
        meta[field] = value
    return meta


def _launching_ops(events: list[dict[str, Any]]) -> Any:
    """kernel → the carrying CPU op that launched it, or None."""
    launches: dict[Any, tuple[int, int, dict[str, Any]]] = {}
    ops: dict[tuple[Any, Any], list[tuple[int, int, dict[str, Any]]]] = defaultdict(list)
    for i, e in enumerate(events):
        ts = reference.ts_ns(e)
        if e.get("ph") != "X" or ts is None:
            continue
        cat = str(e.get("cat")).lower()
        if cat in _RUNTIME:
            c = (e.get("args") or {}).get("correlation")
            if c is not None and (c not in launches or (ts, i) < launches[c][:2]):
                launches[c] = (ts, i, e)
        elif cat in _CPU and carries(e) and not reference.event_name(e).startswith("Profiler"):
            ops[(e.get("pid"), e.get("tid"))].append((ts, i, e))

    def launching(kernel: dict[str, Any]) -> dict[str, Any] | None:
        found = launches.get((kernel.get("args") or {}).get("correlation"))
        if found is None:
            return None
        at, _, call = found
        before = [o for o in ops[(call.get("pid"), call.get("tid"))] if o[0] <= at]
        if not before:
            return None
        op = max(before, key=lambda o: (o[0], o[1]))[2]
        return op if reference.interval_ns(op)[1] >= at else None

    return launching


def size_bytes(meta: dict[str, Any] | None) -> int:
    """max(in, out) × the dtype's size, −1 when unknown."""
    if meta is None or meta["dtype"] not in ELEMENT_BYTES:
        return -1
    n = max(meta["In msg nelems"], meta["Out msg nelems"])
    return n * ELEMENT_BYTES[meta["dtype"]] if n >= 0 else -1


def bus_factor(collective: str, n: int) -> float | None:
    plain = "".join(c for c in collective.lower() if "a" <= c <= "z")
    for prefix, factor in (("allreduce", 2 * (n - 1) / n), ("allgather", (n - 1) / n),
                           ("reducescatter", (n - 1) / n), ("alltoall", (n - 1) / n),
                           ("broadcast", 1.0), ("reduce", 1.0)):  # fmt: skip
        if plain.startswith(prefix):
            return factor
    return None


def collectives(run: dict[int, list[dict[str, Any]]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """(name, group, matched_by, index) → skew_ns, last, latency_ns, bytes, ranks, algbw and
    busbw (GB/s, None when unknown) for every collective every rank of its group ran."""
    instances: dict[tuple[Any, ...], dict[int, dict[str, Any]]] = defaultdict(dict)
    for rank, kernels in run.items():
        comm = [(k["start"], i, k) for i, k in enumerate(kernels) if COMM.search(k["name"])]
        seen: dict[tuple[Any, ...], int] = defaultdict(int)
        for _, _, k in sorted(comm, key=lambda c: (c[0], c[1])):
            meta = k["meta"]
            if meta is None:
                label: tuple[Any, ...] = (k["name"], None, "name")
            else:
                by = "seq" if meta["Seq"] >= 0 else "order"
                label = (meta["collective"], meta["group"], by)
            if label[2] == "seq":
                key = (*label, meta["Seq"])
            else:
                key = (*label, seen[label])
                seen[label] += 1
            end = k["start"] + k["dur"]
            size = size_bytes(meta)
            members = meta["Group size"] if meta is not None else -1
            had = instances[key].get(rank)
            if had is not None:
                start, end = min(had["start"], k["start"]), max(had["end"], end)
                size, members = max(had["bytes"], size), max(had["members"], members)
            else:
                start = k["start"]
            instances[key][rank] = {"start": start, "end": end, "bytes": size, "members": members}
    out = {}
    for key, by_rank in instances.items():
        members = max(i["members"] for i in by_rank.values())
        if len(by_rank) != (members if members > 0 else len(run)):
            continue
        latest = max(i["start"] for i in by_rank.values())
        latency = min(i["end"] - i["start"] for i in by_rank.values())
        size = max(i["bytes"] for i in by_rank.values())
        algbw = size / latency if size >= 0 and latency > 0 else None
        factor = bus_factor(key[0], len(by_rank)) if key[2] != "name" else None
        out[key] = {
            "skew_ns": latest - min(i["start"] for i in by_rank.values()),
            "last": min(r for r, i in by_rank.items() if i["start"] == latest),
            "latency_ns": latency,
            "bytes": size if size >= 0 else None,
            "ranks": len(by_rank),
            "algbw_gbps": algbw,
            "busbw_gbps": None if algbw is None or factor is None else algbw * factor,
            "starts": {r: i["start"] for r, i in by_rank.items()},
        }
    return out


def waits(run: dict[int, list[dict[str, Any]]]) -> dict[int, tuple[int, int]]:
    """rank → (times_last, wait_ns)."""
    table = collectives(run)
    out = {}
    for rank in run:
        last = sum(1 for c in table.values() if c["last"] == rank)
        wait = sum(
            max(c["starts"].values()) - c["starts"][rank]
            for c in table.values()
            if rank in c["starts"]
        )
        out[rank] = (last, wait)
    return out


def rollup(run: dict[int, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per kernel name over every instance of every rank: count, total, min, max, std (ns),
    exact nearest-rank p50/p90/p99, how many ranks ran it, min/max of per-rank totals."""
    durations: dict[str, list[int]] = defaultdict(list)
    per_rank: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for rank, kernels in run.items():
        for k in kernels:
            durations[k["name"]].append(k["dur"])
            per_rank[k["name"]][rank] += k["dur"]
    out = {}
    for name, values in durations.items():
        ordered = sorted(values)
        n = len(values)
        mean = Fraction(sum(values), n)
        var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else Fraction(0)
        totals = per_rank[name]
        out[name] = {
            "count": n,
            "total_ns": sum(values),
            "min_ns": ordered[0],
            "max_ns": ordered[-1],
            "std_ns": math.sqrt(var),
            **{f"p{p}_ns": reference.nearest_rank(ordered, p) for p in (50, 90, 99)},
            "ranks": len(totals),
            "rank_min_ns": min(totals.values()),
            "rank_max_ns": max(totals.values()),
        }
    return out


def step_spread(paths: dict[int, Path]) -> dict[int, dict[str, int]]:
    """Per step number: ranks, min/max CPU duration with their rank (smallest on ties) and
    the nearest-rank median over the ranks that have the step."""
    by_step: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for rank, path in paths.items():
        _, events = reference.load_trace(path)
        for step, (start, end, _) in reference.step_windows(events).items():
            by_step[step].append((end - start, rank))
    out = {}
    for step, values in by_step.items():
        values.sort()
        high = max(v for v, _ in values)
        out[step] = {
            "ranks": len(values),
            "min_ns": values[0][0],
            "min_rank": values[0][1],
            "median_ns": reference.nearest_rank([v for v, _ in values], 50),
            "max_ns": high,
            "max_rank": min(r for v, r in values if v == high),
        }
    return out


def gap_lengths(paths: dict[int, Path]) -> dict[int, tuple[list[int], int]]:
    """rank → (the lengths of its device gaps over all devices, Σ host wait), all GPU
    activity busy."""
    out = {}
    for rank, path in paths.items():
        _, events = reference.load_trace(path)
        lengths, wait = [], 0
        for figures in reference.device_gaps(events).values():
            for gap in figures["gaps"]:
                lengths.append(gap["end_ns"] - gap["start_ns"])
                wait += gap["host_wait_ns"]
        out[rank] = (lengths, wait)
    return out

"""Independent reference for the multi-rank figures, for tests only (tests/reference.py style:
whole files loaded with stdlib json, exact integer ns, plain loops). Never imports traceview.

A rank's communication kernels are its ``kernel`` events whose name contains nccl or rccl
(any case), in (start, file order) order, on the epoch clock (``baseTimeNanoseconds`` added
when the header has it). The k-th of one name on every rank is one collective.
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


def load_run(paths: dict[int, Path]) -> dict[int, list[dict[str, Any]]]:
    """rank → its kernel events as dicts with exact ns ``start`` and ``dur`` and ``name``."""
    run = {}
    for rank, path in paths.items():
        header, events = reference.load_trace(path)
        base = header.get("baseTimeNanoseconds")
        base = base if isinstance(base, int) and not isinstance(base, bool) else 0
        kernels = []
        for e in reference.gpu_events(events, ("kernel",)):
            start = reference.ts_ns(e)
            if start is None:
                continue
            kernels.append(
                {"name": reference.event_name(e), "start": start + base, "dur": reference.dur_ns(e)}
            )
        run[rank] = kernels
    return run


def collectives(run: dict[int, list[dict[str, Any]]]) -> dict[tuple[str, int], dict[str, Any]]:
    """(name, k) → skew_ns, last, latency_ns for every collective present on all ranks."""
    instances: dict[tuple[str, int], dict[int, dict[str, Any]]] = defaultdict(dict)
    for rank, kernels in run.items():
        comm = [(k["start"], i, k) for i, k in enumerate(kernels) if COMM.search(k["name"])]
        seen: dict[str, int] = defaultdict(int)
        for _, _, k in sorted(comm, key=lambda c: (c[0], c[1])):
            instances[(k["name"], seen[k["name"]])][rank] = k
            seen[k["name"]] += 1
    out = {}
    for key, by_rank in instances.items():
        if len(by_rank) != len(run):
            continue
        latest = max(k["start"] for k in by_rank.values())
        out[key] = {
            "skew_ns": latest - min(k["start"] for k in by_rank.values()),
            "last": min(r for r, k in by_rank.items() if k["start"] == latest),
            "latency_ns": min(k["dur"] for k in by_rank.values()),
            "starts": {r: k["start"] for r, k in by_rank.items()},
        }
    return out


def waits(run: dict[int, list[dict[str, Any]]]) -> dict[int, tuple[int, int]]:
    """rank → (times_last, wait_ns)."""
    table = collectives(run)
    out = {}
    for rank in run:
        last = sum(1 for c in table.values() if c["last"] == rank)
        wait = sum(max(c["starts"].values()) - c["starts"][rank] for c in table.values())
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

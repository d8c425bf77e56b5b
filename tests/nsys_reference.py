"""Straight SQL over an Nsight Systems export, with the stdlib only: the independent side of
the nsys tests. Deliberately simple (a Python loop for the busy union); integers in ns."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path
from typing import Any

GPU_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
)


def connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def tables(db: sqlite3.Connection) -> set[str]:
    return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def kernel_stats(path: Path) -> dict[str, tuple[int, int, int, int]]:
    """Per demangled kernel name: (count, total, min, max) of end − start, in ns."""
    db = connect(path)
    rows = db.execute(
        "SELECT s.value, count(*), sum(k.end - k.start), min(k.end - k.start), "
        "max(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
        "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value"
    ).fetchall()
    db.close()
    return {name: (n, total, lo, hi) for name, n, total, lo, hi in rows}


def device_busy(path: Path) -> dict[int, dict[str, Any]]:
    """Per deviceId, over kernels, copies and memsets with end > start: window, busy (the
    length of the union of [start, end]) and the gaps (holes between the merged intervals)."""
    db = connect(path)
    have = tables(db)
    spans: dict[int, list[tuple[int, int]]] = {}
    for table in GPU_TABLES:
        if table in have:
            sql = f"SELECT deviceId, start, end FROM {table} WHERE end > start"
            for device, start, end in db.execute(sql):
                spans.setdefault(device, []).append((start, end))
    db.close()
    out = {}
    for device, intervals in spans.items():
        intervals.sort()
        merged = [list(intervals[0])]
        for start, end in intervals[1:]:
            if start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        gaps = [b[0] - a[1] for a, b in itertools.pairwise(merged)]
        out[device] = {
            "window": merged[-1][1] - merged[0][0],
            "busy": sum(end - start for start, end in merged),
            "gaps": gaps,
        }
    return out


def step_kernels(path: Path) -> dict[int, tuple[int, int]]:
    """Per ProfilerStep#N NVTX range: (kernels, their total time in ns), a kernel counted
    in the step whose range holds the start of its launch (the earliest runtime call with
    its correlationId), or its own start when there is none."""
    db = connect(path)
    rows = db.execute(
        """
        WITH launch AS (
            SELECT correlationId AS c, min(start) AS t FROM CUPTI_ACTIVITY_KIND_RUNTIME
            GROUP BY correlationId),
        k AS (
            SELECT k.start, k.end, coalesce(l.t, k.start) AS at FROM CUPTI_ACTIVITY_KIND_KERNEL k
            LEFT JOIN launch l ON l.c = k.correlationId),
        step AS (
            SELECT n.start, n.end, coalesce(n.text, s.value) AS text FROM NVTX_EVENTS n
            LEFT JOIN StringIds s ON s.id = n.textId WHERE n.eventType IN (59, 60))
        SELECT step.text, count(*), sum(k.end - k.start) FROM step
        JOIN k ON k.at BETWEEN step.start AND step.end
        WHERE step.text GLOB 'ProfilerStep#[0-9]*' GROUP BY step.text
        """
    ).fetchall()
    db.close()
    return {int(text.split("#")[1]): (n, total) for text, n, total in rows}

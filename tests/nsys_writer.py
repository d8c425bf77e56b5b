"""A small writer of Nsight Systems-schema SQLite files, for tests and benchmarks.

``kineto_to_nsys`` turns a kineto trace into the tables an ``nsys export --type sqlite``
would hold for the same activity (table and column names, enums and the serialized
globalTid as nsys writes them; only the columns traceview reads, plus a few neighbours):
kernels, copies, memsets, runtime calls (named with nsys's ``_v3020`` version suffix), CPU
ops and ``ProfilerStep#N`` annotations as NVTX push/pop ranges (every other one by
``textId``), and the GPUs of ``deviceProperties``. Like nsys, it creates a table only when it
has rows. stdlib only: it must not share code with what it checks.
"""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from collections.abc import Iterable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

COPY_KINDS = ["UNKNOWN", "HTOD", "DTOH", "HTOA", "ATOH", "ATOA", "ATOD", "DTOA", "DTOD",
              "HTOH", "PTOP", "UVM_HTOD", "UVM_DTOH", "UVM_DTOD"]  # fmt: skip
MEM_KINDS = ["PAGEABLE", "PINNED", "DEVICE", "ARRAY", "MANAGED", "DEVICE_STATIC",
             "MANAGED_STATIC", "UNKNOWN"]  # fmt: skip
PUSH_POP = 59
VM_BITS = 1 << 48  # the high part of a real serialized globalTid (a VM/host id)

SCHEMA = {
    "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
        "contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, "
        "globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, "
        "registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, blockX INTEGER NOT NULL"
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
        "contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, "
        "globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, "
        "srcKind INTEGER, dstKind INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, "
        "contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, "
        "globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL, memKind INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
        "globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, "
        "returnValue INTEGER NOT NULL"
    ),
    "NVTX_EVENTS": (
        "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, "
        "text TEXT, globalTid INTEGER, textId INTEGER"
    ),
    "ENUM_CUDA_MEMCPY_OPER": "id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT",
    "ENUM_CUDA_MEM_KIND": "id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT",
    "TARGET_INFO_GPU": (
        "vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, totalMemory INTEGER, "
        "memoryBandwidth INTEGER, clockRate INTEGER, smCount INTEGER"
    ),
    "TARGET_INFO_SESSION_START_TIME": "utcEpochNs INTEGER, utcTime TEXT",
    "META_DATA_EXPORT": "name TEXT NOT NULL, value TEXT",
}


def ns(value: Any) -> int:
    """A kineto µs value (int or exact decimal) as integer ns."""
    return int(Decimal(str(value)) * 1000)


def load_kineto(path: Path) -> dict[str, Any]:
    """A kineto trace (plain or gzip) with floats kept as exact decimals."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data, parse_float=Decimal)
    return doc if isinstance(doc, dict) else {"traceEvents": doc}


class Writer:
    """Rows in nsys's layout, with strings consolidated in StringIds."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path)
        self.db.execute("PRAGMA journal_mode = DELETE")
        self._ids: dict[str, int] = {}
        self._made: set[str] = set()

    def sid(self, text: str) -> int:
        found = self._ids.get(text)
        if found is None:
            found = self._ids[text] = len(self._ids)
            self.insert("StringIds", [(found, text)])
        return found

    def insert(self, table: str, rows: Iterable[tuple[Any, ...]]) -> None:
        rows = list(rows)
        if not rows:
            return
        if table not in self._made:
            self.db.execute(f"CREATE TABLE {table} ({SCHEMA[table]})")
            self._made.add(table)
        marks = ",".join("?" * len(rows[0]))
        self.db.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)

    def enums(self) -> None:
        self.insert(
            "ENUM_CUDA_MEMCPY_OPER",
            [(i, f"CUDA_MEMCPY_KIND_{k}", k) for i, k in enumerate(COPY_KINDS)],
        )
        self.insert(
            "ENUM_CUDA_MEM_KIND",
            [(i, f"CUDA_MEMOPR_MEMORY_KIND_{k}", k.title()) for i, k in enumerate(MEM_KINDS)],
        )

    def close(self) -> None:
        self.db.commit()
        self.db.close()


def gtid(pid: int, tid: int) -> int:
    """nsys's serialized globalTid of a thread."""
    return VM_BITS | (pid << 24) | tid


def kineto_to_nsys(trace: dict[str, Any], out: Path) -> None:
    """Write the activity of a kineto trace as an nsys export at ``out``."""
    w = Writer(out)
    w.sid("<reserved>")
    w.enums()
    events = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    by_cat: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        by_cat.setdefault(str(e.get("cat", "")).lower(), []).append(e)
    w.insert("CUPTI_ACTIVITY_KIND_KERNEL", _kernels(w, by_cat.get("kernel", [])))
    w.insert("CUPTI_ACTIVITY_KIND_MEMCPY", _copies(by_cat.get("gpu_memcpy", [])))
    w.insert("CUPTI_ACTIVITY_KIND_MEMSET", _memsets(by_cat.get("gpu_memset", [])))
    calls = by_cat.get("cuda_runtime", []) + by_cat.get("cuda_driver", [])
    w.insert("CUPTI_ACTIVITY_KIND_RUNTIME", _runtime(w, calls))
    ops = by_cat.get("cpu_op", []) + by_cat.get("user_annotation", [])
    w.insert("NVTX_EVENTS", _ranges(w, ops))
    props = trace.get("deviceProperties") or []
    w.insert(
        "TARGET_INFO_GPU",
        [(0, p["id"], p["name"], p.get("totalGlobalMem"), None, None, p.get("numSms"))
         for p in props],
    )  # fmt: skip
    base = trace.get("baseTimeNanoseconds")
    if isinstance(base, int):
        w.insert("TARGET_INFO_SESSION_START_TIME", [(base, None)])
    w.insert("META_DATA_EXPORT", [("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems")])
    w.close()


def _kernels(w: Writer, events: list[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
    for e in events:
        a = e["args"]
        start = ns(e["ts"])
        name = w.sid(e["name"])
        yield (start, start + ns(e["dur"]), a["device"], 1, a["stream"], a.get("correlation"),
               e["pid"], name, name, 32, 1, 128)  # fmt: skip


_COPY = re.compile(r"Memcpy (\w+) \((.+) -> (.+)\)")


def _memory(word: str) -> int:
    return MEM_KINDS.index(word.upper().replace(" ", "_"))


def _copies(events: list[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
    for e in events:
        a = e["args"]
        match = _COPY.fullmatch(e["name"])
        assert match, e["name"]
        kind = COPY_KINDS.index(match[1].upper())
        start = ns(e["ts"])
        yield (start, start + ns(e["dur"]), a["device"], 1, a["stream"], a.get("correlation"),
               e["pid"], a.get("bytes", 0), kind, _memory(match[2]), _memory(match[3]))  # fmt: skip


def _memsets(events: list[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
    for e in events:
        a = e["args"]
        kind = _memory(e["name"].removeprefix("Memset (").removesuffix(")"))
        start = ns(e["ts"])
        yield (start, start + ns(e["dur"]), a["device"], 1, a["stream"], a.get("correlation"),
               e["pid"], 0, a.get("bytes", 0), kind)  # fmt: skip


def _runtime(w: Writer, events: list[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
    for e in events:
        start = ns(e["ts"])
        corr = (e.get("args") or {}).get("correlation")
        yield (start, start + ns(e["dur"]), 0, gtid(e["pid"], e["tid"]), corr,
               w.sid(e["name"] + "_v3020"), 0)  # fmt: skip


def _ranges(w: Writer, events: list[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
    for i, e in enumerate(events):
        start = ns(e["ts"])
        text, text_id = (e["name"], None) if i % 2 else (None, w.sid(e["name"]))
        yield (start, start + ns(e["dur"]), PUSH_POP, None, text, gtid(e["pid"], e["tid"]),
               text_id)  # fmt: skip

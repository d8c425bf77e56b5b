"""Stage 2 for Nsight Systems exports: SQLite rows → the same TraceEvents as a kineto trace.

Once an export is turned into TraceEvents every analysis, renderer and the cache work on it
unchanged. The mapping (defined in docs/metrics.md, "Nsight Systems exports"):

- ``CUPTI_ACTIVITY_KIND_KERNEL`` → kernels: name = StringIds value of ``demangledName``,
  stream = (``deviceId``, ``streamId``), ts = ``start``, dur = ``end − start``, correlation =
  ``correlationId``.
- ``_MEMCPY`` / ``_MEMSET`` → memcpy / memset, named as kineto names them.
- ``CUPTI_ACTIVITY_KIND_RUNTIME`` → runtime calls (launch correlation) and CPU rows; thread
  = (pid, tid) of ``globalTid``; name = StringIds value of ``nameId`` without nsys's API
  version suffix (``cudaLaunchKernel_v7000`` → ``cudaLaunchKernel``, kineto's name).
- ``NVTX_EVENTS`` push/pop (59) and start/end (60) ranges → CPU ops; ``ProfilerStep#N``
  ranges → steps, by kineto's rule.

Times stay as nsys writes them: integer ns from the start of the session.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from traceview.columns import batch, cpu_rows, parallel
from traceview.columns.collect import EventCollector
from traceview.columns.cpu_rows import SpillFile
from traceview.columns.intern import Interner
from traceview.columns.launches import LAUNCH_FIELDS
from traceview.columns.model import STEP_PREFIX, StepWindow, TraceEvents
from traceview.columns.schema import KERNEL, MEMCPY, MEMSET
from traceview.errors import TraceviewError
from traceview.read.nsys import Export, text_of
from traceview.read.reader import ReadStats, SplitFailed

KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPYS = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSETS = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX = "NVTX_EVENTS"
GPU_TABLES = (KERNELS, MEMCPYS, MEMSETS)
SPLIT_MIN_ROWS = 1_000_000
NVTX_RANGES = (59, 60)  # NvtxPushPopRange, NvtxStartEndRange
BAD_ROW = "events skipped: ts or dur not a finite number, or dur negative"  # kineto's words
NO_END = "NVTX ranges without an end (left out)"
NO_TEXT = "(NVTX range without text)"
_NULL = -(2**63)  # stands for SQL NULL in integer columns
_VERSION = re.compile(r"_v\d+$")
# kineto's words for CUDA memcpy kinds (libkineto cupti_strings.cpp), by nsys enum symbol.
_COPY_WORDS = {
    "HTOD": "HtoD", "DTOH": "DtoH", "HTOA": "HtoA", "ATOH": "AtoH", "ATOA": "AtoA",
    "ATOD": "AtoD", "DTOA": "DtoA", "DTOD": "DtoD", "HTOH": "HtoH", "PTOP": "PtoP",
    "UVM_HTOD": "UVM HtoD", "UVM_DTOH": "UVM DtoH", "UVM_DTOD": "UVM DtoD",
}  # fmt: skip
# ENUM_CUDA_MEMCPY_OPER and ENUM_CUDA_MEM_KIND as nsys 2021-2026 write them, for an
# export without the enum tables.
_COPY_ENUM = ("UNKNOWN", "HTOD", "DTOH", "HTOA", "ATOH", "ATOA", "ATOD", "DTOA", "DTOD",
              "HTOH", "PTOP", "UVM_HTOD", "UVM_DTOH", "UVM_DTOD")  # fmt: skip
_MEM_ENUM = ("PAGEABLE", "PINNED", "DEVICE", "ARRAY", "MANAGED", "DEVICE_STATIC",
             "MANAGED_STATIC", "UNKNOWN")  # fmt: skip


def collect_nsys(
    path: Path, keep_cpu: bool = False, on_progress: Callable[[int], None] | None = None
) -> TraceEvents:
    """Read an nsys SQLite export into TraceEvents (CPU rows if asked).

    With many runtime calls and NVTX ranges, a forked worker reads those tables while this
    process reads the GPU ones (SQLite's rows as Python objects are most of the cost, and
    need the GIL); the parts merge as in traceview.columns.parallel. If the worker fails for any
    reason but bad data, this process reads its tables itself: the result is the same.
    """
    with Export(path) as export:  # closed before a fork: a connection must not cross one
        header = header_of(export)
        host_rows = export.row_estimate(RUNTIME) + export.row_estimate(NVTX)
    split = (os.cpu_count() or 1) > 1 and host_rows >= _split_min_rows()
    worker = _HostWorker(path, keep_cpu) if split else None
    try:
        with Export(path) as export:
            reading = _Reading(export, keep_cpu, on_progress, host=worker is None)
            reading.gpu(KERNELS, KERNEL)
            reading.gpu(MEMCPYS, MEMCPY)
            reading.gpu(MEMSETS, MEMSET)
            part = worker.result() if worker is not None else None
            if part is None:
                reading.runtime()
                reading.nvtx()
            else:
                reading.collector.absorb_before(part)
                reading.stats.events += part.read.events
                reading.stats.chunks += part.read.chunks
            size = export.size_bytes
    finally:
        if worker is not None:
            worker.stop()
    return reading.collector.finish_as(str(path), size, header, reading.stats)


def _split_min_rows() -> int:
    """Runtime + NVTX rows from which a worker reads them (env override for tests)."""
    from traceview.parsing import env_count

    return env_count("TRACEVIEW_NSYS_SPLIT_MIN_ROWS", SPLIT_MIN_ROWS)


class _HostWorker:
    """A forked process reading the runtime and NVTX tables into a TraceEvents part."""

    def __init__(self, path: Path, keep_cpu: bool) -> None:
        context = multiprocessing.get_context("fork")
        self._receiver, sender = context.Pipe(duplex=False)
        self._memfd = parallel.new_memfd()
        self._spill = SpillFile.made_now() if keep_cpu else None  # the worker's CPU rows
        args = (sender, path, keep_cpu, self._memfd, self._spill)
        self._process = context.Process(target=_read_host_tables, args=args, daemon=True)
        self._started = time.monotonic()
        self._process.start()
        sender.close()

    def result(self) -> TraceEvents | None:
        """The worker's part; None if it could not give one (a TraceviewError is raised) or
        has not in time (forked.patience: it is stopped then)."""
        try:
            return parallel._receive(self._receiver, self._memfd, self._spill, self._started)
        except SplitFailed:
            return None

    def stop(self) -> None:
        self._receiver.close()
        if self._memfd is not None:
            os.close(self._memfd)
        if self._process.is_alive():  # not wanted any more (this process failed)
            self._process.kill()
        self._process.join()


def _read_host_tables(
    conn: Connection, path: Path, keep_cpu: bool, memfd: int | None, spill: SpillFile | None
) -> None:
    """In the worker: the runtime and NVTX tables, sent back as a TraceEvents part."""
    try:
        with Export(path) as export:
            reading = _Reading(export, keep_cpu, None, spill=spill)
            reading.runtime()
            reading.nvtx()
            part = reading.collector.finish_as(str(path), export.size_bytes, {}, reading.stats)
    except TraceviewError as e:
        conn.send(("error", e.message))
        return
    except Exception:  # the main process reads the tables itself and gets the answer
        conn.send(("split failed", None))
        return
    parallel._send(conn, part, memfd)


class _Reading:
    """One pass over an export's tables into an EventCollector."""

    def __init__(
        self,
        export: Export,
        keep_cpu: bool,
        on_progress: Callable[[int], None] | None,
        host: bool = True,
        spill: SpillFile | None = None,
    ) -> None:
        """``host``: the runtime and NVTX tables are read here too (for the progress)."""
        self.export = export
        self.keep_cpu = keep_cpu
        self.collector = EventCollector(keep_cpu, spill)
        self.stats = ReadStats()
        self._strings: dict[tuple[int, bool], int] = {}  # (StringIds id, strip) → name id
        self._on_progress = on_progress
        tables = (KERNELS, MEMCPYS, MEMSETS, RUNTIME, NVTX) if host else GPU_TABLES
        self._total = max(1, sum(export.row_estimate(t) for t in tables))

    def gpu(self, table: str, kind: int) -> None:
        """GPU activity rows of one table."""
        have = self.export.columns(table)
        if not have:
            return
        detail = {KERNEL: _first(have, "demangledName", "shortName", "mangledName"),
                  MEMCPY: ", ".join(_or(have, c, -1) for c in ("copyKind", "srcKind", "dstKind")),
                  MEMSET: _first(have, "memKind", "memoryKind")}[kind]  # fmt: skip
        sql = (
            f"SELECT {_time(have, 'start')}, {_time(have, 'end')}, {_or(have, 'deviceId', 0)}, "
            f"{_or(have, 'streamId', 0)}, {_or(have, 'correlationId', -1)}, "
            f"{_launch_columns(have, kind)}, {detail} "
            f'FROM "{table}" ORDER BY rowid'
        )
        names = self._gpu_namer(kind)
        launches = self.collector.launches
        for rows in self.export.int_batches(sql, table):
            ts, dur, ok = self._times(rows[:, 0], rows[:, 1])
            rows = rows[ok]
            streams = _interned(rows[:, 2:4], self.collector.streams, lambda k: (k[0], k[1]))
            self.collector.add_columns(
                gpu=(
                    np.full(len(rows), kind, dtype=np.int8),
                    names(rows[:, 5 + _LAUNCH_WIDTH :]),
                    streams,
                    ts[ok],
                    dur[ok],
                    np.maximum(rows[:, 4], -1),  # none: −1, as for kineto
                    _interned(rows[:, 5 : 5 + _LAUNCH_WIDTH], launches, launch_of),
                )
            )
            self._read(len(ok))

    def _gpu_namer(self, kind: int) -> Callable[[np.ndarray], np.ndarray]:
        """Names of GPU rows from their last columns (ids of the collector's names)."""
        if kind == KERNEL:
            return lambda detail: self._string_names(detail[:, 0], strip=False)
        interner = self.collector.names
        if kind == MEMCPY:
            copy = _enum(self.export, "ENUM_CUDA_MEMCPY_OPER", _COPY_ENUM)
            mem = _enum(self.export, "ENUM_CUDA_MEM_KIND", _MEM_ENUM)
            return lambda detail: _interned(
                detail, interner, lambda k: memcpy_name(k[0], k[1], k[2], copy, mem)
            )
        mem = _enum(self.export, "ENUM_CUDA_MEM_KIND", _MEM_ENUM)
        return lambda detail: _interned(detail, interner, lambda k: memset_name(k[0], mem))

    def runtime(self) -> None:
        """Runtime and driver API calls: launch correlation, and CPU rows when kept."""
        have = self.export.columns(RUNTIME)
        if not have:
            return
        sql = (
            f"SELECT {_time(have, 'start')}, {_time(have, 'end')}, "
            f"{_or(have, 'correlationId', -1)}, {_or(have, 'globalTid', 0)}, "
            f"{_or(have, 'nameId', -1)} FROM {RUNTIME} ORDER BY rowid"
        )
        for rows in self.export.int_batches(sql, RUNTIME):
            ts, dur, ok = self._times(rows[:, 0], rows[:, 1])
            rows, ts, dur = rows[ok], ts[ok], dur[ok]
            self.collector.add_columns(runtime=(rows[:, 2], ts, dur))
            if self.keep_cpu:
                corr = np.where(rows[:, 2] < 0, cpu_rows.UNCORRELATED, rows[:, 2])
                names = self._string_names(rows[:, 4], strip=True)
                self.collector.add_columns(cpu=self._cpu(rows[:, 3], ts, ts + dur, names, corr))
            self._read(len(ok))

    def nvtx(self) -> None:
        """NVTX ranges: ProfilerStep#N windows, and CPU ops when kept."""
        have = self.export.columns(NVTX)
        if not have:
            return
        kinds = ", ".join(map(str, NVTX_RANGES))
        where = f"WHERE eventType IN ({kinds})" if "eventType" in have else ""
        text = '"text"' if "text" in have else "NULL"
        sql = (
            f"SELECT {_time(have, 'start')}, {_time(have, 'end')}, {_or(have, 'globalTid', 0)}, "
            f"{_or(have, 'textId', _NULL)}, {text} FROM {NVTX} {where} ORDER BY rowid"
        )
        for rows, texts in self.export.text_batches(sql, NVTX):
            names = self._nvtx_names(rows[:, 3], texts)
            is_step = np.array([n.startswith(STEP_PREFIX) for n in names], dtype=bool)
            kept = is_step | self.keep_cpu  # ops are looked at only when CPU rows are kept
            open_ended = rows[:, 1] == _NULL
            _add(self.collector.quality, NO_END, open_ended & kept)
            ts, dur, ok = self._times(rows[:, 0], rows[:, 1], counted=kept & ~open_ended)
            self.collector.add_columns(steps=_steps(names, ts, dur, ok & is_step))
            if self.keep_cpu:
                _add(self.collector.cpu_quality, NO_END, open_ended & ~is_step)
                _add(self.collector.cpu_quality, BAD_ROW, ~ok & ~open_ended & ~is_step)
                ops = np.flatnonzero(ok & ~is_step)
                name_ids = self.collector.names.ids_of([names[i] for i in ops])
                op = np.full(len(ops), cpu_rows.OP, dtype=np.int64)
                cpu = self._cpu(rows[ops, 2], ts[ops], ts[ops] + dur[ops], name_ids, op)
                self.collector.add_columns(cpu=cpu)
            self._read(len(rows))

    def _nvtx_names(self, text_ids: np.ndarray, texts: list[Any]) -> list[str]:
        """A range's text: ``text``, else the StringIds value of ``textId`` (looked up once
        per batch for the distinct ids), else NO_TEXT."""
        wanted = {int(i) for i, t in zip(text_ids.tolist(), texts, strict=True) if t is None}
        wanted.discard(_NULL)
        found = self.export.strings(sorted(wanted)) if wanted else {}
        return [
            text_of(t) if t is not None else found.get(int(i), NO_TEXT)
            for i, t in zip(text_ids.tolist(), texts, strict=True)
        ]

    def _times(
        self, start: np.ndarray, end: np.ndarray, counted: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ts, dur, ok): rows with a start and an end within kineto's limits (|ns| < 2^62)
        and end ≥ start are ok; the others are counted (those in ``counted``) and skipped."""
        limit = batch.NS_LIMIT
        ok = (np.abs(start) < limit) & (np.abs(end) < limit) & (start != _NULL) & (end != _NULL)
        dur = np.where(ok, end - np.where(ok, start, 0), 0)
        ok &= dur >= 0
        _add(self.collector.quality, BAD_ROW, ~ok if counted is None else ~ok & counted)
        return start, dur, ok

    def _string_names(self, ids: np.ndarray, strip: bool) -> np.ndarray:
        """Name ids for StringIds ids (runtime names with ``strip``: no version suffix)."""
        uniq, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        known = self._strings
        new = [
            int(s) for s in uniq[np.argsort(first, kind="stable")] if (int(s), strip) not in known
        ]
        found = self.export.strings(new) if new else {}
        for sid in new:
            text = found.get(sid, f"<StringIds {sid} missing>")
            known[sid, strip] = self.collector.names.id(_VERSION.sub("", text) if strip else text)
        mapped = np.array([known[int(s), strip] for s in uniq], dtype=np.int32)
        return mapped[inverse.reshape(-1)]

    def _cpu(
        self, gtid: np.ndarray, ts: np.ndarray, end: np.ndarray, names: np.ndarray, corr: np.ndarray
    ) -> np.ndarray:
        threads = _interned(gtid[:, None], self.collector.threads, lambda k: thread_of(k[0]))
        return cpu_rows.rows(thread=threads, name=names, ts=ts, end=end, correlation=corr)

    def _read(self, rows: int) -> None:
        self.stats.events += rows
        self.stats.chunks += 1
        if self._on_progress is not None:
            done = min(self.stats.events, self._total)
            self._on_progress(self.export.size_bytes * done // self._total)


def thread_of(global_tid: int) -> tuple[int, int]:
    """(pid, tid) of an nsys serialized globalTid."""
    return (global_tid >> 24) & 0xFFFFFF, global_tid & 0xFFFFFF


def memcpy_name(kind: int, src: int, dst: int, copy: dict[int, str], mem: dict[int, str]) -> str:
    """kineto's name of a copy, e.g. ``Memcpy HtoD (Pageable -> Device)``."""
    word = _COPY_WORDS.get(copy.get(kind, ""), "<unknown>")
    return f"Memcpy {word} ({_memory(src, mem)} -> {_memory(dst, mem)})"


def memset_name(kind: int, mem: dict[int, str]) -> str:
    """kineto's name of a memset, e.g. ``Memset (Device)``."""
    return f"Memset ({_memory(kind, mem)})"


def _memory(kind: int, mem: dict[int, str]) -> str:
    """``DEVICE_STATIC`` → ``Device Static`` (kineto's words); unknown ids → ``Unknown``."""
    return mem.get(kind, "UNKNOWN").replace("_", " ").title()


def _enum(export: Export, table: str, default: tuple[str, ...]) -> dict[int, str]:
    """An nsys enum as {id: symbol without its common prefix}, e.g. {1: "HTOD"}."""
    rows = export.dict_rows(table)
    if not rows:
        return dict(enumerate(default))
    prefixes = ("CUDA_MEMCPY_KIND_", "CUDA_MEMOPR_MEMORY_KIND_")
    out = {}
    for row in rows:
        name = str(row.get("name") or "")
        for prefix in prefixes:
            name = name.removeprefix(prefix)
        if isinstance(row.get("id"), int):
            out[row["id"]] = name
    return out


def _steps(names: list[str], ts: np.ndarray, dur: np.ndarray, mask: np.ndarray) -> list[StepWindow]:
    """CPU step windows of the ``ProfilerStep#N`` ranges: kineto's rule (digits after the
    prefix; anything else is neither a step nor an op)."""
    steps = []
    for i in np.flatnonzero(mask).tolist():
        number = names[i][len(STEP_PREFIX) :]
        if number.isdecimal():  # kineto's isdigit(), less the digits int() refuses (²)
            steps.append(StepWindow(int(number), int(ts[i]), int(ts[i] + dur[i]), False))
    return steps


def _add(counter: Counter[str], why: str, rows: np.ndarray) -> None:
    """Count the rows of a mask under ``why`` (no entry when there are none)."""
    n = int(np.count_nonzero(rows))
    if n:
        counter[why] += n


def _interned(
    keys: np.ndarray, interner: Interner, value: Callable[[tuple[int, ...]], Any]
) -> np.ndarray:
    """Interner ids for rows of integer keys (one interning per distinct row)."""
    if len(keys) == 0:
        return np.empty(0, dtype=np.int32)
    bits = 63 // keys.shape[1]
    if keys.min() >= 0 and keys.max() < 1 << bits:  # rows packed in one int64: a 1-D sort
        packed = np.zeros(len(keys), dtype=np.int64)
        for column in keys.T:
            packed = (packed << bits) | column
        uniq_packed, inverse = np.unique(packed, return_inverse=True)
        shifts = bits * np.arange(keys.shape[1] - 1, -1, -1)
        uniq = (uniq_packed[:, None] >> shifts) & ((1 << bits) - 1)
    else:
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    ids = np.array([interner.id(value(tuple(map(int, k)))) for k in uniq], dtype=np.int32)
    return ids[inverse.reshape(-1)]


_LAUNCH_WIDTH = len(LAUNCH_FIELDS)


def _launch_columns(have: set[str], kind: int) -> str:
    """The SELECT columns of a GPU table's launch configuration (traceview.columns.launches): grid,
    block, registers, static + dynamic shared memory of kernels; bytes of copies and sets."""
    if kind != KERNEL:
        return ", ".join(["-1"] * (_LAUNCH_WIDTH - 1) + [_or(have, "bytes", -1)])
    dims = [_or(have, f"{what}{axis}", -1) for what in ("grid", "block") for axis in "XYZ"]
    shared = [f'"{c}"' for c in ("staticSharedMemory", "dynamicSharedMemory") if c in have]
    both = [" + ".join(shared)] if len(shared) == 2 else []
    total = f"COALESCE({', '.join([*both, *shared, '-1'])})" if shared else "-1"  # NULL + x: NULL
    return ", ".join([*dims, _or(have, "registersPerThread", -1), total, "-1"])


def launch_of(key: tuple[int, ...]) -> tuple[int, ...]:
    """A launch configuration from an export's columns (negatives: absent)."""
    return tuple(v if v >= 0 else -1 for v in key)


def _or(have: set[str], column: str, default: int) -> str:
    """A column with NULL (or a missing column) read as ``default``."""
    return f'COALESCE("{column}", {default})' if column in have else str(default)


def _time(have: set[str], column: str) -> str:
    return _or(have, column, _NULL)


def _first(have: set[str], *columns: str) -> str:
    """The first of ``columns`` the table has, NULL as −1 (a name that cannot be found)."""
    return next((_or(have, c, -1) for c in columns if c in have), "-1")


def header_of(export: Export) -> dict[str, Any]:
    """The export's facts in kineto's header keys: ``baseTimeNanoseconds`` (UTC epoch ns
    of the session start: absolute time = it + ts) and ``deviceProperties`` (GPU name, SMs,
    clock, memory bandwidth); ``nsys`` holds the export's versions."""
    header: dict[str, Any] = {}
    start = export.dict_rows("TARGET_INFO_SESSION_START_TIME")
    if start and isinstance(start[0].get("utcEpochNs"), int):
        header["baseTimeNanoseconds"] = start[0]["utcEpochNs"]
    gpus = [_device(row) for row in export.dict_rows("TARGET_INFO_GPU")]
    if gpus:
        header["deviceProperties"] = gpus
    meta = {row.get("name"): row.get("value") for row in export.dict_rows("META_DATA_EXPORT")}
    versions = {
        "productVersion": meta.get("EXPORT_PRODUCT_VERSION"),
        "schemaVersion": meta.get("EXPORT_SCHEMA_VERSION"),
    }
    header["nsys"] = {k: v for k, v in versions.items() if v is not None}
    return header


_DEVICE_KEYS = {
    "id": "id",
    "name": "name",
    "smCount": "numSms",
    "clockRate": "clockRateHz",
    "memoryBandwidth": "memoryBandwidthBytesPerSec",
    "totalMemory": "totalGlobalMem",
    "computeMajor": "computeMajor",
    "computeMinor": "computeMinor",
}


def _device(row: dict[str, Any]) -> dict[str, Any]:
    """A TARGET_INFO_GPU row in kineto's deviceProperties keys (units in the key otherwise)."""
    return {key: row[column] for column, key in _DEVICE_KEYS.items() if row.get(column) is not None}

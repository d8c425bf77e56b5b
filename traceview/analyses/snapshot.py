"""A snapshot: the small, versioned JSON summary of a trace that ``traceview diff`` compares.

It stores what a diff needs and nothing else: whole-trace totals, per-device idle and
per-kernel statistics; per ProfilerStep its duration, kernel count, kernel time and device idle;
and per kernel its count and time in every step, so that ``diff`` can take per-step medians and
apply ``--pstep`` to a snapshot exactly as to a trace. ``diff`` turns a trace into a snapshot in
memory first, so trace-vs-trace, trace-vs-snapshot and snapshot-vs-snapshot agree.

Size. Kernel names dominate: real traces have 10–200 distinct kernels (the largest in
../shared/traces has 194), so up to ``MAX_KERNELS`` every kernel is stored. Beyond that, the
largest kernels covering ``COVER`` of the kernel time are stored (at least ``MAX_KERNELS``) and
the rest are summed in ``other`` with a 12-hex-digit digest of each name, so ``diff`` can tell a
kernel below this snapshot's cut from a new one. At most ``MAX_STORED`` are stored whatever they
cover: with 10^5 distinct names (compiled models) their step arrays would take gigabytes.
Per-step arrays cost kernels × steps numbers, so the last ``MAX_STEPS`` steps are kept (warm-up
comes first); whole-trace figures always cover everything. Times are µs rounded to the ns.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
import zlib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import numpy as np
import orjson

from traceview import __version__
from traceview.analyses.gaps import GapOptions, device_idle
from traceview.analyses.kernels import KernelOptions, KernelReport, KernelRow, analyse_kernels
from traceview.analyses.steps import StepRow, StepRows, step_table, step_windows
from traceview.errors import TraceviewError
from traceview.events import KERNEL, TraceEvents
from traceview.read.source import GZIP_MAGIC, SourceInfo, check_path
from traceview.read.stream import pipe_input

KIND = "traceview-snapshot"
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)  # 1 lacks the steps' device figures; its other figures agree
MAX_KERNELS = 200
COVER = 0.999
MAX_STORED = 2000
MAX_STEPS = 100
SNIFF_BYTES = 4096
# A snapshot is a few hundred KB (200 kernels × 100 steps at most); a bigger file is refused
# before it is parsed (a 500 MB one took 49 s and 2.2 GB).
MAX_SNAPSHOT_BYTES = 64 << 20
# Counts, µs and %: 1e15 µs is 31 years, and sums of such numbers stay finite in float64.
MAX_NUMBER = 1e15
_MARK = re.compile(rb'"kind"\s*:\s*"traceview-snapshot"')


@dataclass(frozen=True)
class Totals:
    """Whole-trace kernel figures; ``gpu_busy_us`` and ``idle_us`` = the devices' busy and
    idle time summed, ``gpu_busy_pct`` = summed busy / summed device windows × 100."""

    count: int
    total_us: float
    distinct: int
    gpu_busy_us: float
    gpu_busy_pct: float
    idle_us: float


@dataclass(frozen=True)
class DeviceStat:
    """Idle time of one device, as ``traceview gaps`` reports it (busy: kernel, memcpy, memset)."""

    device: Any
    window_us: float
    busy_us: float
    idle_us: float
    idle_pct: float


@dataclass(frozen=True)
class StepDeviceStat:
    """A step's GPU work on one device, as ``traceview steps`` reports it."""

    device: Any
    window_us: float
    busy_us: float
    idle_us: float
    busy_pct: float
    lag_us: float


@dataclass(frozen=True)
class StepStat:
    """One ProfilerStep: duration, kernels launched in it, their time, and its device figures:
    ``idle_us`` = the devices' idle summed, ``gpu_busy_pct`` = summed busy / summed windows."""

    step: int
    duration_us: float
    kernels: int
    kernel_time_us: float
    idle_us: float
    gpu_busy_pct: float
    gpu_only: bool
    devices: tuple[StepDeviceStat, ...] = ()


@dataclass(frozen=True)
class KernelStat:
    """Whole-trace statistics of one kernel name, and its count and time in each stored step."""

    name: str
    count: int
    total_us: float
    mean_us: float
    std_us: float
    min_us: float
    max_us: float
    p50_us: float
    p90_us: float
    p99_us: float
    step_counts: tuple[int, ...]
    step_totals_us: tuple[float, ...]


@dataclass(frozen=True)
class OtherKernels:
    """The kernels below the storage cut, summed; ``digests`` identify their names."""

    kernels: int
    count: int
    total_us: float
    step_counts: tuple[int, ...]
    step_totals_us: tuple[float, ...]
    digests: tuple[str, ...]


@dataclass(frozen=True)
class Snapshot:
    """The snapshot document (``schema_version`` 1); ``steps`` align with the step arrays."""

    kind: str
    schema_version: int
    traceview_version: str
    trace: dict[str, Any]
    totals: Totals
    devices: tuple[DeviceStat, ...]
    steps: tuple[StepStat, ...]
    steps_left_out: int
    kernels: tuple[KernelStat, ...]
    other: OtherKernels


_SNAPSHOT_KEYS = frozenset(f.name for f in fields(Snapshot))


@dataclass(frozen=True)
class _Head:
    kind: str
    schema_version: int


def digest(name: str) -> str:
    """A short, stable identifier of a kernel name."""
    return hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def build_snapshot(
    events: TraceEvents,
    max_kernels: int = MAX_KERNELS,
    max_steps: int = MAX_STEPS,
    max_stored: int = MAX_STORED,
) -> Snapshot:
    """Summarise a read trace (kernels only; idle counts kernel, memcpy and memset as busy)."""
    # Rows only for the kernels that can be stored: with 10^6 names, a row each costs seconds.
    report = analyse_kernels(events, KernelOptions(sort="total", top=max(max_kernels, max_stored)))
    devices = device_idle(events, GapOptions())
    windows = step_windows(events)
    kept = list(windows)[max(len(windows) - max_steps, 0) :]  # the last max_steps steps
    steps = step_table(events, {n: windows[n] for n in kept})
    stored = _stored(report, max_kernels, max_stored)
    rows_by = StepRows(events, np.arange(len(events.gpu.ts)))
    step_rows = [np.sort(rows_by.within(windows[s.step])) for s in steps]
    counts, totals = _step_sums(events, step_rows, [r.name for r in stored])
    return Snapshot(
        kind=KIND,
        schema_version=SCHEMA_VERSION,
        traceview_version=__version__,
        trace=report.trace.as_dict(),
        totals=Totals(
            count=report.count,
            total_us=report.total_us,
            distinct=report.distinct,
            gpu_busy_us=report.gpu_busy_us,
            gpu_busy_pct=round(report.gpu_busy_pct, 3),
            idle_us=sum(round(d.idle_us * 1000) for d in devices) / 1000,
        ),
        devices=tuple(
            DeviceStat(d.device, d.window_us, d.busy_us, d.idle_us, round(d.idle_pct, 3))
            for d in devices
        ),
        steps=tuple(_step_stat(row) for row in steps),
        steps_left_out=len(windows) - len(steps),
        kernels=tuple(
            _kernel_stat(row, counts[:, i], totals[:, i]) for i, row in enumerate(stored)
        ),
        other=OtherKernels(
            kernels=report.distinct - len(stored),
            count=report.count - sum(r.count for r in stored),
            total_us=(round(report.total_us * 1000) - sum(round(r.total_us * 1000) for r in stored))
            / 1000,
            step_counts=tuple(counts[:, -1].tolist()),
            step_totals_us=tuple((totals[:, -1] / 1000).tolist()),
            digests=_digests_besides(events, {r.name for r in stored}),
        ),
    )


def _stored(report: KernelReport, max_kernels: int, max_stored: int) -> list[KernelRow]:
    """The rows (largest total first) kept by name: all, or those covering COVER of the time;
    never more than ``max_stored`` (``report`` has at least the rows to store)."""
    rows = report.rows
    if report.distinct <= max_kernels:
        return rows
    need = COVER * report.total_us
    covered, keep = 0.0, 0
    while keep < min(len(rows), max_stored) and (keep < max_kernels or covered < need):
        covered += rows[keep].total_us
        keep += 1
    return rows[:keep]


def _digests_besides(events: TraceEvents, stored: set[str]) -> tuple[str, ...]:
    """Sorted digests of the kernel names not stored."""
    gpu = events.gpu
    used = np.unique(gpu.name[gpu.kind == KERNEL]).tolist()
    names = events.names
    return tuple(sorted(digest(names[i]) for i in used if names[i] not in stored))


def _step_sums(
    events: TraceEvents, step_rows: list[np.ndarray], names: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Per step (row indices of its GPU activity) and stored kernel (column, the last one is
    ``other``): count and time ns."""
    gpu = events.gpu
    slot = np.full(len(events.names), len(names), dtype=np.int64)
    index = {name: i for i, name in enumerate(events.names)}
    for i, name in enumerate(names):
        slot[index[name]] = i
    counts = np.zeros((len(step_rows), len(names) + 1), dtype=np.int64)
    totals = np.zeros_like(counts)
    kernels = gpu.kind == KERNEL
    for row, rows in enumerate(step_rows):
        rows = rows[kernels[rows]]
        which = slot[gpu.name[rows]]
        counts[row] = np.bincount(which, minlength=len(names) + 1)
        np.add.at(totals[row], which, gpu.dur[rows])
    return counts, totals


def _step_stat(row: StepRow) -> StepStat:
    busy = sum(d.busy_ns for d in row.devices)
    window = sum(d.window_ns for d in row.devices)
    return StepStat(
        step=row.step,
        duration_us=(row.cpu_end_ns - row.cpu_start_ns) / 1000,
        kernels=row.kernels,
        kernel_time_us=row.kernel_time_ns / 1000,
        idle_us=(window - busy) / 1000,
        gpu_busy_pct=round(100.0 * busy / window, 3) if window else 0.0,
        gpu_only=row.gpu_only,
        devices=tuple(
            StepDeviceStat(
                d.device,
                d.window_ns / 1000,
                d.busy_ns / 1000,
                d.idle_ns / 1000,
                round(d.busy_pct, 3),
                d.lag_ns / 1000,
            )
            for d in row.devices
        ),
    )


def _kernel_stat(row: KernelRow, counts: np.ndarray, totals_ns: np.ndarray) -> KernelStat:
    return KernelStat(
        name=row.name,
        count=row.count,
        total_us=row.total_us,
        mean_us=round(row.mean_us, 3),
        std_us=round(row.std_us, 3),
        min_us=row.min_us,
        max_us=row.max_us,
        p50_us=row.p50_us,
        p90_us=row.p90_us,
        p99_us=row.p99_us,
        step_counts=tuple(counts.tolist()),
        step_totals_us=tuple((totals_ns / 1000).tolist()),
    )


def to_json(snapshot: Snapshot) -> str:
    """One top-level key per line and one list item per line: small, and reviewable in a diff."""
    lines = []
    for f in fields(snapshot):
        value = getattr(snapshot, f.name)
        if isinstance(value, tuple) and value:
            items = ",\n".join("  " + orjson.dumps(v).decode() for v in value)
            lines.append(f'"{f.name}": [\n{items}\n]')
        else:
            lines.append(f'"{f.name}": {orjson.dumps(value).decode()}')
    return "{\n" + ",\n".join(lines) + "\n}\n"


def is_snapshot(path: Path) -> bool:
    """Whether ``path`` holds a snapshot (plain or gzip), judged by parsing it: any key
    order (``jq -S``), a UTF-8 BOM accepted; a file that does not parse is a snapshot if its
    first KB say so. Files over ``MAX_SNAPSHOT_BYTES`` are traces, unless their first KB say
    snapshot: then they are refused, quickly.

    Other traceview JSON outputs (``kernels -f json`` and the like) are rejected here with a
    hint, since the trace reader could only say that they are not traces.
    """
    info = check_path(path)
    head = _head(path, info.stream)
    first = _first_key(head)
    if first is not None and first not in _SNAPSHOT_KEYS:
        return False  # a snapshot's keys are its fields, whatever their order: a trace
    if info.stream and first is None and not _MARK.search(head):
        return False  # a pipe is not held in memory to find out
    data = _read_bounded(path)
    if data is None:
        if _MARK.search(head):
            raise TraceviewError(_too_big(path))
        return False
    try:
        probe = msgspec.json.decode(data, type=_Probe)
    except (msgspec.DecodeError, msgspec.ValidationError):
        # Not one JSON object: a damaged snapshot if it says so (load_snapshot tells what is
        # wrong), else the trace reader says what it is.
        return bool(_MARK.search(data[:SNIFF_BYTES]))
    if probe.kind is None and probe.schema_version is not None and probe.traceEvents is None:
        raise TraceviewError(
            f"{path}: traceview JSON output, not a trace or a snapshot "
            "(make a baseline with: traceview snapshot TRACE -o FILE)"
        )
    return probe.kind == KIND


_FIRST_KEY = re.compile(rb'\s*\{\s*("(?:[^"\\]|\\.)*")\s*:')


def _first_key(head: bytes) -> str | None:
    """The first key of the JSON object that ``head`` begins, or None when the head does not
    tell (not an object, or the key goes on past the head)."""
    match = _FIRST_KEY.match(head.removeprefix(b"\xef\xbb\xbf"))
    if match is None:
        return None
    try:
        key = msgspec.json.decode(match.group(1))
    except msgspec.DecodeError:
        return None
    return key if isinstance(key, str) else None


class _Probe(msgspec.Struct):
    """The top-level keys that tell a snapshot, a traceview output and a trace apart."""

    kind: Any = None
    schema_version: Any = None
    traceEvents: msgspec.Raw | None = None


def _head(path: Path, stream: bool) -> bytes:
    """The first KB of the file or pipe (decompressed)."""
    if stream:
        raw = pipe_input(path).peek(1 << 16)
    else:
        with path.open("rb") as f:
            raw = f.read(1 << 16)
    if not raw.startswith(GZIP_MAGIC):
        return raw[:SNIFF_BYTES]
    try:
        return zlib.decompressobj(wbits=31).decompress(raw, SNIFF_BYTES)
    except zlib.error:
        return b""  # the trace reader reports the corruption


def load_snapshot(path: Path) -> Snapshot:
    """Read and validate a snapshot; any problem is one TraceviewError naming the file."""
    data = _read_bounded(path)
    if data is None:
        raise TraceviewError(_too_big(path))
    try:
        head = msgspec.json.decode(data, type=_Head)
        if head.kind != KIND:
            raise TraceviewError(f"{path}: not a traceview snapshot (kind {head.kind!r})")
        if head.schema_version not in READABLE_VERSIONS:
            raise TraceviewError(
                f"{path}: snapshot schema_version {head.schema_version} is not supported "
                f"(traceview {__version__} reads {', '.join(map(str, READABLE_VERSIONS))}); "
                "re-create it with traceview snapshot"
            )
        snapshot = msgspec.json.decode(data, type=Snapshot)
    except (msgspec.DecodeError, msgspec.ValidationError) as e:
        raise TraceviewError(f"{path}: not a valid snapshot: {e}") from None
    problem = _out_of_range(snapshot, "") or _inconsistency(snapshot)
    if problem:
        raise TraceviewError(f"{path}: not a valid snapshot: {problem}")
    return snapshot


def _read_bounded(path: Path) -> bytes | None:
    """The file's (decompressed) bytes without a UTF-8 BOM, or None when they exceed
    ``MAX_SNAPSHOT_BYTES``; no more than that is ever read or inflated."""
    info = check_path(path)
    if not info.compressed and info.size_bytes > MAX_SNAPSHOT_BYTES:
        return None
    try:
        with _bounded_input(info) as f:
            data = _inflate_bounded(f) if info.compressed else f.read(MAX_SNAPSHOT_BYTES + 1)
    except OSError as e:
        raise TraceviewError(f"{path}: cannot read: {e.strerror or e}") from None
    except zlib.error as e:
        raise TraceviewError(f"{path}: corrupt gzip data ({e})") from None
    if data is None or len(data) > MAX_SNAPSHOT_BYTES:
        return None
    return data.removeprefix(b"\xef\xbb\xbf")


def _bounded_input(info: SourceInfo) -> BinaryIO:
    """The file, or a pipe's first bytes (kept by the pipe for the trace reader, in case)."""
    if info.stream:
        return io.BytesIO(pipe_input(info.path).peek(MAX_SNAPSHOT_BYTES + 1))
    return info.path.open("rb")


def _inflate_bounded(f: BinaryIO) -> bytes | None:
    """A gzip stream inflated a MB at a time; None as soon as it exceeds the bound."""
    inflate = zlib.decompressobj(wbits=31)
    parts, size = [], 0
    while block := f.read(1 << 20):
        part = inflate.decompress(block, MAX_SNAPSHOT_BYTES + 1 - size)
        parts.append(part)
        size += len(part)
        if size > MAX_SNAPSHOT_BYTES or inflate.unconsumed_tail:
            return None
        if inflate.eof:
            break
    return b"".join(parts)


def _too_big(path: Path) -> str:
    return (
        f"{path}: a snapshot larger than {MAX_SNAPSHOT_BYTES >> 20} MB is not accepted "
        "(traceview snapshot writes a few hundred KB)"
    )


SIGNED = (".lag_us",)  # a step's GPU work may start before the CPU step (negative lag)


def _out_of_range(value: Any, where: str) -> str | None:
    """The first number of the snapshot that is not finite and within [0, MAX_NUMBER] (its
    counts, µs and %), or None; a lag (SIGNED) may be negative, down to −MAX_NUMBER. ``trace``
    (metadata) and device ids are not numbers to check."""
    if isinstance(value, bool | str) or value is None:
        return None
    if isinstance(value, int | float):
        low = -MAX_NUMBER if where.endswith(SIGNED) else 0
        if math.isfinite(value) and low <= value <= MAX_NUMBER:
            return None
        return f"{where.lstrip('.')} = {value!r} is out of range ({low:g} to {MAX_NUMBER:g})"
    if isinstance(value, tuple):
        for i, item in enumerate(value):
            if problem := _out_of_range(item, f"{where}[{i}]"):
                return problem
        return None
    for f in fields(value):
        problem = None
        if f.name not in ("trace", "device"):
            problem = _out_of_range(getattr(value, f.name), f"{where}.{f.name}")
        if problem:
            return problem
    return None


def _inconsistency(snapshot: Snapshot) -> str | None:
    """What makes a well-typed snapshot unusable, or None."""
    n = len(snapshot.steps)
    parts: list[tuple[str, KernelStat | OtherKernels]] = [
        (f"kernels[{i}]", k) for i, k in enumerate(snapshot.kernels)
    ]
    for where, k in [*parts, ("other", snapshot.other)]:
        if len(k.step_counts) != n or len(k.step_totals_us) != n:
            return f"{where}: step arrays must have one entry per step ({n})"
        if k.count < 0 or k.total_us < 0 or min((*k.step_counts, *k.step_totals_us), default=0) < 0:
            return f"{where}: negative count or time"
    if len({s.step for s in snapshot.steps}) != n:
        return "steps: a step number appears twice"
    return None


__all__ = [
    "KIND",
    "SCHEMA_VERSION",
    "DeviceStat",
    "KernelStat",
    "OtherKernels",
    "Snapshot",
    "StepStat",
    "Totals",
    "build_snapshot",
    "digest",
    "is_snapshot",
    "load_snapshot",
    "to_json",
]

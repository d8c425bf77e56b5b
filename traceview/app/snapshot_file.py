"""The snapshot file: the document of traceview.analyses.snapshot written as small, reviewable
JSON, recognised among the other inputs of ``traceview diff``, and read back with every
number checked, so that a damaged or hand-edited baseline fails in one line, never deep in diff.
"""

from __future__ import annotations

import io
import math
import re
import zlib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import orjson

from traceview import __version__
from traceview.analyses.snapshot import KIND, KernelStat, OtherKernels, Snapshot
from traceview.errors import TraceviewError
from traceview.read.source import GZIP_MAGIC, SourceInfo, check_path
from traceview.read.stream import pipe_input
from traceview.side_files import MAX_BYTES

READABLE_VERSIONS = (1, 2)  # 1 lacks the steps' device figures; its other figures agree
SNIFF_BYTES = 4096
# A snapshot is a few hundred KB (200 kernels × 100 steps at most); a bigger file is refused
# before it is parsed (a 500 MB one took 49 s and 2.2 GB).
MAX_SNAPSHOT_BYTES = MAX_BYTES["snapshot"]
# Counts, µs and %: 1e15 µs is 31 years, and sums of such numbers stay finite in float64.
MAX_NUMBER = 1e15
_MARK = re.compile(rb'"kind"\s*:\s*"traceview-snapshot"')

_SNAPSHOT_KEYS = frozenset(f.name for f in fields(Snapshot))


@dataclass(frozen=True)
class _Head:
    kind: str
    schema_version: int


def to_json(snapshot: Snapshot) -> str:
    """One top-level key per line and one list item per line: small, and reviewable in a diff."""
    lines = []
    for f in fields(snapshot):
        value = getattr(snapshot, f.name)
        if f.name in ("ops", "fused_ops", "step_parts") and not value:
            continue  # made only for diff --group-by op / fused-op: files stay as they were
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
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        # Not one JSON object: a damaged snapshot if it says so (load_snapshot tells what is
        # wrong), else the trace reader says what it is.
        return bool(_MARK.search(data[:SNIFF_BYTES]))
    if probe.kind is None and probe.schema_version is not None and probe.traceEvents is None:
        raise TraceviewError(
            f"{path}: traceview JSON output, not a trace or a snapshot "
            "(make a baseline with: traceview snapshot TRACE -o FILE)"
        )
    return isinstance(probe.kind, str) and probe.kind == KIND


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
    try:
        return _load_snapshot(path)
    except RecursionError:  # JSON nested deeper than the decoders and checks go
        raise TraceviewError(f"{path}: not a valid snapshot: nested too deeply") from None


def _load_snapshot(path: Path) -> Snapshot:
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
        *((f"kernels[{i}]", k) for i, k in enumerate(snapshot.kernels)),
        *((f"ops[{i}]", k) for i, k in enumerate(snapshot.ops)),
        *((f"fused_ops[{i}]", k) for i, k in enumerate(snapshot.fused_ops)),
    ]
    for where, k in [*parts, ("other", snapshot.other)]:
        if len(k.step_counts) != n or len(k.step_totals_us) != n:
            return f"{where}: step arrays must have one entry per step ({n})"
        if k.count < 0 or k.total_us < 0 or min((*k.step_counts, *k.step_totals_us), default=0) < 0:
            return f"{where}: negative count or time"
    if len({s.step for s in snapshot.steps}) != n:
        return "steps: a step number appears twice"
    return None


def problem_of(snapshot: Snapshot) -> str | None:
    """What makes a decoded snapshot unusable (a number out of range, an inconsistency), or
    None; run snapshots check each of theirs with it."""
    return _out_of_range(snapshot, "") or _inconsistency(snapshot)


__all__ = ["MAX_SNAPSHOT_BYTES", "is_snapshot", "load_snapshot", "problem_of", "to_json"]

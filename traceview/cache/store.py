"""TraceEvents ⇄ a directory of zstd Parquet tables plus ``meta.json`` (pyarrow imported lazily).

The CPU rows (``cpu.parquet``) are written and read a block at a time, never whole, as the
reader keeps them (see traceview.columns.cpu_rows); a digest of the file in ``meta.json`` catches
damage when the entry is opened, before an analysis streams through it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from traceview import __version__
from traceview.cache.fingerprint import ingest_fingerprint
from traceview.columns import segments
from traceview.columns.cpu_rows import BLOCK_ROWS, ROW, CpuRows, Windows
from traceview.columns.frames import long_frames
from traceview.columns.model import (
    DataChecks,
    StepWindow,
    StreamKey,
    TraceEvents,
    TraceFacts,
    without_cpu,
)
from traceview.columns.packed_names import PackedNames
from traceview.columns.schema import (
    CPU_COLUMNS as CPU_SCHEMA,
)
from traceview.columns.schema import (
    GPU_LAUNCH,
    AnyGroup,
    Column,
    CommColumns,
    Dropped,
    FlowColumns,
    FrameColumns,
    GpuColumns,
    Group,
    MemoryColumns,
    RuntimeColumns,
    SchemaMismatch,
    arrays_of,
    dropped,
    empty,
    from_arrays,
    unused_of,
)
from traceview.columns.schema import (
    TABLES as COLUMN_TABLES,
)
from traceview.columns.segments import Segments
from traceview.errors import TraceviewError
from traceview.read.reader import ReadStats

# 2: cpu.parquet holds int32 thread and name ids and is checked by a digest in meta.json.
CACHE_SCHEMA = 10  # 3: device = args.device even without args.stream
# 4: the data checks kept as numbers (DataChecks), their wording built for each report
# 5: launch configurations (launches.parquet, gpu.parquet's launch column)
# 6: CPU op shapes (shapes.parquet, cpu.parquet's shape column)
# 7: the columns as declared in traceview.columns.schema (cpu.parquet in its order), checked
#    by name and type when read
# 8: derived numbers beside the tables (derived-<key>.npz, traceview.cache.derived): a run's
#    per-rank summaries, so a warm run of many ranks reads them instead of the columns; and
#    the collectives' metadata (comms.parquet, comm_keys.parquet)
# 9: the allocator's [memory] events (memory.parquet)
# 10: python frames and fwdbwd flows (frames.parquet, flows.parquet), in an entry written by a
#     read that asked for them (``has_frames``)
META = "meta.json"
META_DIGEST = "meta_digest"
CPU_COLUMNS = tuple(c.name for c in CPU_SCHEMA)
TABLES = (
    "gpu.parquet", "runtime.parquet", "steps.parquet", "names.parquet", "streams.parquet",
    "launches.parquet", "comms.parquet", "comm_keys.parquet", "memory.parquet",
)  # fmt: skip
CPU_TABLES = ("cpu.parquet", "threads.parquet", "shapes.parquet")
FRAME_TABLES = ("frames.parquet", "flows.parquet")
SHAPE_COLUMNS = ("dims", "types", "concrete")
# frames.parquet's row groups: summary reads the long frames a group at a time (_long_frames),
# and a group of 2^20 rows (pyarrow's default) decodes to 42 MB at once: measured in
# benchmarks/RESULTS-rust-43c.md ("summary's frames").
FRAME_ROW_GROUP = 1 << 16
# gpu.parquet's row groups in an export: its writer's first table, written while the read's
# other tables are still held; with 2^18 rows, not pyarrow's 2^20, `export` of the H200 big
# trace's 15 copies peaked at 251 MB, not 258 (benchmarks/RESULTS-rust-43c.md).
_GPU_GROUP = 1 << 18
EXPORT_FILES = (*TABLES, *CPU_TABLES, *FRAME_TABLES, META)


# read_entry's sink: (TraceEvents field, column group) -> what is kept of the group.
GroupSink = Callable[[str, Any], Any]


class DamagedEntry(Exception):
    """A cache entry that is incomplete, altered or of another schema."""


def write_entry(directory: Path, events: TraceEvents, keep_cpu: bool, let_go: bool = False) -> None:
    """Write every table (the CPU ones too if ``keep_cpu``) and then ``meta.json`` (with
    the file sizes) into ``directory``; ``let_go``: this process unmaps the pages of the
    columns joined shared once each table is written (a forked writer, which needs them no
    more: columns.segments.let_go)."""
    from traceview.cache.key import content_hash

    sizes = _write_tables(directory, events, keep_cpu, let_go=let_go)
    meta = _meta(events, sizes)
    meta["cpu_quality"] = dict(events.cpu_quality)
    # Read lazily (a row group at a time during an analysis), so checked when opened.
    meta["digests"] = {
        name: content_hash(directory / name) for name in sizes if name == "cpu.parquet"
    }
    meta[META_DIGEST] = _meta_digest(meta)
    (directory / META).write_bytes(orjson.dumps(meta, option=orjson.OPT_INDENT_2))


def _meta_digest(meta: dict[str, Any]) -> str:
    """xxh3-128 of the metadata but its digest, keys sorted: an edit of meta.json is damage."""
    import xxhash

    rest = {key: value for key, value in meta.items() if key != META_DIGEST}
    return xxhash.xxh3_128_hexdigest(orjson.dumps(rest, option=orjson.OPT_SORT_KEYS))


_HOW_CUT = ("chunks", "repaired_chunks")


def export_tables(events: TraceEvents, directory: Path) -> list[str]:
    """Write the tables (with CPU ones when ``events`` has them) and meta.json for users.
    ``events`` are canonical (columns.model.canonical: as no read strategy shapes them), so
    the files are the same however the trace was read; the caller makes them so, the read's
    own let go of (their renumbered columns are not held twice). They are handed over (the
    caller passes the call that makes them, and keeps no reference): the largest tables are
    written first, each let go of once written, so the others are written without them.
    ``directory`` is made if missing; a file that cannot be written raises TraceviewError."""
    keep_cpu = bool(events.threads) or len(events.cpu) > 0
    try:
        directory.mkdir(parents=True, exist_ok=True)
        first = {"gpu.parquet": _write(directory / "gpu.parquet", _columns(events.gpu), _GPU_GROUP)}
        events = replace(events, gpu=empty(GpuColumns))
        first["runtime.parquet"] = _write(directory / "runtime.parquet", _columns(events.runtime))
        events = replace(events, runtime=empty(RuntimeColumns))
        if keep_cpu:  # the flows go with the CPU tables (_write_tables)
            first["flows.parquet"] = _write(directory / "flows.parquet", _columns(_flows(events)))
            events = replace(events, flows=empty(FlowColumns))
        sizes = _write_tables(directory, events, keep_cpu, frames=True, written=first)
        meta = _meta(events, sizes)
        # how the text was cut into chunks: each reader cuts it its own way (docs/reader.md)
        meta["read"] = {k: v for k, v in meta["read"].items() if k not in _HOW_CUT}
        (directory / META).write_bytes(orjson.dumps(meta, option=orjson.OPT_INDENT_2))
    except OSError as e:
        raise TraceviewError(f"{directory}: cannot write: {e.strerror or e}") from None
    return [*sizes, META]


def _write_tables(
    directory: Path,
    events: TraceEvents,
    keep_cpu: bool,
    frames: bool = False,
    written: dict[str, int] | None = None,
    let_go: bool = False,
) -> dict[str, int]:
    """Write every table but those ``written`` already; the sizes of all, by file name, in
    EXPORT_FILES' order. The frames' tables with the CPU ones when the read kept frames, or
    when ``frames`` (an export: empty without them). ``let_go``: see write_entry."""
    done = written or {}

    def write(name: str, table: Any, row_group_size: int | None = None) -> int:
        size = _write(directory / name, table, row_group_size)
        if let_go:
            segments.let_go()
        return size

    _memory_pool()  # pyarrow imported before the CPU rows' thread starts (it would too)
    cpu = _Beside(_write_cpu, directory / "cpu.parquet", events.cpu) if keep_cpu else None
    try:
        sizes = {n: write(n, table) for n, table in event_tables(events).items() if n not in done}
    finally:
        cpu_size = cpu.result() if cpu is not None else 0
    if keep_cpu:
        sizes["cpu.parquet"] = cpu_size
        sizes["threads.parquet"] = write("threads.parquet", _pairs(events.threads, ("pid", "tid")))
        sizes["shapes.parquet"] = write("shapes.parquet", _shapes(events.shapes))
        if events.frames_read or frames:  # ids into the threads and names: with the CPU tables
            frames_table = _columns(events.frames)
            sizes["frames.parquet"] = write("frames.parquet", frames_table, FRAME_ROW_GROUP)
            if "flows.parquet" not in done:
                sizes["flows.parquet"] = write("flows.parquet", _columns(_flows(events)))
    sizes.update(done)
    return {n: sizes[n] for n in EXPORT_FILES if n in sizes}


def _flows(events: TraceEvents) -> FlowColumns:
    """The flows to store: none when a read that kept only the long frames left them unread."""
    return empty(FlowColumns) if isinstance(events.flows.flow, Dropped) else events.flows


class _Beside:
    """``function(*args)`` on a thread of its own: the CPU rows' table (the largest) is encoded
    while this one writes the others (pyarrow's encoding and numpy's copies release the GIL)."""

    def __init__(self, function: Callable[..., int], *args: Any) -> None:
        self._result = 0
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(function, args), name="traceview-cache-cpu"
        )
        self._thread.start()

    def _run(self, function: Callable[..., int], args: tuple[Any, ...]) -> None:
        try:
            self._result = function(*args)
        except BaseException as e:  # raised again by result(), in the writing thread
            self._error = e

    def result(self) -> int:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result


def _shapes(shapes: list[tuple[bytes, bytes, bytes]]) -> Any:
    """The CPU ops' distinct (Input Dims, Input type, Concrete Inputs), raw JSON as binary."""
    pa = _arrow()

    columns = list(zip(*shapes, strict=True)) or [(), (), ()]
    return pa.table(
        {name: pa.array(col, pa.binary()) for name, col in zip(SHAPE_COLUMNS, columns, strict=True)}
    )


def _read_shapes(path: Path) -> list[tuple[bytes, bytes, bytes]]:
    if not path.is_file():  # an entry exported without shapes
        return []
    table = _read_table(path)
    columns = [table.column(name).to_pylist() for name in SHAPE_COLUMNS]
    return list(zip(*columns, strict=True))


def event_tables(events: TraceEvents) -> dict[str, Any]:
    """The Parquet tables of one TraceEvents but the CPU ones, by file name (as pyarrow)."""
    pa = _arrow()

    steps = events.steps
    tables = {
        "gpu.parquet": _columns(events.gpu),
        "runtime.parquet": _columns(events.runtime),
        "steps.parquet": pa.table(
            {
                "step": pa.array([s.step for s in steps], pa.int64()),
                "start_ns": pa.array([s.start_ns for s in steps], pa.int64()),
                "end_ns": pa.array([s.end_ns for s in steps], pa.int64()),
                "on_gpu": pa.array([s.on_gpu for s in steps], pa.bool_()),
            }
        ),
        "names.parquet": _names_table(events.names),
        "streams.parquet": _pairs(events.streams, ("device", "stream")),
        "launches.parquet": _launches(events.launches),
        "comms.parquet": _columns(events.comms),
        "comm_keys.parquet": _comm_keys(events.comm_keys),
        "memory.parquet": _columns(events.memory),
    }
    return tables


def _write_cpu(path: Path, cpu: CpuRows) -> int:
    """Write the CPU rows a row group of BLOCK_ROWS at a time, never all at once."""
    pa = _arrow()

    schema = pa.schema([(name, pa.from_numpy_dtype(ROW[name])) for name in CPU_COLUMNS])
    with _writer(path, schema, {**_PARQUET_OPTIONS, **_CPU_OPTIONS}) as writer:
        for block in even_blocks(cpu.blocks(), BLOCK_ROWS):
            columns = [_ints(block[name]) for name in CPU_COLUMNS]
            writer.write_table(pa.Table.from_arrays(columns, schema=schema))
    return path.stat().st_size


def even_blocks(blocks: Iterable[np.ndarray], size: int) -> Iterator[np.ndarray]:
    """``blocks`` cut and joined into blocks of ``size`` rows (the last one may be shorter):
    the row groups do not depend on the parts the rows were read in (one per process of a
    split read, each ending in a short block)."""
    held: list[np.ndarray] = []
    count = 0
    for block in blocks:
        while len(block):
            part, block = block[: size - count], block[size - count :]
            held.append(part)
            count += len(part)
            if count == size:
                yield held[0] if len(held) == 1 else np.concatenate(held)
                held, count = [], 0
    if held:
        yield held[0] if len(held) == 1 else np.concatenate(held)


# Thread and name ids (few distinct values) compress as well plain as delta-encoded, and
# cost less to encode: 1.8M rows written in 0.135 s instead of 0.196 s, 8.1 MB not 8.3.
_CPU_OPTIONS: dict[str, Any] = {
    "use_dictionary": False,
    "column_encoding": {
        name: "PLAIN" if name in ("thread", "name", "shape") else "DELTA_BINARY_PACKED"
        for name in CPU_COLUMNS
    },
}


def _arrow_schema(table: tuple[Any, ...]) -> Any:
    """The Parquet (Arrow) schema of a column table of traceview.columns.schema."""
    pa = _arrow()

    return pa.schema([(c.name, pa.from_numpy_dtype(c.dtype)) for c in table])


def _columns(columns: AnyGroup) -> Any:
    pa = _arrow()

    table = COLUMN_TABLES[type(columns)]
    arrays = [_ints(array) for array in arrays_of(columns)]
    return pa.Table.from_arrays(arrays, schema=_arrow_schema(table))


def _ints(values: np.ndarray) -> Any:
    """A 1-D integer array as an Arrow array (its memory shared once contiguous). Not
    pa.array: its check for a numpy masked array imports numpy.ma (~13 ms in a writer)."""
    pa = _arrow()

    values = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("="))
    return pa.Array.from_buffers(
        pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)]
    )


def _pairs(keys: Sequence[tuple[Any, Any]], names: tuple[str, str]) -> Any:
    """Interned (a, b) keys as a table; each value as JSON text, so ints and strings survive.

    Stdlib json, not orjson: pids and tids may be integers beyond 64 bits.
    """
    pa = _arrow()

    return pa.table(
        {
            "id": pa.array(range(len(keys)), pa.int32()),
            names[0]: [json.dumps(k[0]) for k in keys],
            names[1]: [json.dumps(k[1]) for k in keys],
        }
    )


def _write(path: Path, table: Any, row_group_size: int | None = None) -> int:
    pa = _arrow()

    integers = all(pa.types.is_integer(t) for t in table.schema.types)
    options = _INTEGER_OPTIONS if integers else {}
    with _writer(path, table.schema, {**_PARQUET_OPTIONS, **options}) as writer:
        writer.write_table(table, row_group_size=row_group_size)
    return path.stat().st_size


@contextlib.contextmanager
def _writer(path: Path, schema: Any, options: dict[str, Any]) -> Iterator[Any]:
    """A Parquet writer of ``path``, closed at the end: pyarrow's own (pyarrow._parquet),
    given what pyarrow.parquet's ParquetWriter gives it, without that module's import (it
    imports pyarrow.fs and ssl: ~10 ms of a fill's writer). The files are the same bytes
    (tests/cli/test_cache_store.py); a pyarrow whose class takes other arguments gets the
    public writer."""
    _memory_pool()
    try:
        from pyarrow._parquet import ParquetWriter

        writer = ParquetWriter(str(path), schema, **{**_PUBLIC_DEFAULTS, **options})
    except (ImportError, TypeError):
        writer = _parquet().ParquetWriter(path, schema, **options)
    try:
        yield writer
    finally:
        writer.close()


# What pyarrow.parquet.ParquetWriter passes to pyarrow._parquet.ParquetWriter by default
# (pyarrow 15 to 26) where the latter's own default differs.
_PUBLIC_DEFAULTS: dict[str, Any] = {
    "version": "2.6",
    "use_dictionary": True,
    "write_statistics": True,
    "use_deprecated_int96_timestamps": False,
    "writer_engine_version": "V2",
    "data_page_version": "1.0",
}


_PARQUET_OPTIONS: dict[str, Any] = {"compression": "zstd", "write_page_checksum": True}
# Delta encoding, not dictionaries, for tables of integers: on the 1 GB benchmark trace the
# entry is 13.6 MB instead of 17.3 MB and a fresh process decodes the gpu/runtime/cpu tables
# in 82 ms instead of 103 ms (median of 11).
_INTEGER_OPTIONS: dict[str, Any] = {
    "use_dictionary": False,
    "column_encoding": "DELTA_BINARY_PACKED",
}


def _meta(events: TraceEvents, sizes: dict[str, int]) -> dict[str, Any]:
    read = events.read
    return {
        "cache_schema": CACHE_SCHEMA,
        "traceview_version": __version__,
        "ingest_code": ingest_fingerprint(),
        "path": events.path,
        "size_bytes": events.size_bytes,
        "header": events.header,
        "read": {
            "events": read.events,
            "chunks": read.chunks,
            "repaired_chunks": read.repaired_chunks,
            "exact_times": read.exact_times,
            "skipped": dict(read.skipped),
            "truncated_at": read.truncated_at,
        },
        "quality": dict(events.quality),
        "span_ns": list(events.span_ns) if events.span_ns is not None else None,
        "facts": _facts_json(events.facts),
        "has_cpu": "cpu.parquet" in sizes,
        "has_frames": "frames.parquet" in sizes,
        # the frames shorter than this (ns) are not in frames.parquet, nor any flow
        "frames_from_ns": events.frames_from_ns,
        "cpu_rows": len(events.cpu),
        "files": sizes,
    }


def read_meta(directory: Path) -> dict[str, Any]:
    """The entry's metadata, checked: schema, version and ingest code match, its checksum
    holds, every file has its size."""
    try:
        meta = orjson.loads((directory / META).read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        raise DamagedEntry(f"unreadable {META}: {e}") from None
    if not isinstance(meta, dict):
        raise DamagedEntry(f"{META} is not an object")
    made = (meta.get("cache_schema"), meta.get("traceview_version"))
    if made != (CACHE_SCHEMA, __version__):
        raise DamagedEntry(
            f"made by cache schema {made[0]} / traceview {made[1]}, "
            f"this is cache schema {CACHE_SCHEMA} / traceview {__version__}"
        )
    if meta.get("ingest_code") != ingest_fingerprint():
        raise DamagedEntry("written by other reading code (its ingest_code fingerprint differs)")
    if META_DIGEST not in meta:
        raise DamagedEntry(f"{META} has no checksum (made by an older traceview)")
    try:
        intact = meta[META_DIGEST] == _meta_digest(meta)
    except TypeError as e:  # orjson cannot re-encode it (an integer beyond 64 bits)
        raise DamagedEntry(f"{META}: {e}") from None
    if not intact:
        raise DamagedEntry(f"{META}: its content changed")
    for name, size in meta["files"].items():
        found = (directory / name).stat().st_size if (directory / name).is_file() else None
        if found != size:
            raise DamagedEntry(f"{name}: {found} bytes, expected {size}")
    return meta


def read_entry(
    directory: Path,
    meta: dict[str, Any],
    keep_cpu: bool,
    frames: bool = False,
    unused: frozenset[str] = frozenset(),
    frames_from_ns: int = 0,
    sink: GroupSink | None = None,
) -> TraceEvents:
    """TraceEvents from an entry; without ``keep_cpu``, exactly what a read without CPU gives;
    with ``frames`` (and ``keep_cpu``), the python frames and flows too. ``unused``: columns
    left unread, Dropped (schema.DROPPABLE), as a read of the trace leaves them;
    ``frames_from_ns``: only the frames at least this long, as a read of the trace keeps
    them. ``sink``: given each column group as soon as it is read, with its TraceEvents
    field, and what it returns is kept instead (the entry child writes each away, to hold
    one at a time); but for the groups needed after, by a read without CPU rows of an entry
    that has them (model.without_cpu renumbers from the GPU names, the collectives and the
    memory events)."""
    sink = sink or _as_read
    needed = _as_read if meta["has_cpu"] and not keep_cpu else sink
    gpu = needed("gpu", _group(directory / "gpu.parquet", GpuColumns, unused_of("gpu", unused)))
    names = _read_names(directory / "names.parquet")
    events = TraceEvents(
        path=meta["path"],
        size_bytes=meta["size_bytes"],
        header=meta["header"],
        read=_read_stats(meta["read"]),
        names=names,
        streams=[StreamKey(*pair) for pair in _read_pairs(directory / "streams.parquet")],
        gpu=gpu,
        runtime=sink(
            "runtime",
            _group(directory / "runtime.parquet", RuntimeColumns, unused_of("runtime", unused)),
        ),
        steps=_read_steps(directory / "steps.parquet"),
        span_ns=tuple(meta["span_ns"]) if meta["span_ns"] is not None else None,
        quality=Counter(meta["quality"]),
        facts=_read_facts(meta.get("facts")),
        cpu_quality=Counter(meta["cpu_quality"]),
        # none interned by a read that leaves the ids out (schema.GPU_LAUNCH): none read here
        launches=[] if GPU_LAUNCH in unused else _read_launches(directory / "launches.parquet"),
        comms=needed("comms", _group(directory / "comms.parquet", CommColumns)),
        comm_keys=_read_comm_keys(directory / "comm_keys.parquet"),
        memory=needed("memory", _group(directory / "memory.parquet", MemoryColumns)),
    )
    if keep_cpu and meta["has_cpu"]:
        _check_digests(directory, meta)
        _check_cpu_columns(directory / "cpu.parquet")
        cpu = CpuRows((ParquetRows.opened(directory / "cpu.parquet", meta["cpu_rows"]),))
        threads = _read_pairs(directory / "threads.parquet")
        shapes = _read_shapes(directory / "shapes.parquet")
        events = replace(events, cpu=cpu, threads=threads, shapes=shapes)
        if frames and meta.get("has_frames"):
            floor = max(frames_from_ns, entry_frames_from_ns(meta))
            return replace(
                events,
                frames=sink(
                    "frames",
                    _long_frames(directory / "frames.parquet", floor, unused_of("frames", unused)),
                ),
                flows=sink(
                    "flows",
                    _group(directory / "flows.parquet", FlowColumns, unused_of("flows", unused)),
                ),
                frames_read=True,
                frames_from_ns=floor,
            )
        return events
    return without_cpu(events) if meta["has_cpu"] else events


def _as_read(field: str, group: Any) -> Any:
    return group


def entry_frames_from_ns(meta: dict[str, Any]) -> int:
    """The length (ns) under which an entry's frames were left out (0: it holds every one;
    an entry written before the key existed held every one)."""
    floor = meta.get("frames_from_ns", 0)
    return floor if type(floor) is int and floor > 0 else 0


def _facts_json(facts: TraceFacts | None) -> dict[str, Any] | None:
    if facts is None:
        return None
    return {"checks": asdict(facts.checks), "time_resolution": facts.time_resolution}


def _read_facts(facts: dict[str, Any] | None) -> TraceFacts | None:
    if facts is None:
        return None
    return TraceFacts(DataChecks(**facts["checks"]), str(facts["time_resolution"]))


def _check_cpu_columns(path: Path) -> None:
    """The CPU rows are read lazily, after the entry is accepted: an entry whose cpu.parquet
    lacks a column or holds one of another type (written by another build with the same schema
    number) is refused here."""
    with _opened(path) as parquet:
        found = parquet.schema_arrow
    missing = set(CPU_COLUMNS) - set(found.names)
    if missing:
        raise DamagedEntry(f"cpu.parquet has no column {', '.join(sorted(missing))}")
    expected = _arrow_schema(CPU_SCHEMA)
    for name in CPU_COLUMNS:
        if found.field(name).type != expected.field(name).type:
            raise DamagedEntry(f"cpu.parquet: column {name} is {found.field(name).type}")


def _check_digests(directory: Path, meta: dict[str, Any]) -> None:
    from traceview.cache.key import content_hash

    for name, digest in meta["digests"].items():
        if content_hash(directory / name) != digest:
            raise DamagedEntry(f"{name}: its content changed")


@dataclass(frozen=True)
class ParquetRows:
    """The CPU rows of an entry, read a block at a time (a RowSource, see cpu_rows).

    Read through ``source``, a descriptor opened with the entry, when there is one: a
    ``cache prune`` that removes the entry during the analysis cannot take the rows away.
    """

    path: Path
    count: int
    source: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def opened(cls, path: Path, count: int) -> ParquetRows:
        pa = _arrow()

        return cls(path, count, pa.OSFile(str(path)))

    def __len__(self) -> int:
        return self.count

    def blocks(self, size: int, windows: Windows | None = None) -> Iterator[np.ndarray]:
        """A row group at a time (written ``BLOCK_ROWS`` rows each); with ``windows``, the
        groups whose [least ts, greatest end] overlaps none of them are not even read."""
        source = self.path if self.source is None else self.source
        with _opened(source) as parquet:
            for group in range(parquet.metadata.num_row_groups):
                if windows is not None and not _may_be_live(parquet.metadata, group, windows):
                    continue
                table = parquet.read_row_group(group, columns=list(CPU_COLUMNS))
                block = np.empty(table.num_rows, dtype=ROW)
                for name in CPU_COLUMNS:
                    block[name] = table.column(name).to_numpy()
                yield block


def _may_be_live(metadata: Any, group: int, windows: Windows) -> bool:
    """Whether a row group's statistics allow a row overlapping one of ``windows``."""
    columns = metadata.row_group(group)
    ts = columns.column(CPU_COLUMNS.index("ts")).statistics
    end = columns.column(CPU_COLUMNS.index("end")).statistics
    if ts is None or end is None or not (ts.has_min_max and end.has_min_max):
        return True
    span = (np.array([ts.min], dtype=np.int64), np.array([end.max], dtype=np.int64))
    return bool(windows.hits(*span)[0])


def _group(path: Path, group: type[Group], unused: frozenset[str] = frozenset()) -> Group:
    """A column group as numpy arrays: read-only views of Arrow's memory where Arrow allows it;
    DamagedEntry unless the file holds exactly the group's columns and types. ``unused``: the
    names of columns not read, Dropped of the file's row count (their types unchecked).

    Not copied: nothing writes into event columns, and copying the CPU columns of a 1 GB trace
    (73 MB) was a tenth of a warm ``gaps`` run.
    """
    columns = COLUMN_TABLES[group]
    with _opened(path) as parquet:
        _check_names(path, parquet, columns)
        table = parquet.read(columns=[c.name for c in columns if c.name not in unused])
        rows = parquet.metadata.num_rows
    try:
        return from_arrays(
            group,
            [
                dropped(c.dtype, rows) if c.name in unused else table.column(c.name).to_numpy()
                for c in columns
            ],
        )
    except SchemaMismatch as e:
        raise DamagedEntry(f"{path.name}: {e}") from None


def _long_frames(path: Path, from_ns: int, unused: frozenset[str] = frozenset()) -> FrameColumns:
    """The frames of the entry at least ``from_ns`` long (all when 0), read a row group at a
    time (FRAME_ROW_GROUP rows) when some are left out: only those kept are held
    (frames.long_frames). ``unused``: columns left Dropped, not held."""
    if from_ns <= 0:
        return _group(path, FrameColumns, unused)
    columns = COLUMN_TABLES[FrameColumns]
    kept = Segments(columns, unused=unused)
    with _opened(path) as parquet:
        _check_names(path, parquet, columns)
        try:
            for group in range(parquet.metadata.num_row_groups):
                table = parquet.read_row_group(group, use_threads=False)
                rows = [table.column(i).to_numpy() for i in range(len(columns))]
                kept.append(long_frames(rows, from_ns))
                del table, rows
            return from_arrays(FrameColumns, kept.join())
        except SchemaMismatch as e:
            raise DamagedEntry(f"{path.name}: {e}") from None


def _check_names(path: Path, parquet: Any, columns: Sequence[Column]) -> None:
    """DamagedEntry unless the file holds exactly ``columns``, in order."""
    names = parquet.schema_arrow.names
    if names != [c.name for c in columns]:
        raise DamagedEntry(f"{path.name} has the columns {', '.join(names)}")


def _read_table(path: Path) -> Any:
    # not pyarrow.parquet.read_table: it imports pyarrow.dataset (~0.1 s)
    with _opened(path) as parquet:
        return parquet.read()


@contextlib.contextmanager
def _opened(source: Path | Any) -> Iterator[Any]:
    """A Parquet file open for reading, its pages' checksums checked (a path, or an open
    pyarrow file, left open), as pyarrow.parquet.ParquetFile reads it: through pyarrow's own
    reader class (pyarrow._parquet.ParquetReader, _ReaderFile) without that module's import
    (it imports pyarrow.fs, ssl and the cloud filesystems: ~9 MB of a warm run's memory and
    ~13 ms, benchmarks/RESULTS-rust-43c.md); a pyarrow whose class takes other arguments
    gets ParquetFile itself."""
    _memory_pool()
    try:
        from pyarrow._parquet import ParquetReader

        reader = ParquetReader()
        named = isinstance(source, str | Path)
        reader.open(str(source) if named else source, page_checksum_verification=True)
    except (ImportError, TypeError):
        with _parquet().ParquetFile(source, page_checksum_verification=True) as parquet:
            yield parquet
        return
    try:
        yield _ReaderFile(reader)
    finally:
        if named:  # as ParquetFile: a file it was given stays open
            reader.close()


class _ReaderFile:
    """ParquetFile's reading methods over a ParquetReader: columns named as ParquetFile
    names them (a column, or a prefix of nested ones; unknown names left out)."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.metadata = reader.metadata
        self.schema_arrow = reader.schema_arrow
        self.columns: dict[str, list[int]] = {}
        for i, path in enumerate(reader.column_paths):
            for k in range(1, len(path) + 1):
                self.columns.setdefault(".".join(path[:k]), []).append(i)

    def _indices(self, names: Sequence[str] | None) -> list[int] | None:
        if names is None:
            return None
        return [i for name in names for i in self.columns.get(name, ())]

    def read(self, columns: Sequence[str] | None = None, use_threads: bool = True) -> Any:
        return self.reader.read_all(column_indices=self._indices(columns), use_threads=use_threads)

    def read_row_group(
        self, i: int, columns: Sequence[str] | None = None, use_threads: bool = True
    ) -> Any:
        return self.reader.read_row_group(
            i, column_indices=self._indices(columns), use_threads=use_threads
        )


@functools.cache
def _parquet() -> Any:
    """pyarrow.parquet, with Arrow's memory pools set (_memory_pool)."""
    _memory_pool()
    import pyarrow.parquet as pq

    return pq


@functools.cache
def _arrow() -> Any:
    """pyarrow, with Arrow's memory pools set (_memory_pool)."""
    _memory_pool()
    import pyarrow as pa

    return pa


@functools.cache
def _memory_pool() -> None:
    """Arrow's memory from the system allocator, as numpy's: what Arrow frees (a table's
    decoding buffers, the runtime calls' columns once let go of) serves the analyses'
    arrays, where jemalloc's pages (kept for its own reuse) could not; the default mimalloc
    held more still (benchmarks/RESULTS-rust-43c.md). Both pools: pyarrow's, and Arrow's own
    default, which the Parquet reader decodes in: pyarrow's import makes it, from
    $ARROW_DEFAULT_MEMORY_POOL (a user's value is kept), so this comes before any import of
    pyarrow here (_arrow, _parquet)."""
    import os

    ours = _ARROW_POOL not in os.environ
    if ours:
        os.environ[_ARROW_POOL] = "system"
    try:
        import pyarrow as pa  # makes Arrow's own default pool, from the variable
    finally:
        if ours:
            os.environ.pop(_ARROW_POOL, None)
    pa.set_memory_pool(pa.system_memory_pool())


_ARROW_POOL = "ARROW_DEFAULT_MEMORY_POOL"


def _read_names(path: Path) -> PackedNames:
    """The names column as PackedNames over Arrow's own buffers: no string per name."""
    pa = _arrow()

    column = _read_table(path).column("name")
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if array.null_count:
        raise DamagedEntry(f"{path.name}: a name is null")
    _, offsets, data = array.buffers()
    width = 8 if array.type == pa.large_string() else 4
    at = np.frombuffer(offsets, f"<i{width}", count=len(array) + 1, offset=array.offset * width)
    ends = at[1:].astype(np.int64) - int(at[0])
    view = memoryview(data if data is not None else b"")[int(at[0]) : int(at[-1])]
    return PackedNames(view, ends)


def _names_table(names: Sequence[str]) -> Any:
    """names.parquet: id, name (UTF-8 strings made from the packed bytes, not one by one);
    a name that is no UTF-8 (a lone surrogate) raises, and the entry is not written."""
    pa = _arrow()

    packed = PackedNames.of(names)
    if packed.nbytes >= 1 << 31:  # beyond 32-bit offsets: Arrow makes chunks of them
        column = pa.array(list(packed), pa.string())
    else:
        offsets = np.r_[np.int64(0), packed.ends].astype(np.int32)
        column = pa.StringArray.from_buffers(
            len(packed), pa.py_buffer(offsets), pa.py_buffer(packed.data)
        )
        column.validate(full=True)
    return pa.table({"id": pa.array(range(len(packed)), pa.int32()), "name": column})


def _read_pairs(path: Path) -> list[tuple[Any, Any]]:
    table = _read_table(path)
    a, b = (table.column(i).to_pylist() for i in (1, 2))
    return [(json.loads(x), json.loads(y)) for x, y in zip(a, b, strict=True)]


def _read_steps(path: Path) -> list[StepWindow]:
    table = _read_table(path)
    columns = (table.column(name).to_pylist() for name in ("step", "start_ns", "end_ns", "on_gpu"))
    return [StepWindow(*row) for row in zip(*columns, strict=True)]


def read_figures(meta: dict[str, Any]) -> tuple[ReadStats, Counter[str]]:
    """What reading met and the data-quality counts, from an entry's metadata (as its
    events have them)."""
    return _read_stats(meta["read"]), Counter(meta["quality"])


def _read_stats(read: dict[str, Any]) -> ReadStats:
    return ReadStats(
        events=read["events"],
        chunks=read["chunks"],
        repaired_chunks=read["repaired_chunks"],
        exact_times=read["exact_times"],
        skipped=Counter(read["skipped"]),
        truncated_at=read["truncated_at"],
    )


def _launches(launches: list[tuple[int, ...]]) -> Any:
    """The launch configurations (traceview.columns.launches) as a table: id, then one int64 column
    per field (−1: absent)."""
    pa = _arrow()

    from traceview.columns.launches import LAUNCH_FIELDS, launch_table

    table = launch_table(launches)
    columns = {"id": pa.array(range(len(launches)), pa.int32())}
    columns.update({name: _ints(table[:, i]) for i, name in enumerate(LAUNCH_FIELDS)})
    return pa.table(columns)


def _read_launches(path: Path) -> list[tuple[int, ...]]:
    from traceview.columns.launches import LAUNCH_FIELDS

    table = _read_table(path)
    columns = [table.column(name).to_pylist() for name in LAUNCH_FIELDS]
    return [tuple(row) for row in zip(*columns, strict=True)]


_COMM_KEY_COLUMNS = ("process_group", "collective", "dtype")


def _comm_keys(keys: list[tuple[str, str, str]]) -> Any:
    """The collectives' (process group, collective, dtype) keys (traceview.columns.comms)."""
    pa = _arrow()

    columns = list(zip(*keys, strict=True)) or [(), (), ()]
    table = {"id": pa.array(range(len(keys)), pa.int32())}
    table.update(
        {n: pa.array(c, pa.string()) for n, c in zip(_COMM_KEY_COLUMNS, columns, strict=True)}
    )
    return pa.table(table)


def _read_comm_keys(path: Path) -> list[tuple[str, str, str]]:
    table = _read_table(path)
    a, b, c = (table.column(name).to_pylist() for name in _COMM_KEY_COLUMNS)
    return [(str(x), str(y), str(z)) for x, y, z in zip(a, b, c, strict=True)]

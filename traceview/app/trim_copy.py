"""Copy the events a Cut keeps, byte for byte, in two streamed passes over the trace.

The first pass learns which processes are GPUs (those with GPU activity, and their
device) and which flows have both ends in the window; the second writes the text before
the event array, the kept events and the text after it, as they were. Memory holds the
GPU processes and the flows in the window, never the events.
"""

from __future__ import annotations

import re
import sys
import zlib
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import numpy as np

from traceview.app.trim import Cut
from traceview.columns.collect import GPU_ANNOTATION_CATEGORY, is_gpu_activity
from traceview.columns.numbers import value_of
from traceview.columns.raw_numbers import ns_of_raws
from traceview.errors import UsageError
from traceview.options import ReadOptions
from traceview.read.layout import UTF8_BOM, without_event_arrays
from traceview.read.nsys import is_sqlite
from traceview.read.raw import RAW_NULL, UNREADABLE, Piece, RawEvent, raw_args
from traceview.read.reader import REPEATED_EVENTS_KEY, ReadStats
from traceview.read.source import check_path
from traceview.read.spans import (
    ChunkKey,
    ChunkPlace,
    SpanChunk,
    SpanColumns,
    flow_id_hasher,
    place_of,
    span_pieces,
    spans_at,
)
from traceview.read.stream import is_pipe
from traceview.render.output import ByteProgress, check_output_path, write_file

FLOW = frozenset({"s", "t", "f"})
_INT64_MAX = 2**63 - 1
_U64 = 2**64 - 1
_MIX = 0x9E3779B97F4A7C15  # the flow hash of the compiled path: cat's hash × this + id's
# A batch's phases as codes (read.spans columns): any other, "M", then the flow phases.
_OTHER, _META = 0, 1
_FLOW_CODES = {"s": 2, "t": 3, "f": 4}
Progress = Callable[[int, int | None], None] | None


def _key(value: Any) -> Any:
    """A pid as a dict key (a list or object, which no sane trace has, as its text)."""
    return value if isinstance(value, int | str | float | None) else repr(value)


# A number with at most 3 decimals: its ns are exact integer arithmetic on the text.
_PLAIN = re.compile(rb"(-?)(\d{1,18})(?:\.(\d{1,3}))?")


def ts_ns(raw: Any) -> int | None:
    """A raw ts or dur as exact ns (half to even below the ns); None when absent or not a
    finite number of at most 30 digits."""
    m = _PLAIN.fullmatch(raw)
    if m is not None:
        sign, whole, frac = m.groups()
        ns = int(whole) * 1000 + (int(frac.ljust(3, b"0")) if frac else 0)
        return -ns if sign else ns
    try:
        value = value_of(raw)
    except Exception:  # any text the number decoder refuses: this event has no time
        return None
    if not isinstance(value, Decimal) or not value.is_finite() or value.adjusted() > 30:
        return None
    return int((value * 1000).to_integral_value(ROUND_HALF_EVEN))


class Judge:
    """Decides, a batch of events at a time, what a Cut keeps (``learn`` in the first pass)."""

    def __init__(self, cut: Cut) -> None:
        self.cut = cut
        self.gpu_pids: dict[Any, str] = {}  # pid → its device, as text
        # Flows by the hash of (cat, id): 8 bytes an end in the window (a collision, about
        # 1 in 10^7 for a million flows, would keep one flow end too many).
        self.flows = np.zeros(0, dtype=np.int64)  # sorted: the flows kept
        self._ends: dict[tuple[Any, str], array[int]] = {}  # (pid, s or f) → flow hashes
        self._gpu_cats: dict[str, int] = {}
        # With the compiled core, a flow's hash is one both paths compute (read.spans).
        self._id_hash = flow_id_hasher()
        self._correlations = np.array(sorted(cut.correlations), dtype=np.int64)
        self._by_ts = np.array(sorted(cut.by_ts), dtype=np.int64)
        # What the first pass saw of each chunk read as columns (see _Seen): 7 numbers a
        # 2 MB chunk, so that the second pass reads only those with an event it may keep.
        self._seen: dict[ChunkKey, _Seen] = {}

    def kind(self, e: RawEvent) -> int:
        """1 for a GPU activity, 2 for a GPU annotation, 0 for anything else."""
        return self.cat_kind(e.cat)

    def cat_kind(self, value: Any) -> int:
        """``kind`` of an event whose cat is ``value``."""
        cat = value if isinstance(value, str) else ""
        kind = self._gpu_cats.get(cat)
        if kind is None:
            kind = 1 if is_gpu_activity(cat) else 2 if cat.lower() == GPU_ANNOTATION_CATEGORY else 0
            self._gpu_cats[cat] = kind
        return kind

    def learn(self, events: list[RawEvent]) -> None:
        """First pass, a batch at a time: GPU processes, and the flow ends inside the window."""
        flows = []
        for e in events:
            ph = _phase(e)
            if ph == "M":
                continue
            kind = self.kind(e)
            if kind in (1, 2):
                pid = _key(e.pid)
                if pid not in self.gpu_pids:  # its device: args decoded once per process
                    self.gpu_pids[pid] = self.device(e) if kind == 1 else str(e.pid)
            elif ph in FLOW:
                flows.append(e)
        for e, ts in zip(flows, ns_values([e.ts for e in flows]), strict=True):
            if self._inside(ts):
                self._ends.setdefault((_key(e.pid), _phase(e)), array("q")).append(self._flow(e))

    def learn_columns(self, c: SpanColumns, key: ChunkKey | None = None) -> None:
        """``learn`` for a batch read as columns: per distinct pid and phase, not per event;
        what it holds kept by ``key`` (see ``unread``)."""
        ph, kind = self._phases(c)[c.ph], self._kinds(c)[c.cat]
        if key is not None:
            self._seen[key] = _Seen.of(c, ph, kind)
        gpu = np.flatnonzero((ph != _META) & (kind > 0))
        if len(gpu):
            _, first = np.unique(c.pid[gpu], return_index=True)
            for at in np.sort(first).tolist():
                i = int(gpu[at])
                pid = _key(c.pids[c.pid[i]])
                if pid not in self.gpu_pids:  # the first GPU event of the process, in order
                    self.gpu_pids[pid] = (
                        self._device_text(c, i) if kind[i] == 1 else str(c.pids[c.pid[i]])
                    )
        flows = (ph >= _FLOW_CODES["s"]) & (kind == 0) & self._inside_all(c)
        if flows.any():
            hashes = self._flow_hashes(c)
            codes = {v: k for k, v in _FLOW_CODES.items()}
            for p in np.unique(c.pid[flows]).tolist():
                mine = flows & (c.pid == p)
                for code in np.unique(ph[mine]).tolist():
                    at = mine & (ph == code)
                    ends = self._ends.setdefault((_key(c.pids[p]), codes[code]), array("q"))
                    ends.frombytes(hashes[at].tobytes())

    def see(self, key: ChunkKey, seen: _Seen) -> None:
        """What ``learn_columns`` would keep of a chunk (by ``key``), known without reading it."""
        self._seen[key] = seen

    def unread(self, key: ChunkKey) -> int | None:
        """The second pass: a chunk's event count when it need not be read, for the first
        pass saw it holds no metadata, no event without a ts, no event that meets the
        window, and (--pstep) no GPU activity whose correlation may be one the steps hold."""
        seen = self._seen.get(key)
        if seen is None or seen.metadata or not seen.all_timed:
            return None
        start, end = self.cut.start_ns, self.cut.end_ns
        if not (
            (end is not None and seen.first > end) or (start is not None and seen.last < start)
        ):
            return None
        if self.cut.steps and seen.gpu_low <= seen.gpu_high:  # (no correlation: by_ts's −1)
            for ids in (self._correlations, self._by_ts):
                at = np.searchsorted(ids, seen.gpu_low)
                if at < len(ids) and ids[at] <= seen.gpu_high:
                    return None
        return seen.events

    def _phases(self, c: SpanColumns) -> np.ndarray:
        """Each distinct ph of a batch as its code (_OTHER, _META, _FLOW_CODES)."""
        codes = [
            _META if ph == "M" else _FLOW_CODES.get(ph, _OTHER) if isinstance(ph, str) else _OTHER
            for ph in c.phs
        ]
        return np.array(codes, dtype=np.int8)

    def _kinds(self, c: SpanColumns) -> np.ndarray:
        """``kind`` of each distinct cat of a batch."""
        return np.array([self.cat_kind(cat) for cat in c.cats], dtype=np.int8)

    def _device_text(self, c: SpanColumns, i: int) -> str:
        """``device`` of the batch's event ``i``."""
        at = int(c.device[i])
        return str(c.pids[c.pid[i]] if at < 0 else c.devices[at])

    def _flow(self, e: RawEvent) -> int:
        """The hash of a flow event's (cat, id), which pair its start and finish; with the
        compiled core, the hash ``_flow_hashes`` gives a batch read as columns."""
        if self._id_hash is None:
            return hash((_key(e.cat), bytes(e.id)))
        mixed = ((hash(_key(e.cat)) & _U64) * _MIX + int(self._id_hash(bytes(e.id)))) & _U64
        return mixed - 2**64 if mixed > _INT64_MAX else mixed

    def _flow_hashes(self, c: SpanColumns) -> np.ndarray:
        """``_flow`` of each event of a batch read as columns (int64)."""
        cats = np.array([hash(_key(cat)) & _U64 for cat in c.cats], dtype=np.uint64)
        mixed: np.ndarray = cats[c.cat] * np.uint64(_MIX) + c.flow
        return mixed.view(np.int64)

    def _inside_all(self, c: SpanColumns) -> np.ndarray:
        """``_inside`` of each event's ts."""
        start, end = _clamped(self.cut.start_ns), _clamped(self.cut.end_ns)
        inside = np.ones(len(c.ts), dtype=bool)
        if start is not None:
            inside &= c.ts >= start
        if end is not None:
            inside &= c.ts <= end
        inside |= ~c.has_ts
        return inside

    def _meets_all(self, c: SpanColumns) -> np.ndarray:
        """``_meets`` of each event."""
        start, end = _clamped(self.cut.start_ns), _clamped(self.cut.end_ns)
        meets = np.ones(len(c.ts), dtype=bool)
        if end is not None:
            meets &= c.ts <= end
        if start is not None:
            dur = np.where(c.has_dur, np.maximum(c.dur, 0), 0)
            meets &= c.ts + dur >= start
        meets |= ~c.has_ts
        return meets

    def settle(self) -> None:
        """After the first pass: the flows whose start and finish are both kept."""
        kept = {"s": [np.zeros(0, dtype=np.int64)], "f": [np.zeros(0, dtype=np.int64)]}
        for (pid, ph), ends in self._ends.items():
            if ph in kept and self.pid_kept(pid):
                kept[ph].append(np.frombuffer(ends, dtype=np.int64))
        starts, finishes = (np.concatenate(kept[ph]) for ph in "sf")
        self.flows = np.intersect1d(starts, finishes)
        self._ends = {}

    def device(self, e: RawEvent) -> str:
        """A GPU activity's device (args.device, else its pid), as text."""
        device = raw_args(e).device
        return str(e.pid if device is None else device)

    def pid_kept(self, pid: Any) -> bool:
        device = self.gpu_pids.get(pid)
        if device is None:
            return self.cut.cpu
        return self.cut.devices is None or device in self.cut.devices

    def keeps(self, events: list[RawEvent]) -> list[bool]:
        """Second pass: whether each event of a batch is written."""
        cut = self.cut
        start, end = cut.start_ns, cut.end_ns
        out = []
        flows: list[tuple[int, int]] = []  # (position, hash) of flow ends in the window
        all_ts, all_dur = ns_values([e.ts for e in events]), ns_values([e.dur for e in events])
        for i, (e, ts, dur) in enumerate(zip(events, all_ts, all_dur, strict=True)):
            ph = _phase(e)
            if ph == "M":
                keep = True
            elif not self.pid_kept(_key(e.pid)):
                keep = False
            elif ph in FLOW:
                keep = self._inside(ts)
                if keep:
                    flows.append((i, self._flow(e)))  # kept if its flow is: decided below
            elif self.kind(e) != 1:
                keep = _meets(ts, dur, start, end)
            elif cut.steps:
                keep = cut.gpu_row_kept(_correlation(e), ts)
            elif cut.devices is not None and self.device(e) not in cut.devices:
                keep = False
            else:
                keep = _meets(ts, dur, start, end)
            out.append(keep)
        if flows:
            at, hashes = zip(*flows, strict=True)
            for i, kept in zip(at, self._kept_flows(hashes), strict=True):
                out[i] = kept
        return out

    def keeps_columns(self, c: SpanColumns) -> np.ndarray:
        """``keeps`` for a batch read as columns (a bool array)."""
        ph, kind = self._phases(c)[c.ph], self._kinds(c)[c.cat]
        pid_kept = np.array([self.pid_kept(_key(pid)) for pid in c.pids], dtype=bool)
        meta = ph == _META
        judged = ~meta & pid_kept[c.pid]
        flow = judged & (ph >= _FLOW_CODES["s"])
        keep: np.ndarray = meta | (judged & ~flow & (kind != 1) & self._meets_all(c))
        at = np.flatnonzero(flow & self._inside_all(c))
        if len(at):
            keep[at] = self._kept_flows(self._flow_hashes(c)[at])
        gpu = np.flatnonzero(judged & ~flow & (kind == 1))
        if len(gpu):
            keep[gpu] = self._gpu_kept(c, gpu)
        return keep

    def _gpu_kept(self, c: SpanColumns, rows: np.ndarray) -> np.ndarray:
        """Whether each GPU activity ``rows`` of a batch is kept."""
        cut = self.cut
        if cut.steps:
            corr = c.correlation[rows]
            kept: np.ndarray = np.isin(corr, self._correlations)
            by_ts = (corr < 0) | np.isin(corr, self._by_ts)
            for n in np.flatnonzero(by_ts).tolist():  # the few an id alone does not decide
                i = rows[n]
                kept[n] = cut.gpu_row_kept(int(corr[n]), int(c.ts[i]) if c.has_ts[i] else None)
            return kept
        kept = self._meets_all(c)[rows]
        if cut.devices is not None:
            devices = np.array([str(d) in cut.devices for d in c.devices] + [False], dtype=bool)
            pids = np.array([str(p) in cut.devices for p in c.pids], dtype=bool)
            at = c.device[rows]
            kept &= np.where(at >= 0, devices[at], pids[c.pid[rows]])
        return kept

    def _kept_flows(self, hashes: Sequence[int] | np.ndarray) -> list[bool]:
        """Whether each flow (by hash) has both ends kept."""
        if not len(self.flows):
            return [False] * len(hashes)
        wanted = np.array(hashes, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.flows, wanted), len(self.flows) - 1)
        kept: list[bool] = (self.flows[at] == wanted).tolist()
        return kept

    def _inside(self, ts: int | None) -> bool:
        """Whether ``ts`` is inside the window (no ts: it is kept)."""
        cut = self.cut
        if ts is None:
            return True
        return (cut.start_ns is None or ts >= cut.start_ns) and (
            cut.end_ns is None or ts <= cut.end_ns
        )


@dataclass(frozen=True)
class _Seen:
    """A chunk as the first pass saw it: its events, whether it holds metadata, whether
    every event has a ts, the first ts and last end (ts + dur) of its events, and the lowest
    and highest correlation of its GPU activities (low > high: none)."""

    events: int
    metadata: bool
    all_timed: bool
    first: int
    last: int
    gpu_low: int
    gpu_high: int

    @classmethod
    def of(cls, c: SpanColumns, ph: np.ndarray, kind: np.ndarray) -> _Seen:
        events = len(c.ts)
        ends = c.ts + np.where(c.has_dur, np.maximum(c.dur, 0), 0)
        gpu = c.correlation[(kind == 1) & (ph < _FLOW_CODES["s"])]
        return cls(
            events,
            bool((ph == _META).any()),
            bool(c.has_ts.all()),
            int(c.ts.min()) if events else 0,
            int(ends.max()) if events else 0,
            int(gpu.min()) if len(gpu) else 0,
            int(gpu.max()) if len(gpu) else -1,
        )


def _clamped(ns: int | None) -> int | None:
    """A window edge within int64 (each ts + dur is within ±2^63: the same comparisons)."""
    return None if ns is None else min(max(ns, -_INT64_MAX - 1), _INT64_MAX)


def _meets(ts: int | None, dur: int | None, start: int | None, end: int | None) -> bool:
    """Whether [ts, ts + dur] meets the window [start, end] (no ts: kept; no dur: 0)."""
    if ts is None:
        return True
    return (end is None or ts <= end) and (start is None or ts + max(dur or 0, 0) >= start)


def ns_values(raws: list[Any]) -> list[int | None]:
    """``ts_ns`` of each raw number, the plain ones parsed a batch at a time."""
    present = [i for i, raw in enumerate(raws) if raw != RAW_NULL]
    if not present:
        return [None] * len(raws)
    parsed = ns_of_raws([raws[i] for i in present])
    if parsed is None:
        return [ts_ns(raw) for raw in raws]
    values: list[int | None] = [None] * len(raws)
    for i, ns in zip(present, parsed.tolist(), strict=True):
        values[i] = ns
    return values


def _phase(e: RawEvent) -> str:
    """The event's ``ph`` (a value that is not text: none)."""
    return e.ph if isinstance(e.ph, str) else ""


def _correlation(e: RawEvent) -> int:
    """The correlation id as the columns keep it: −1 when absent or beyond int64."""
    c = raw_args(e).correlation
    if isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= _INT64_MAX:
        return c
    return -1


# The text of the chunks the second pass reads, kept by the first pass over a gzip trace up
# to this much (the few of a step or a short window: the second pass then inflates nothing;
# a plain file is read again at their places).
HELD_BYTES = 32 << 20


@dataclass
class Learned:
    """What the first pass's reader met (the text around the array, the warnings); where
    each chunk it cut lies when every one was read as columns (else None), and the text of
    those the second pass reads, up to HELD_BYTES."""

    header_text: bytes | None
    trailer_text: bytes | None
    skipped: Counter[str]
    exact_times: bool
    places: list[ChunkPlace] | None
    held: dict[ChunkKey, bytes]


def learn_pass(path: Path, judge: Judge, partial: bool, progress: Progress) -> Learned:
    """The first pass."""
    reader, batches = span_pieces(path, partial, progress)
    places: list[ChunkPlace] | None = []
    held: dict[ChunkKey, bytes] = {}
    room = HELD_BYTES if reader.info.compressed else 0
    for batch in batches:
        if isinstance(batch, SpanChunk) and batch.columns is not None:
            c, key = batch.columns, batch.key
            judge.learn_columns(c, key)
            if places is not None:
                places.append(place_of(reader, key))
                if key[1] <= room and judge.unread(key) is None:  # (the cut is known)
                    held[key] = bytes(c.data[c.offset : c.offset + key[1]])
                    room -= key[1]
        else:
            places = None
            judge.learn([event for _, event in batch])
    judge.settle()
    stats = reader.stats
    if reader.info.stream or stats.repaired_chunks or stats.truncated_at is not None:
        places = None  # (a damaged trace's second pass reads it as the first did)
    if places is None:
        return Learned(None, None, Counter(), False, None, {})
    return Learned(
        reader.header_text, reader.trailer_text, stats.skipped, stats.exact_times, places, held
    )


def learn_indexed(path: Path, judge: Judge, read: ReadStats, progress: Progress) -> Learned | None:
    """The first pass without reading the whole trace again: the chunks the read that found
    the cut noted (``read.index``, see TraceReader) tell which may hold an event the cut
    keeps; only those, those the scanner did not see and, for a cut that needs to know every
    GPU process (--device, --no-cpu), those that show one, are read (at their places) and
    learnt from, in file order. None where the index cannot stand in for the first pass: no
    index (a read from the cache), a damaged trace."""
    index = read.index
    cut = judge.cut
    if (
        index is None
        or len(index.chunks) != read.chunks
        or read.repaired_chunks
        or read.truncated_at is not None
    ):
        return None
    processes = cut.devices is not None or not cut.cpu
    places: list[ChunkPlace] = []
    wanted: set[ChunkKey] = set()
    for n, (end, length, head, tail, seen) in enumerate(index.chunks):
        key = (n, length, head, tail)
        places.append((key, end - length, end))
        if seen is not None and seen[0]:  # (else an event the span scan would refuse)
            judge.see(key, _Seen(seen[1], bool(seen[2]), bool(seen[3]), *seen[4:8]))
        may_show_process = seen is None or not seen[0] or bool(seen[8])
        if judge.unread(key) is None or (processes and may_show_process):
            wanted.add(key)
    held: dict[ChunkKey, bytes] = {}
    room = HELD_BYTES if check_path(path).compressed else 0
    # What the first pass would have counted: the repeated arrays (read with the trailer),
    # the events it could not decode (only in chunks the scanner did not see: read here).
    skipped: Counter[str] = Counter()
    if read.skipped[REPEATED_EVENTS_KEY]:
        skipped[REPEATED_EVENTS_KEY] = read.skipped[REPEATED_EVENTS_KEY]
    batches = spans_at(
        path,
        places,
        lambda key: None if key in wanted else 0,
        index.exact_times,
        skipped,
        progress,
    )
    for batch in batches:
        if isinstance(batch, SpanChunk):
            c, key = batch.columns, batch.key
            if c is None:
                continue
            judge.learn_columns(c, key)
            if key[1] <= room and judge.unread(key) is None:
                held[key] = bytes(c.data[c.offset : c.offset + key[1]])
                room -= key[1]
        else:
            judge.learn([event for _, event in batch])
    judge.settle()
    return Learned(index.header_text, index.trailer_text, skipped, index.exact_times, places, held)


class Copy:
    """The second pass as chunks of bytes (gzip-compressed with ``gzip``); ``kept`` and
    ``read`` count the events once it has run."""

    def __init__(
        self,
        path: Path,
        judge: Judge,
        partial: bool,
        progress: Progress,
        learned: Learned | None = None,
    ) -> None:
        self.path, self.judge, self.partial, self.progress = path, judge, partial, progress
        self.learned = learned
        self.kept = self.read = self.metadata = 0
        self.skipped: Counter[str] = Counter()

    def chunks(self, gzip: bool) -> Iterator[bytes]:
        if not gzip:
            yield from self._text()
            return
        packer = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: a gzip stream
        for chunk in self._text():
            if packed := packer.compress(chunk):
                yield packed
        yield packer.flush()

    def _text(self) -> Iterator[bytes]:
        learned = self.learned
        if learned is not None and learned.places is not None:
            yield from self._text_at(learned, learned.places)
            return
        reader, batches = span_pieces(self.path, self.partial, self.progress, self.judge.unread)
        header, first = False, True
        for batch in batches:
            if not header:  # parsed before the first batch
                yield reader.header_text or b"["
                header = True
            kept = self._kept_text(batch)
            if kept is not None:
                yield (b"\n" if first else b",\n") + kept
                first = False
        if not header:
            yield reader.header_text or b"["
        yield b"\n]"
        yield _closing(reader.header_text, reader.trailer_text, reader.stats.skipped)
        self.skipped = reader.stats.skipped

    def _text_at(self, learned: Learned, places: list[ChunkPlace]) -> Iterator[bytes]:
        """``_text`` reading only the chunks (of those the first pass cut) that may hold an
        event it keeps, held by the first pass or at their places; the text around the array
        as the first pass read it."""
        yield learned.header_text or b"["
        first = True
        skipped, exact = learned.skipped, learned.exact_times
        batches = spans_at(
            self.path, places, self.judge.unread, exact, skipped, self.progress, learned.held
        )
        for batch in batches:
            kept = self._kept_text(batch)
            if kept is not None:
                yield (b"\n" if first else b",\n") + kept
                first = False
        yield b"\n]"
        yield _closing(learned.header_text, learned.trailer_text, skipped)
        self.skipped = skipped

    def _kept_text(self, batch: list[Piece] | SpanChunk) -> bytes | None:
        """The batch's kept events joined by ``,\\n`` (None: none is kept)."""
        if not isinstance(batch, SpanChunk):
            kept = self._kept(batch)
            return b",\n".join(kept) if kept else None
        c = batch.columns
        self.read += batch.total
        if c is None:  # none of its events is kept (Judge.unread)
            return None
        keep = self.judge.keeps_columns(c)
        self.kept += int(keep.sum())
        self.metadata += int(np.count_nonzero(np.array([ph == "M" for ph in c.phs])[c.ph]))
        return c.joined(keep) if keep.any() else None

    def _kept(self, batch: list[Piece]) -> list[Any]:
        self.read += len(batch)
        keeps = self.judge.keeps([event for _, event in batch])
        kept = [raw for (raw, _), keep in zip(batch, keeps, strict=True) if keep]
        self.kept += len(kept)
        self.metadata += sum(1 for _, event in batch if event.ph == "M")
        return kept


def _closing(header: bytes | None, trailer: bytes | None, skipped: Counter[str]) -> bytes:
    """The text after the array's ``]``: as it was (less the arrays of a repeated
    ``traceEvents`` key), or (a truncated trace read with --partial) the ``}`` that closes
    the top-level object."""
    if trailer is not None:
        if skipped[REPEATED_EVENTS_KEY]:  # a repeated key's events: not read
            return without_event_arrays(trailer)
        return trailer
    head = (header or b"").removeprefix(UTF8_BOM).lstrip()
    return b"}" if head.startswith(b"{") else b""


def check_trim_paths(path: Path, output: Path, force: bool, inputs: Sequence[Path]) -> None:
    """Usage errors before any reading: an output that cannot be written, a pipe, an
    Nsight Systems export (trim writes the events of a Chrome trace as they are)."""
    check_output_path(output, force, inputs)
    if is_pipe(path):
        raise UsageError(f"{path}: trim reads the trace twice; give a file, not a pipe")
    if is_sqlite(path):
        raise UsageError(f"{path}: an Nsight Systems export; trim cuts Chrome traces (JSON)")


def write_trimmed(
    path: Path,
    cut: Cut,
    read: ReadOptions,
    output: Path,
    force: bool,
    inputs: Sequence[Path],
    stats: ReadStats | None = None,
) -> Copy:
    """The two passes, the second written to ``output`` (gzip when it ends .gz) atomically;
    what they kept and read said on stderr. ``stats``: the read that found the cut, whose
    chunk index may spare the first pass most of the trace (``learn_indexed``)."""
    judge = Judge(cut)
    with ByteProgress(None, not read.quiet) as progress:
        learned = None if stats is None else learn_indexed(path, judge, stats, progress)
        if learned is None:
            judge = Judge(cut)
            learned = learn_pass(path, judge, read.partial, progress)
    with ByteProgress(None, not read.quiet) as progress:
        copy = Copy(path, judge, read.partial, progress, learned)
        write_file(output, copy.chunks(output.name.lower().endswith(".gz")), force, inputs)
    sys.stderr.write(f"traceview: kept {copy.kept:,} of {copy.read:,} events ({cut.what})\n")
    if copy.skipped[UNREADABLE]:
        sys.stderr.write(f"traceview: warning: {copy.skipped[UNREADABLE]:,} {UNREADABLE}\n")
    if copy.kept == copy.metadata:
        sys.stderr.write(
            f"traceview: warning: no event of the trace is in {cut.what}; the output holds "
            "its header and metadata only\n"
        )
    return copy

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
from traceview.read.raw import RAW_NULL, UNREADABLE, Piece, RawEvent, raw_args, raw_pieces
from traceview.read.reader import REPEATED_EVENTS_KEY, TraceReader
from traceview.read.stream import is_pipe
from traceview.render.output import ByteProgress, check_output_path, write_file

FLOW = frozenset({"s", "t", "f"})
_INT64_MAX = 2**63 - 1
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

    def kind(self, e: RawEvent) -> int:
        """1 for a GPU activity, 2 for a GPU annotation, 0 for anything else."""
        cat = e.cat if isinstance(e.cat, str) else ""
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
                self._ends.setdefault((_key(e.pid), _phase(e)), array("q")).append(_flow(e))

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
                    flows.append((i, _flow(e)))  # kept if its flow is: decided below
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

    def _kept_flows(self, hashes: Sequence[int]) -> list[bool]:
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


def _flow(e: RawEvent) -> int:
    """The hash of a flow event's (cat, id), which pair its start and finish."""
    return hash((_key(e.cat), bytes(e.id)))


def _phase(e: RawEvent) -> str:
    """The event's ``ph`` (a value that is not text: none)."""
    return e.ph if isinstance(e.ph, str) else ""


def _correlation(e: RawEvent) -> int:
    """The correlation id as the columns keep it: −1 when absent or beyond int64."""
    c = raw_args(e).correlation
    if isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= _INT64_MAX:
        return c
    return -1


def learn_pass(path: Path, judge: Judge, partial: bool, progress: Progress) -> TraceReader:
    """The first pass (the reader: what it met, for the warnings)."""
    reader, batches = raw_pieces(path, partial, progress)
    for batch in batches:
        judge.learn([event for _, event in batch])
    judge.settle()
    return reader


class Copy:
    """The second pass as chunks of bytes (gzip-compressed with ``gzip``); ``kept`` and
    ``read`` count the events once it has run."""

    def __init__(self, path: Path, judge: Judge, partial: bool, progress: Progress) -> None:
        self.path, self.judge, self.partial, self.progress = path, judge, partial, progress
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
        reader, batches = raw_pieces(self.path, self.partial, self.progress)
        header, first = False, True
        for batch in batches:
            if not header:  # parsed before the first batch
                yield reader.header_text or b"["
                header = True
            kept = self._kept(batch)
            if kept:
                yield (b"\n" if first else b",\n") + b",\n".join(kept)
                first = False
        if not header:
            yield reader.header_text or b"["
        yield b"\n]"
        yield _closing(reader)
        self.skipped = reader.stats.skipped

    def _kept(self, batch: list[Piece]) -> list[Any]:
        self.read += len(batch)
        keeps = self.judge.keeps([event for _, event in batch])
        kept = [raw for (raw, _), keep in zip(batch, keeps, strict=True) if keep]
        self.kept += len(kept)
        self.metadata += sum(1 for _, event in batch if event.ph == "M")
        return kept


def _closing(reader: TraceReader) -> bytes:
    """The text after the array's ``]``: as it was (less the arrays of a repeated
    ``traceEvents`` key), or (a truncated trace read with --partial) the ``}`` that closes
    the top-level object."""
    if reader.trailer_text is not None:
        if reader.stats.skipped[REPEATED_EVENTS_KEY]:  # a repeated key's events: not read
            return without_event_arrays(reader.trailer_text)
        return reader.trailer_text
    head = (reader.header_text or b"").removeprefix(UTF8_BOM).lstrip()
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
    path: Path, cut: Cut, read: ReadOptions, output: Path, force: bool, inputs: Sequence[Path]
) -> Copy:
    """The two passes, the second written to ``output`` (gzip when it ends .gz) atomically;
    what they kept and read said on stderr."""
    judge = Judge(cut)
    with ByteProgress(None, not read.quiet) as progress:
        learn_pass(path, judge, read.partial, progress)
    with ByteProgress(None, not read.quiet) as progress:
        copy = Copy(path, judge, read.partial, progress)
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

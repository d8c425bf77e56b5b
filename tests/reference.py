"""Independent reference implementation of traceview's analyses, for tests only.

Deliberately slow and obvious: the whole trace is loaded with stdlib ``json`` (numbers as
``Decimal``), every timestamp becomes an exact integer number of nanoseconds, and every statistic
is computed from those integers with exact arithmetic (``int``/``Fraction``), converted to float
microseconds only at the very end (each conversion is a single correctly rounded division).

It must never import ``traceview``: the fast implementation is checked against it.

Conventions shared by every function below (the fast code must follow the same ones):

* An event takes part in a timing analysis only when its ``ts`` is a finite number (``int``,
  ``Decimal`` or ``float``; ``bool``, strings, ``NaN`` and ``±Infinity`` are "not a number").
* ``dur`` missing, or not a finite number, counts as 0 ns.
* Numbers are converted to ns as ``Decimal(text) * 1000`` rounded half-even; a Python ``float``
  handed in directly (hand-made events) is converted through its shortest ``repr``.
* The "name" of an event is ``str(event.get("name", ""))``.
* Intervals are closed ``[ts, ts + dur]``; an interval whose end precedes its start (negative
  ``dur``) contributes nothing to a union.
"""

from __future__ import annotations

import gzip
import itertools
import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

Event = dict[str, Any]
Interval = tuple[int, int]

KIND_CATEGORIES: dict[str, frozenset[str]] = {
    "kernel": frozenset({"kernel"}),
    "memcpy": frozenset({"gpu_memcpy", "memcpy"}),
    "memset": frozenset({"gpu_memset", "memset"}),
}
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "runtime"})
# Compared ignoring case; "Operator" is 2021 kineto's name for cpu_op (resnet50 trace).
CPU_STEP_CATEGORIES = frozenset({"user_annotation", "cpu_op", "operator"})
GPU_STEP_CATEGORY = "gpu_user_annotation"
STEP_NAME = re.compile(r"ProfilerStep#(\d+)")
ALL_BUSY = ("kernel", "memcpy", "memset")

# Plenty of digits so that multiplying any real timestamp by 1000 is exact.
_EXACT = Context(prec=200, rounding=ROUND_HALF_EVEN)


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def load_trace(path: str | Path) -> tuple[dict[str, Any], list[Event]]:
    """Load a whole trace file; return (header without ``traceEvents``, list of event dicts).

    gzip is detected by its magic bytes, not by the file name. Invalid UTF-8 is kept as
    surrogate escapes. Non-dict entries of the event array are dropped.
    """
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="surrogateescape")
    text = text.removeprefix("\ufeff")
    doc = json.loads(text, parse_float=Decimal)  # NaN/Infinity become float nan/inf
    if isinstance(doc, list):
        header: dict[str, Any] = {}
        events = doc
    elif isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        header = {k: v for k, v in doc.items() if k != "traceEvents"}
        events = doc["traceEvents"]
    else:
        raise ValueError(f"{path}: not a Chrome trace (no traceEvents array)")
    return header, [e for e in events if isinstance(e, dict)]


# --------------------------------------------------------------------------------------------
# Exact time conversion and event classification
# --------------------------------------------------------------------------------------------


def to_ns(value: Any) -> int | None:
    """Exact integer ns for a µs value, or None when it is not a finite number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        value = Decimal(repr(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            return None
        return int(_EXACT.multiply(value, 1000).to_integral_value(rounding=ROUND_HALF_EVEN))
    return None


def ts_ns(event: Event) -> int | None:
    """The event's start in ns, or None when ``ts`` is not a number."""
    return to_ns(event.get("ts"))


def dur_ns(event: Event) -> int:
    """The event's duration in ns; missing or non-numeric ``dur`` counts as 0."""
    d = to_ns(event.get("dur"))
    return 0 if d is None else d


def interval_ns(event: Event) -> Interval:
    """``(start, end)`` in ns of an event with a numeric ts."""
    start = ts_ns(event)
    assert start is not None
    return start, start + dur_ns(event)


def event_name(event: Event) -> str:
    return str(event.get("name", ""))


def _cat(event: Event) -> str:
    return str(event.get("cat")).lower()


def _args(event: Event) -> dict[str, Any]:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def gpu_kind(event: Event) -> str | None:
    """The kind ("kernel", "memcpy", "memset") of timed ph-X GPU work, else None."""
    if event.get("ph") != "X":
        return None
    cat = _cat(event)
    for kind, cats in KIND_CATEGORIES.items():
        if cat in cats:
            return kind if ts_ns(event) is not None else None
    return None


def _check_kinds(kinds: Iterable[str]) -> frozenset[str]:
    kinds = frozenset(kinds)
    unknown = kinds - KIND_CATEGORIES.keys()
    if unknown:
        raise ValueError(f"unknown GPU event kinds: {sorted(unknown)}")
    return kinds


def gpu_events(events: Iterable[Event], include: Iterable[str] = ("kernel",)) -> list[Event]:
    """The events of the given kinds (kernel/memcpy/memset), in file order."""
    kinds = _check_kinds(include)
    return [e for e in events if gpu_kind(e) in kinds]


# --------------------------------------------------------------------------------------------
# Exact statistics
# --------------------------------------------------------------------------------------------


def union_length_ns(intervals: Iterable[Interval]) -> int:
    """Total length of the union of closed intervals (end < start contributes nothing)."""
    total = 0
    cur_start: int | None = None
    cur_end = 0
    for start, end in sorted(iv for iv in intervals if iv[1] >= iv[0]):
        if cur_start is None or start > cur_end:
            if cur_start is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_start is not None:
        total += cur_end - cur_start
    return total


def us(ns: int | Fraction) -> float:
    """ns → µs as one correctly rounded division."""
    return float(Fraction(ns) / 1000)


def nearest_rank(sorted_values: list[int], p: int) -> int:
    """Nearest-rank percentile: ``sorted_values[ceil(p/100*n) - 1]`` (rank at least 1)."""
    n = len(sorted_values)
    rank = max(1, -(-p * n // 100))  # exact integer ceil(p*n/100)
    return sorted_values[rank - 1]


def sample_std_ns(values: list[int]) -> float:
    """Sample standard deviation (n-1) in ns computed exactly; 0.0 for fewer than 2 values."""
    n = len(values)
    if n < 2:
        return 0.0
    s1 = sum(values)
    s2 = sum(v * v for v in values)
    variance = Fraction(n * s2 - s1 * s1, n * (n - 1))
    return math.sqrt(variance)


def describe_ns(values: list[int]) -> dict[str, Any]:
    """count/total/mean/std/min/max/p50/p90/p99 of integer-ns values, times as µs floats; and
    the integer ones as ns too (``total_ns``, ``min_ns``, ``max_ns``, ``p50_ns`` ...)."""
    ordered = sorted(values)
    n = len(ordered)
    total = sum(ordered)
    return {
        "count": n,
        "total_ns": total,
        "min_ns": ordered[0],
        "max_ns": ordered[-1],
        **{f"p{p}_ns": nearest_rank(ordered, p) for p in (50, 90, 99)},
        "total_us": us(total),
        "mean_us": us(Fraction(total, n)),
        "std_us": sample_std_ns(ordered) / 1000,
        "min_us": us(ordered[0]),
        "max_us": us(ordered[-1]),
        "p50_us": us(nearest_rank(ordered, 50)),
        "p90_us": us(nearest_rank(ordered, 90)),
        "p99_us": us(nearest_rank(ordered, 99)),
    }


def _percent(part: int, whole: int) -> float:
    return float(Fraction(part * 100, whole)) if whole else 0.0


# --------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------

NameFilter = str | Callable[[str], bool] | None


def _name_matches(name: str, name_filter: NameFilter) -> bool:
    if name_filter is None:
        return True
    if callable(name_filter):
        return bool(name_filter(name))
    return re.search(name_filter, name) is not None


def selected_gpu_events(
    events: list[Event],
    include: Iterable[str] = ("kernel",),
    name_filter: NameFilter = None,
    steps: set[int] | None = None,
) -> list[Event]:
    """GPU events of the kinds in ``include``, restricted to ``steps`` (see kernels_in_steps)
    when given, and to names matching ``name_filter`` (a regex searched with ``re.search``,
    case-sensitive, or a predicate) when given."""
    if steps is not None:
        chosen = kernels_in_steps(events, steps, include=include)
    else:
        chosen = gpu_events(events, include)
    return [e for e in chosen if _name_matches(event_name(e), name_filter)]


def kernel_stats(
    events: list[Event],
    include: Iterable[str] = ("kernel",),
    name_filter: NameFilter = None,
    steps: set[int] | None = None,
) -> dict[str, dict[str, Any]]:
    """Per exact name: count, total/mean/std/min/max/p50/p90/p99 (µs), pct_launches, pct_time.

    The percentages are relative to the selected set itself (after include, steps and
    name_filter), i.e. to ``kernel_totals`` called with the same arguments, so they sum to 100.
    Rows are ordered by total time descending, then name.
    """
    chosen = selected_gpu_events(events, include, name_filter, steps)
    by_name: dict[str, list[int]] = defaultdict(list)
    for e in chosen:
        by_name[event_name(e)].append(dur_ns(e))
    all_count = len(chosen)
    all_time = sum(sum(durs) for durs in by_name.values())
    order = sorted(by_name, key=lambda name: (-sum(by_name[name]), name))
    stats: dict[str, dict[str, Any]] = {}
    for name in order:
        durs = by_name[name]
        row = describe_ns(durs)
        row["pct_launches"] = _percent(len(durs), all_count)
        row["pct_time"] = _percent(sum(durs), all_time)
        stats[name] = row
    return stats


def kernel_totals(
    events: list[Event],
    include: Iterable[str] = ("kernel",),
    name_filter: NameFilter = None,
    steps: set[int] | None = None,
) -> dict[str, Any]:
    """{"count", "total_us", "distinct"} over the same selection as kernel_stats."""
    chosen = selected_gpu_events(events, include, name_filter, steps)
    return {
        "count": len(chosen),
        "total_us": us(sum(dur_ns(e) for e in chosen)),
        "distinct": len({event_name(e) for e in chosen}),
    }


def _on_timeline(event: Event) -> bool:
    """GPU activity, runtime/driver calls and ProfilerStep annotations (ph X): the events
    that define the trace span (the profiler's own "Trace" span event is not among them)."""
    if event.get("ph") != "X" or ts_ns(event) is None:
        return False
    if gpu_kind(event) is not None or _cat(event) in RUNTIME_CATEGORIES:
        return True
    step_cats = CPU_STEP_CATEGORIES | {GPU_STEP_CATEGORY}
    return _step_number(event) is not None and _cat(event) in step_cats


def trace_start_ns(events: Iterable[Event]) -> int | None:
    """The earliest start of the timeline events (see _on_timeline), None when there are none."""
    return min((interval_ns(e)[0] for e in events if _on_timeline(e)), default=None)


def trace_span_ns(events: Iterable[Event]) -> int:
    """max(ts+dur) - min(ts) over the timeline events (see _on_timeline; 0 when none)."""
    spans = [interval_ns(e) for e in events if _on_timeline(e)]
    if not spans:
        return 0
    return max(end for _, end in spans) - min(start for start, _ in spans)


def trace_span_us(events: Iterable[Event]) -> float:
    return us(trace_span_ns(events))


def gpu_busy_ns(events: Iterable[Event], include: Iterable[str] = ("kernel",)) -> int:
    """Length of the union of the intervals of all included GPU events, all devices together."""
    return union_length_ns(interval_ns(e) for e in gpu_events(events, include))


def gpu_busy_us(events: Iterable[Event], include: Iterable[str] = ("kernel",)) -> float:
    return us(gpu_busy_ns(events, include))


def gpu_busy_pct(events: list[Event], include: Iterable[str] = ("kernel",)) -> float:
    """gpu_busy / trace_span × 100 (0 when the span is 0)."""
    return _percent(gpu_busy_ns(events, include), trace_span_ns(events))


# --------------------------------------------------------------------------------------------
# Steps
# --------------------------------------------------------------------------------------------


def _step_number(event: Event) -> int | None:
    m = STEP_NAME.fullmatch(event_name(event))
    return int(m.group(1)) if m else None


def _windows_from(events: Iterable[Event], accept: Callable[[Event], bool]) -> dict[int, Interval]:
    """Step windows from ph-X ``ProfilerStep#N`` events passing ``accept``. Should several
    events carry the same N, the window is their hull (earliest start, latest end)."""
    windows: dict[int, Interval] = {}
    for e in events:
        n = _step_number(e)
        if n is None or e.get("ph") != "X" or ts_ns(e) is None or not accept(e):
            continue
        start, end = interval_ns(e)
        if n in windows:
            start, end = min(start, windows[n][0]), max(end, windows[n][1])
        windows[n] = (start, end)
    return windows


def step_windows(events: list[Event]) -> dict[int, tuple[int, int, str]]:
    """{N: (start_ns, end_ns, source)} with source "cpu" (a ``user_annotation``/``cpu_op``
    event, category compared exactly) or "gpu" (a ``gpu_user_annotation`` event, used only
    for step numbers that have no CPU window). Sorted by N."""
    cpu = _windows_from(events, lambda e: _cat(e) in CPU_STEP_CATEGORIES)
    gpu = _windows_from(events, lambda e: _cat(e) == GPU_STEP_CATEGORY)
    windows = {n: (s, t, "cpu") for n, (s, t) in cpu.items()}
    for n, (s, t) in gpu.items():
        windows.setdefault(n, (s, t, "gpu"))
    return dict(sorted(windows.items()))


def launch_ts_by_correlation(events: Iterable[Event]) -> dict[Hashable, int]:
    """{args.correlation: ts_ns of the earliest runtime/driver event with that correlation}.
    Events without a correlation (or an unhashable one) are ignored."""
    launches: dict[Hashable, int] = {}
    for e in events:
        if _cat(e) not in RUNTIME_CATEGORIES:
            continue
        corr = _args(e).get("correlation")
        start = ts_ns(e)
        if corr is None or start is None or not isinstance(corr, Hashable):
            continue
        if corr not in launches or start < launches[corr]:
            launches[corr] = start
    return launches


def _assignment_time(event: Event, launches: dict[Hashable, int], source: str) -> int:
    """The time tested against a step window: the launch time for CPU windows when the launch
    is known, the GPU event's own start otherwise (always its own start for GPU windows)."""
    own = ts_ns(event)
    assert own is not None
    if source != "cpu":
        return own
    corr = _args(event).get("correlation")
    if corr is None or not isinstance(corr, Hashable):
        return own
    return launches.get(corr, own)


def _in_step(event: Event, window: tuple[int, int, str], launches: dict[Hashable, int]) -> bool:
    start, end, source = window
    return start <= _assignment_time(event, launches, source) <= end


def kernels_in_steps(
    events: list[Event], steps: set[int], include: Iterable[str] = ("kernel",)
) -> list[Event]:
    """GPU events (kinds in ``include``) belonging to at least one of ``steps``, in file order.

    Windows are closed, so an event may belong to two touching steps; it is listed once.
    Unknown step numbers select nothing; an event launched before the trace is in no step.
    """
    windows = step_windows(events)
    wanted = [windows[n] for n in sorted(steps) if n in windows]
    launches = launch_ts_by_correlation(events)
    before = launched_before(events)
    return [
        e
        for e in gpu_events(events, include)
        if id(e) not in before and any(_in_step(e, w, launches) for w in wanted)
    ]


# --------------------------------------------------------------------------------------------
# Gaps
# --------------------------------------------------------------------------------------------

StreamKey = tuple[Any, Any]


def stream_key(event: Event) -> StreamKey:
    """(device_key, args.stream) — args.stream when args.device is present, else tid."""
    args = _args(event)
    device, stream = args.get("device"), args.get("stream")
    if device is None:
        return event.get("pid"), event.get("tid")
    return device, stream if stream is not None else event.get("tid")


def device_key(event: Event) -> Any:
    """args.device when present (not None), else pid."""
    device = _args(event).get("device")
    return device if device is not None else event.get("pid")


def _stream_order(event: Event) -> tuple[int, int, str]:
    start, end = interval_ns(event)
    return start, end, event_name(event)


def _window(intervals: list[Interval]) -> int:
    return max(e for _, e in intervals) - min(s for s, _ in intervals)


def gap_stats(events: list[Event], busy: Iterable[str] = ALL_BUSY) -> dict[str, Any]:
    """Idle gaps between consecutive busy events on each stream, plus per-device idle time.

    Returns {"streams", "devices", "transitions", "totals", "all_gaps_us", "all_gaps_ns"}:
    - streams[(device, stream)]: events, gaps, gap_total_us, overlaps, overlap_us, zero_gaps,
      window_us, busy_us, idle_us;
    - devices[device]: streams, events, window_us, busy_us, idle_us, idle_pct, over the busy
      events grouped by device_key (normally the streams (device, *); an event with
      args.device but no args.stream sits on stream (pid, tid) yet counts for args.device);
    - transitions[(prev name, next name)]: count, total_us, mean_us, std_us, min_us, max_us of
      the signed gap (plus the percentiles describe_ns gives);
    - totals: gaps, gap_total_us, idle_us (sum of stream idle), mean_gap_us, overlaps,
      overlap_us, zero_gaps, events;
    - all_gaps_ns / all_gaps_us: every positive gap, stream by stream in stream-key order.
    Streams and devices are ordered by ``repr`` of their key (keys may mix ints and strings).
    """
    busy_events = gpu_events(events, busy)
    per_stream: dict[StreamKey, list[Event]] = defaultdict(list)
    per_device: dict[Any, list[Event]] = defaultdict(list)
    for e in busy_events:
        per_stream[stream_key(e)].append(e)
        per_device[device_key(e)].append(e)

    streams: dict[StreamKey, dict[str, Any]] = {}
    transitions: dict[tuple[str, str], list[int]] = defaultdict(list)
    all_gaps: list[int] = []
    idle_ns: dict[StreamKey, int] = {}
    overlap_ns: dict[StreamKey, int] = {}
    for key in sorted(per_stream, key=repr):
        ordered = sorted(per_stream[key], key=_stream_order)
        gaps, overlaps, zero = [], [], 0
        for prev, nxt in itertools.pairwise(ordered):
            gap = interval_ns(nxt)[0] - interval_ns(prev)[1]
            transitions[(event_name(prev), event_name(nxt))].append(gap)
            if gap > 0:
                gaps.append(gap)
            elif gap < 0:
                overlaps.append(-gap)
            else:
                zero += 1
        all_gaps.extend(gaps)
        intervals = [interval_ns(e) for e in ordered]
        window, busy_ns = _window(intervals), union_length_ns(intervals)
        streams[key] = {
            "events": len(ordered),
            "gaps": len(gaps),
            "gap_total_us": us(sum(gaps)),
            "overlaps": len(overlaps),
            "overlap_us": us(sum(overlaps)),
            "zero_gaps": zero,
            "window_us": us(window),
            "busy_us": us(busy_ns),
            "idle_us": us(window - busy_ns),
        }
        idle_ns[key], overlap_ns[key] = window - busy_ns, sum(overlaps)

    devices: dict[Any, dict[str, Any]] = {}
    for device in sorted(per_device, key=repr):
        intervals = [interval_ns(e) for e in per_device[device]]
        window, busy_ns = _window(intervals), union_length_ns(intervals)
        devices[device] = {
            "streams": len({stream_key(e) for e in per_device[device]}),
            "events": len(intervals),
            "window_us": us(window),
            "busy_us": us(busy_ns),
            "idle_us": us(window - busy_ns),
            "idle_pct": _percent(window - busy_ns, window),
        }

    n_gaps, gap_total = len(all_gaps), sum(all_gaps)
    totals = {
        "gaps": n_gaps,
        "gap_total_us": us(gap_total),
        "idle_us": us(sum(idle_ns.values())),
        "mean_gap_us": us(Fraction(gap_total, n_gaps)) if n_gaps else 0.0,
        "overlaps": sum(s["overlaps"] for s in streams.values()),
        "overlap_us": us(sum(overlap_ns.values())),
        "zero_gaps": sum(s["zero_gaps"] for s in streams.values()),
        "events": sum(s["events"] for s in streams.values()),
    }
    return {
        "streams": streams,
        "devices": devices,
        "transitions": {k: describe_ns(v) for k, v in transitions.items()},
        "totals": totals,
        "all_gaps_ns": all_gaps,
        "all_gaps_us": [us(g) for g in all_gaps],
    }


def all_gaps_us(events: list[Event], busy: Iterable[str] = ALL_BUSY) -> list[float]:
    """Every positive gap (µs) of gap_stats, for histogram checks."""
    gaps: list[float] = gap_stats(events, busy)["all_gaps_us"]
    return gaps


# --------------------------------------------------------------------------------------------
# Device gaps, host wait and the steps' device windows
# --------------------------------------------------------------------------------------------


def busy_by_device(events: list[Event], busy: Iterable[str] = ALL_BUSY) -> dict[Any, list[Event]]:
    """The busy events (the kinds asked, dur > 0) of each device (device_key)."""
    out: dict[Any, list[Event]] = defaultdict(list)
    for e in gpu_events(events, busy):
        if dur_ns(e) > 0:
            out[device_key(e)].append(e)
    return dict(out)


def device_figures(members: list[Event]) -> dict[str, int]:
    """window (first start to last end), busy (union) and idle of some busy events, in ns."""
    intervals = [interval_ns(e) for e in members]
    window, busy_ns = _window(intervals), union_length_ns(intervals)
    return {"window_ns": window, "busy_ns": busy_ns, "idle_ns": window - busy_ns}


def device_gaps(events: list[Event], busy: Iterable[str] = ALL_BUSY) -> dict[Any, dict[str, Any]]:
    """Per device: its figures and every device gap, walked point by point.

    A gap is a stretch (a, b), a < b, that no busy event of the device covers, with events
    both before and after it. Found by walking the events in start order and keeping the
    latest end so far. before: of the events ending at a, the latest start, then the smallest
    name; after: of those starting at b, the earliest end, then the smallest name. host wait
    = clamp(launch − a, 0, b − a) with launch the earliest runtime call of after's
    correlation id (0 without one); launch latency = b − a − host wait when after has a
    launch and that is at most 50 µs, else 0; cause = cpu when host wait > 0, else launch
    latency when that is above 0, else gpu wait.
    """
    launches = launch_ts_by_correlation(events)
    out: dict[Any, dict[str, Any]] = {}
    for device, members in busy_by_device(events, busy).items():
        ends, starts = defaultdict(list), defaultdict(list)
        for e in members:
            starts[interval_ns(e)[0]].append(e)
            ends[interval_ns(e)[1]].append(e)
        ordered = sorted(members, key=lambda e: interval_ns(e)[0])
        gaps = []
        reach = interval_ns(ordered[0])[1]
        for e in ordered[1:]:
            start, end = interval_ns(e)
            if start > reach:
                gaps.append(_describe_gap(ends[reach], starts[start], reach, start, launches))
            reach = max(reach, end)
        out[device] = {**device_figures(members), "gaps": gaps}
    return out


def _describe_gap(
    ending: list[Event], starting: list[Event], a: int, b: int, launches: dict[Hashable, int]
) -> dict[str, Any]:
    before = min(ending, key=lambda e: (-interval_ns(e)[0], event_name(e)))
    after = min(starting, key=lambda e: (interval_ns(e)[1], event_name(e)))
    correlation = _args(after).get("correlation")
    launch = launches.get(correlation) if correlation is not None else None
    wait = 0 if launch is None else min(max(launch - a, 0), b - a)
    rest = b - a - wait
    latency = rest if launch is not None and rest <= 50_000 else 0
    cause = "cpu" if wait > 0 else "launch latency" if latency > 0 else "gpu wait"
    return {
        "start_ns": a,
        "end_ns": b,
        "before": event_name(before),
        "after": event_name(after),
        "after_stream": stream_key(after),
        "host_wait_ns": wait,
        "launch_latency_ns": latency,
        "cause": cause,
    }


def launched_before(events: list[Event]) -> set[int]:
    """The ``id()`` of each GPU activity launched before the trace (docs/metrics.md): no
    runtime call carries its correlation id, and it starts before the first activity of its
    device that one does carry."""
    gpu = [e for e in events if gpu_kind(e) is not None]
    launched = {
        _args(e).get("correlation")
        for e in events
        if e.get("ph") == "X"
        and str(e.get("cat", "")).lower() in ("cuda_runtime", "cuda_driver", "runtime")
    }
    launched.discard(None)
    first: dict[Any, int] = {}
    for e in gpu:
        if _args(e).get("correlation", -1) in launched:
            start = interval_ns(e)[0]
            first[_args(e).get("device")] = min(first.get(_args(e).get("device"), start), start)
    if not first:
        return set()
    return {
        id(e)
        for e in gpu
        if _args(e).get("correlation", -1) not in launched
        and interval_ns(e)[0] < first.get(_args(e).get("device"), -(2**63))
    }


def step_devices(events: list[Event], busy: Iterable[str] = ALL_BUSY) -> dict[int, dict]:
    """Per step: cpu start/end, kernels and kernel time (every attributed kernel), and per
    device the window/busy/idle of its attributed busy events (dur > 0), lag = GPU start −
    CPU step start and queue = GPU start − the earliest launch of those events (an event
    without a launch counts its own start; one launched before the trace is in no step)
    (all ns)."""
    windows = step_windows(events)
    launches = launch_ts_by_correlation(events)
    kinds = _check_kinds(busy)
    before = launched_before(events)
    out: dict[int, dict] = {}
    for step, window in windows.items():
        members = [
            e
            for e in events
            if gpu_kind(e) is not None and id(e) not in before and _in_step(e, window, launches)
        ]
        kernels = [e for e in members if gpu_kind(e) == "kernel"]
        per_device: dict[Any, list[Event]] = defaultdict(list)
        for e in members:
            if gpu_kind(e) in kinds and dur_ns(e) > 0:
                per_device[device_key(e)].append(e)
        devices = {}
        for device, group in per_device.items():
            figures = device_figures(group)
            first = min(interval_ns(e)[0] for e in group)
            launched = min(_assignment_time(e, launches, "cpu") for e in group)
            devices[device] = {
                **figures,
                "gpu_start_ns": first,
                "lag_ns": first - window[0],
                "queue_ns": first - launched,
            }
        out[step] = {
            "cpu_start_ns": window[0],
            "cpu_end_ns": window[1],
            "kernels": len(kernels),
            "kernel_time_ns": sum(dur_ns(e) for e in kernels),
            "devices": devices,
        }
    return out


def step_times(steps: dict[int, dict]) -> dict[int, tuple[int, str]]:
    """Per step (``step_devices``' result): its step time and what paced it. When a device's
    queue is at least a tenth of the CPU step (it ran behind the CPU), the step time is the
    longest period of the step's devices (a device's: its GPU end minus the GPU end of the
    previous step with work on it; the first step, or one ending no later than the previous:
    its window); else the CPU duration."""
    out = {}
    numbers = sorted(steps)
    for i, n in enumerate(numbers):
        s = steps[n]
        cpu = s["cpu_end_ns"] - s["cpu_start_ns"]
        periods = []
        behind = any(
            d["queue_ns"] > 0 and d["queue_ns"] >= 0.1 * cpu for d in s["devices"].values()
        )
        for device, d in s["devices"].items():
            if not behind:
                break
            end = d["gpu_start_ns"] + d["window_ns"]
            earlier = [steps[m]["devices"] for m in numbers[:i]]
            ends = [
                x[device]["gpu_start_ns"] + x[device]["window_ns"] for x in earlier if device in x
            ]
            if ends and ends[-1] < end:
                periods.append(end - ends[-1])
            else:
                periods.append(d["window_ns"])
        out[n] = (max(periods), "gpu") if periods else (cpu, "cpu")
    return out


# --------------------------------------------------------------------------------------------
# CPU context of a gap: what held it
# --------------------------------------------------------------------------------------------

SYNC_CALLS = re.compile(r"^(cuda|hip|cu)((Stream|Device|Event|Ctx)Synchronize|Memcpy)")


def _is_sync(name: str) -> bool:
    return SYNC_CALLS.match(name) is not None and "Async" not in name


def held_by(events: list[Event], after: Event, start: int, end: int, wait: int) -> dict | None:
    """The launching thread of ``after`` (its earliest runtime call; the first in the file
    among equal starts); on it, the CPU ops (cat cpu_op / user_annotation / Operator, not
    ProfilerStep#N) overlapping [start, start + wait] by a positive time, ranked by that
    time, then the latest start, the earliest end, the smallest name (top 3); the sync
    runtime calls overlapping [start, end] (top 3, same ranking); and the time of the host
    wait window some of those ops or sync calls covers. None when ``after`` has no launch."""
    correlation = _args(after).get("correlation")
    if correlation is None:
        return None
    launches = [
        e
        for e in events
        if e.get("ph") == "X"
        and _cat(e) in RUNTIME_CATEGORIES
        and ts_ns(e) is not None
        and _args(e).get("correlation") == correlation
    ]
    if not launches:
        return None
    launch = min(launches, key=lambda e: ts_ns(e) or 0)
    thread = (launch.get("pid"), launch.get("tid"))
    mine = [
        e
        for e in events
        if e.get("ph") == "X" and (e.get("pid"), e.get("tid")) == thread and ts_ns(e) is not None
    ]

    def overlap(e: Event, lo: int, hi: int) -> int:
        s, f = interval_ns(e)
        return min(f, hi) - max(s, lo)

    def ranked(found: list[tuple[int, Event]]) -> list[tuple[str, int]]:
        found.sort(
            key=lambda p: (-p[0], -interval_ns(p[1])[0], interval_ns(p[1])[1], event_name(p[1]))
        )
        return [(event_name(e), o) for o, e in found[:3]]

    ops = [
        (overlap(e, start, start + wait), e)
        for e in mine
        if _cat(e) in CPU_STEP_CATEGORIES and not event_name(e).startswith("ProfilerStep#")
    ]
    ops = [(o, e) for o, e in ops if o > 0]
    syncs = [
        (overlap(e, start, end), e)
        for e in mine
        if _cat(e) in RUNTIME_CATEGORIES and _is_sync(event_name(e))
    ]
    holding = [e for _, e in ops] + [e for _, e in syncs if overlap(e, start, start + wait) > 0]
    covered = union_length_ns(
        [(max(interval_ns(e)[0], start), min(interval_ns(e)[1], start + wait)) for e in holding]
    )
    return {
        "thread": thread,
        "launch_ns": ts_ns(launch),
        "ops": ranked(ops),
        "covered_ns": covered,
        "syncs": ranked([(o, e) for o, e in syncs if o > 0]),
    }


# --------------------------------------------------------------------------------------------
# Operators: which cpu_op launched each kernel
# --------------------------------------------------------------------------------------------

CPU_OP_CATEGORIES = frozenset({"cpu_op", "operator"})


IMPLEMENTATION_OPS = {"aten::copy_", "aten::clamp_min", "aten::fill_"}


def fused_op_label(name: str) -> str:
    """An op's name as Inductor's kernel names spell it: ``aten::`` dropped, an in-place op as
    its functional form (``add_`` → ``add``)."""
    if name.startswith("aten::"):
        name = name[len("aten::") :]
        if name.endswith("_") and not name.endswith("__"):
            name = name[:-1]
    return name


def first_launches(events: list[Event]) -> dict[Any, Event]:
    """By correlation id: the earliest runtime call carrying it (the first in the file among
    equal starts)."""
    launches: dict[Any, Event] = {}
    for e in events:
        if e.get("ph") == "X" and _cat(e) in RUNTIME_CATEGORIES and ts_ns(e) is not None:
            c = _args(e).get("correlation")
            if c is not None and (c not in launches or ts_ns(e) < ts_ns(launches[c])):  # type: ignore[operator]
                launches[c] = e
    return launches


def fusion_leaves(events: list[Event]) -> list[tuple[Event, str | None]]:
    """Per kernel (in file order): its leaf op as fused-op grouping takes it — the leaf op,
    or where that is an implementation op (the copy of a cast, the clamp_min of a relu), the
    innermost op around the launch that is not one — or None without an op."""
    launches = first_launches(events)
    ops = [
        e
        for e in events
        if e.get("ph") == "X"
        and _cat(e) in CPU_OP_CATEGORIES
        and ts_ns(e) is not None
        and not event_name(e).startswith("ProfilerStep#")
        and event_name(e) not in IMPLEMENTATION_OPS
    ]
    out: list[tuple[Event, str | None]] = []
    for kernel, leaf, _ in op_links(events):
        if leaf not in IMPLEMENTATION_OPS:
            out.append((kernel, leaf))
            continue
        launch = launches[_args(kernel).get("correlation")]
        at = ts_ns(launch)
        around = [
            o
            for o in ops
            if (o.get("pid"), o.get("tid")) == (launch.get("pid"), launch.get("tid"))
            and interval_ns(o)[0] <= at <= interval_ns(o)[1]  # type: ignore[operator]
        ]
        around.sort(key=lambda o: (-ts_ns(o), dur_ns(o), event_name(o)))  # type: ignore[operator]
        out.append((kernel, event_name(around[0]) if around else leaf))
    return out


def op_links(events: list[Event]) -> list[tuple[Event, str | None, str | None]]:
    """Per kernel (in file order): (kernel, leaf op name, top op name).

    The launch is the earliest runtime call with the kernel's correlation (the first in the
    file among equal starts); its ops are the cpu_op (2021: Operator) events, not
    ProfilerStep#N, on the launch's (pid, tid) whose closed window contains the launch start.
    Leaf: largest ts, then smallest dur, then smallest name; top: smallest ts, then largest
    dur, then smallest name. Found by a sweep per thread over starts, launches and ends in
    time order (a start before a launch before an end at the same instant), keeping the ops
    open at each launch.
    """
    launches = first_launches(events)
    kernels = gpu_events(events, ("kernel",))
    points: dict[tuple[Any, Any], list[tuple[int, int, int]]] = defaultdict(list)
    for i, k in enumerate(kernels):
        launch = launches.get(_args(k).get("correlation"))
        if launch is not None:
            points[(launch.get("pid"), launch.get("tid"))].append((ts_ns(launch), 1, i))  # type: ignore[arg-type]
    ops: list[Event] = []
    for e in events:
        if (
            e.get("ph") == "X"
            and _cat(e) in CPU_OP_CATEGORIES
            and ts_ns(e) is not None
            and not event_name(e).startswith("ProfilerStep#")
        ):
            start, end = interval_ns(e)
            points[(e.get("pid"), e.get("tid"))] += [(start, 0, len(ops)), (end, 2, len(ops))]
            ops.append(e)
    found: dict[int, tuple[str | None, str | None]] = {}
    for sweep in points.values():
        open_ops: set[int] = set()
        for _, what, i in sorted(sweep):
            if what == 0:
                open_ops.add(i)
            elif what == 2:
                open_ops.discard(i)
            elif open_ops:
                around = [ops[j] for j in open_ops]
                leaf = min(around, key=lambda e: (-interval_ns(e)[0], dur_ns(e), event_name(e)))
                top = min(around, key=lambda e: (interval_ns(e)[0], -dur_ns(e), event_name(e)))
                found[i] = (event_name(leaf), event_name(top))
    return [(k, *found.get(i, (None, None))) for i, k in enumerate(kernels)]


def graph_replayed(events: list[Event]) -> set[int]:
    """The indices (in gpu_events(events) order) of the kernels a CUDA-graph launch ran: those
    whose correlation is that of a runtime call named cudaGraphLaunch, cuGraphLaunch or
    hipGraphLaunch (any _vN or _ptsz suffix)."""
    names = ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch")
    graph_calls = {
        _args(e).get("correlation")
        for e in events
        if e.get("ph") == "X"
        and _cat(e) in RUNTIME_CATEGORIES
        and event_name(e).split("_v")[0].removesuffix("_ptsz") in names
    }
    graph_calls.discard(None)
    kernels = gpu_events(events, ("kernel",))
    return {i for i, k in enumerate(kernels) if _args(k).get("correlation") in graph_calls}


# --------------------------------------------------------------------------------------------
# Unique kernels and energy (docs/metrics.md "Unique kernels", "Energy")
# --------------------------------------------------------------------------------------------


def _launch_dims(value: Any) -> tuple[int, ...] | None:
    """A grid/block written as a list of 1-3 non-negative ints, padded with 1s; else None."""
    if not isinstance(value, list) or not 1 <= len(value) <= 3:
        return None
    if not all(type(v) is int and v >= 0 for v in value):
        return None
    return tuple(value) + (1,) * (3 - len(value))


def _launch_count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def unique_groups(events: Iterable[Event]) -> dict[tuple[Any, ...], list[int]]:
    """Durations (ns) of every GPU activity by its unique key: (kind, name, grid, block,
    registers per thread, shared memory) for kernels, (kind, name, bytes) for copies/sets."""
    groups: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for e in events:
        kind = gpu_kind(e)
        if kind is None:
            continue
        args = _args(e)
        if kind == "kernel":
            key: tuple[Any, ...] = (
                kind,
                event_name(e),
                _launch_dims(args.get("grid")),
                _launch_dims(args.get("block")),
                _launch_count(args.get("registers per thread")),
                _launch_count(args.get("shared memory")),
            )
        else:
            key = (kind, event_name(e), _launch_count(args.get("bytes")))
        groups[key].append(dur_ns(e))
    return dict(groups)


def energy_per_ns(
    activities: list[tuple[int, int]], samples: list[tuple[int, int]]
) -> tuple[list[Fraction], int, int]:
    """Energies by a walk over every nanosecond of the window (small inputs only): activity
    energies (mW·ns, exact fractions), busy and idle energy. ``activities`` are [start, end)
    with end > start; ``samples`` (t, mW) sorted by t, the first at or before the window."""
    start = min(a for a, _ in activities)
    end = max(b for _, b in activities)
    energy = [Fraction(0)] * len(activities)
    busy = idle = 0
    for t in range(start, end):
        power = [p for s, p in samples if s <= t][-1]
        running = [i for i, (a, b) in enumerate(activities) if a <= t < b]
        if running:
            busy += power
            for i in running:
                energy[i] += Fraction(power, len(running))
        else:
            idle += power
    return energy, busy, idle


# --------------------------------------------------------------------------------------------
# Operator calls: self time, FLOPs and bytes from shapes
# --------------------------------------------------------------------------------------------


def cpu_op_calls(events: list[Event]) -> list[Event]:
    """The cpu_op (2021: Operator) events with a number ts, but ProfilerStep#N, in file order."""
    return [
        e
        for e in events
        if e.get("ph") == "X"
        and _cat(e) in CPU_OP_CATEGORIES
        and ts_ns(e) is not None
        and not event_name(e).startswith("ProfilerStep#")
    ]


def self_times_ns(calls: list[tuple[Hashable, int, int]]) -> list[int]:
    """Per call (thread, ts, end), its duration minus its direct children's: a stack walk per
    thread over the calls in (ts, longest first, file order) order; a call's parent is the
    innermost open call (the stack top after popping the calls whose end is before its end)."""
    order = sorted(range(len(calls)), key=lambda i: (calls[i][1], -calls[i][2], i))
    stacks: dict[Hashable, list[int]] = defaultdict(list)
    child_time = [0] * len(calls)
    for i in order:
        thread, ts, end = calls[i]
        stack = stacks[thread]
        while stack and calls[stack[-1]][2] < end:
            stack.pop()
        if stack:
            child_time[stack[-1]] += end - ts
        stack.append(i)
    return [end - ts - child_time[i] for i, (_, ts, end) in enumerate(calls)]


ELEMENT_BYTES = {"double": 8, "float": 4, "c10::Half": 2, "c10::BFloat16": 2,
                 "c10::Float8_e4m3fn": 1, "long int": 8, "int": 4, "bool": 1}  # fmt: skip


def _matmul_out(a: list[int], b: list[int]) -> tuple[list[int], int]:
    """Output shape and inner size of torch.matmul(a, b), by its documented rules: a 1-D side
    gains a dimension of 1 that the result drops; the batch dimensions broadcast (numpy's
    rule); the inner sizes must agree (else ValueError). (numpy's matmul on empty arrays would
    agree, but it multiplies them: minutes for the big GEMMs of real traces.)"""
    import numpy as np

    left, right = ([1, *a] if len(a) == 1 else a), ([*b, 1] if len(b) == 1 else b)
    if not a or not b or left[-1] != right[-2]:
        raise ValueError("inner sizes differ")
    batch = list(np.broadcast_shapes(tuple(left[:-2]), tuple(right[:-2])))
    out = [*batch, *([left[-2]] if len(a) > 1 else []), *([right[-1]] if len(b) > 1 else [])]
    return out, a[-1]


def op_flops_bytes(name: str, args: dict[str, Any]) -> tuple[int, int] | None:
    """FLOPs and bytes of one call, written out per op from the definitions; None if unknown."""
    dims, types = args.get("Input Dims", args.get("Input dims")), args.get("Input type")
    concrete = args.get("Concrete Inputs")
    if not dims or not types:
        return None
    size = ELEMENT_BYTES.get(types[0])
    if size is None:
        return None
    n = math.prod
    if name == "aten::mm":
        (m, k), (_, cols) = dims[0], dims[1]
        return 2 * m * cols * k, (m * k + k * cols + m * cols) * size
    if name == "aten::addmm":
        (m, k), (_, cols) = dims[1], dims[2]
        return 2 * m * cols * k, (m * k + k * cols + m * cols + n(dims[0])) * size
    if name == "aten::bmm":
        (b, m, k), (_, _, cols) = dims[0], dims[1]
        return 2 * b * m * cols * k, b * (m * k + k * cols + m * cols) * size
    if name == "aten::linear":
        rows, k, cols = n(dims[0][:-1]), dims[0][-1], dims[1][0]
        bias = n(dims[2]) if len(dims) > 2 and dims[2] else 0
        return 2 * rows * cols * k, (rows * k + cols * k + rows * cols + bias) * size
    if name == "aten::matmul":
        try:
            out, k = _matmul_out(dims[0], dims[1])
        except ValueError:  # shapes torch.matmul would refuse
            return None
        return 2 * n(out) * k, (n(dims[0]) + n(dims[1]) + n(out)) * size
    attention = {"aten::scaled_dot_product_attention": 5,
                 "aten::_scaled_dot_product_flash_attention": 4}  # fmt: skip
    if name in attention and concrete and concrete[attention[name]] in ("True", "False"):
        (b, h, nq, d), nkv = dims[0], dims[1][2]
        flops = 4 * b * h * nq * nkv * d // (2 if concrete[attention[name]] == "True" else 1)
        return flops, (n(dims[0]) * 2 + n(dims[1]) + n(dims[2])) * size
    if name == "aten::_flash_attention_forward" and concrete and concrete[8] in ("True", "False"):
        (b, nq, h, d), nkv = dims[0], dims[1][1]
        flops = 4 * b * h * nq * nkv * d // (2 if concrete[8] == "True" else 1)
        return flops, (n(dims[0]) * 2 + n(dims[1]) + n(dims[2])) * size
    if name == "aten::conv2d" and concrete:
        return _conv2d(dims, concrete, size)
    return None


def _conv2d(dims: list[list[int]], concrete: list[str], size: int) -> tuple[int, int] | None:
    """A 2-D convolution, its output size found by counting the window positions."""
    (batch, channels, height, width), (k, per_group, r, s) = dims[0], dims[1]
    stride, pad, dil = (json.loads(concrete[i]) for i in (3, 4, 5))
    if int(concrete[6]) * per_group != channels:
        return None

    def positions(size_in: int, kernel: int, i: int) -> int:
        span = dil[i] * (kernel - 1)
        return sum(1 for at in range(-pad[i], size_in + pad[i] - span, stride[i]))

    p, q = positions(height, r, 0), positions(width, s, 1)
    flops = 2 * batch * k * per_group * r * s * p * q
    moved = (batch * channels * height * width + k * per_group * r * s + batch * k * p * q) * size
    return flops, moved

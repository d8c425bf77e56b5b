"""The energy a GPU power log attributes to each device, kernel and copy (docs/metrics.md
"Energy").

P(t) is the latest sample at or before t; k(t) the activities (kernel, memcpy, memset with
dur > 0) of the device running at t. An activity's energy is ∫ P/k over its interval; busy
energy ∫ P over their union, idle energy ∫ P over the rest of the device window.

Exact by construction: power in integer mW, time in integer ns, so each elementary segment
(between consecutive boundaries of activities and samples) holds P·dt pJ exactly. A segment's
energy is shared among its k activities by integer division; the remainder (< k pJ) goes to
one of them (the running one that ends last, then the latest in start order), so activity
energies add up to the busy energy exactly, and busy + idle to the total. J only on output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from traceview.aggregate import sums
from traceview.aggregate.order import first_of_runs
from traceview.analyses.core.devices import device_of_stream
from traceview.columns.model import TraceEvents
from traceview.columns.power import AVERAGE, PowerLog
from traceview.columns.schema import KERNEL
from traceview.errors import TraceviewError, UsageError

SCHEMA_VERSION = 1
PJ_PER_J = 10**12
_SAFE = 2**62  # below this every pJ sum of a device fits int64
STALE_PERIODS = 2  # a sample older than this many median periods no longer covers


@dataclass(frozen=True)
class DeviceEnergy:
    """One device: its window (epoch ns) and energies (pJ)."""

    device: Any
    gpu_index: int
    start_ns: int
    end_ns: int
    energy_pj: int
    busy_pj: int
    idle_pj: int
    kernel_pj: int
    copy_pj: int  # memcpy + memset
    coverage_pct: float
    period_ns: int  # its GPU's sampling period: the refresh interval (below)
    row_interval_ns: int = 0  # median interval between the log's rows for its GPU
    refresh_interval_ns: int = 0  # median interval between changes of the power reading

    @property
    def window_ns(self) -> int:
        return self.end_ns - self.start_ns

    @property
    def mean_power_w(self) -> float:
        return self.energy_pj / self.window_ns / 1000 if self.window_ns else 0.0


@dataclass(frozen=True)
class KernelEnergy:
    """The activities of one name, over every device."""

    name: str
    kind: int
    count: int
    busy_ns: int
    energy_pj: int

    @property
    def mean_power_w(self) -> float:
        return self.energy_pj / self.busy_ns / 1000 if self.busy_ns else 0.0


@dataclass(frozen=True)
class EnergyReport:
    """Per device and per name; ``row_pj`` is each GPU row's energy (0 for dur = 0)."""

    devices: list[DeviceEnergy]
    kernels: list[KernelEnergy]
    row_pj: np.ndarray
    median_activity_ns: int
    column: str
    log_window_ns: tuple[int, int]
    trace_window_ns: tuple[int, int]


def parse_gpu_map(pairs: list[str]) -> dict[int, str]:
    """``--power-gpu INDEX=DEVICE`` options as {index: device text}."""
    out: dict[int, str] = {}
    for pair in pairs:
        index, sep, device = pair.partition("=")
        if not sep or not index.strip().isdecimal() or not device.strip():
            raise UsageError(f"--power-gpu {pair!r}: expected INDEX=DEVICE, e.g. 0=1")
        if int(index) in out:
            raise UsageError(f"--power-gpu {pair!r}: GPU {int(index)} is mapped twice")
        if device.strip() in out.values():
            raise UsageError(f"--power-gpu {pair!r}: device {device.strip()} is given two GPUs")
        out[int(index)] = device.strip()
    return out


def _check_gpu_map(every: list[Any], devices: list[Any], gpu_map: dict[int, str]) -> None:
    """Every --power-gpu device is one of the trace's (``every``), and no two of ``devices``
    (those with activity) read one GPU."""
    names = {str(d) for d in every}
    for index, text in gpu_map.items():
        if text not in names:
            have = ", ".join(sorted(names)) or "none"
            raise UsageError(f"--power-gpu {index}={text}: no device {text} in the trace ({have})")
    readers: dict[int, Any] = {}
    for device in devices:
        index = _gpu_index(device, gpu_map)
        if index in readers:
            raise UsageError(
                f"devices {readers[index]} and {device} would both get GPU {index}'s power: "
                "map each with --power-gpu INDEX=DEVICE"
            )
        readers[index] = device


def base_ns(events: TraceEvents) -> int:
    """The trace's epoch offset: ``baseTimeNanoseconds`` when the header has it and the
    timestamps are below it (kineto's ts are then relative to it), else 0 (kineto writes
    epoch µs without a base; a trace with epoch-scale ts and a base does not add it twice)."""
    base = events.header.get("baseTimeNanoseconds")
    if type(base) is not int or base <= 0:
        return 0
    first = int(events.gpu.ts.min()) if len(events.gpu.ts) else 0
    return base if first < base else 0


def attribute(events: TraceEvents, log: PowerLog, gpu_map: dict[int, str]) -> EnergyReport:
    """The energy of every device and activity of ``events``; a TraceviewError when the log
    does not cover a device's window."""
    gpu = events.gpu
    epoch = base_ns(events)
    device_index, device_values = device_of_stream(events)
    row_device = device_index[gpu.stream] if len(gpu.ts) else np.empty(0, np.int64)
    active = gpu.dur > 0
    row_pj = np.zeros(len(gpu.ts), dtype=object if _needs_objects(events, log) else np.int64)
    used = np.unique(row_device[active]).tolist()
    _check_gpu_map(list(device_values), [device_values[d] for d in used], gpu_map)
    devices = []
    for d, value in enumerate(device_values):  # one pass per device (a handful)
        rows = np.flatnonzero(active & (row_device == d))
        if len(rows) == 0:
            continue
        index = _gpu_index(value, gpu_map)
        start, end = epoch + gpu.ts[rows], epoch + gpu.ts[rows] + gpu.dur[rows]
        t, mw = _samples(log, index)
        _check_covered(log, value, index, t, int(start.min()), int(end.max()))
        result = integrate(start, end, t, mw, row_pj.dtype)
        row_pj[rows] = result.activity_pj
        is_kernel = gpu.kind[rows] == KERNEL
        devices.append(
            DeviceEnergy(
                device=value, gpu_index=index, start_ns=int(start.min()), end_ns=int(end.max()),
                energy_pj=result.busy_pj + result.idle_pj, busy_pj=result.busy_pj,
                idle_pj=result.idle_pj, kernel_pj=int(result.activity_pj[is_kernel].sum()),
                copy_pj=int(result.activity_pj[~is_kernel].sum()),
                coverage_pct=result.coverage_pct, period_ns=result.period_ns,
                row_interval_ns=result.row_interval_ns,
                refresh_interval_ns=result.period_ns,
            )
        )  # fmt: skip
    busy = np.flatnonzero(active)
    return EnergyReport(
        devices=devices,
        kernels=_by_name(events, row_pj, busy),
        row_pj=row_pj,
        median_activity_ns=int(np.median(gpu.dur[busy])) if len(busy) else 0,
        column=log.column,
        log_window_ns=(int(log.t_ns.min()), int(log.t_ns.max())),
        trace_window_ns=(
            min((d.start_ns for d in devices), default=0),
            max((d.end_ns for d in devices), default=0),
        ),
    )


def _needs_objects(events: TraceEvents, log: PowerLog) -> bool:
    """Whether a pJ sum could pass int64 (a window of days at kW): Python ints then."""
    gpu = events.gpu
    if len(gpu.ts) == 0:
        return False
    span = int((gpu.ts + gpu.dur).max()) - int(gpu.ts.min()) + 1
    return span * max(int(log.mw.max()), 1) * (len(events.streams) + 1) >= _SAFE


def _gpu_index(device: Any, gpu_map: dict[int, str]) -> int:
    """The nvidia-smi index of a trace device: --power-gpu, else the same number."""
    for index, text in gpu_map.items():
        if text == str(device):
            return index
    text = str(device)
    if type(device) is int or text.isdecimal():
        return int(text)
    raise TraceviewError(f"device {device!r} is not a number: map it with --power-gpu INDEX=DEVICE")


def _samples(log: PowerLog, index: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = np.searchsorted(log.gpu, [index, index + 1])
    return log.t_ns[lo:hi], log.mw[lo:hi]


def _check_covered(log: PowerLog, device: Any, index: int, t: np.ndarray, w0: int, w1: int) -> None:
    """Refuse a log without a sample at or before the window's start and one at or after
    its end (the windows are named)."""
    if len(t) and t[0] <= w0 and t[-1] >= w1:
        return
    have = f"{stamp(int(t[0]))} – {stamp(int(t[-1]))}" if len(t) else "no sample"
    raise TraceviewError(
        f"{log.path}: the power log does not cover device {device} (GPU index {index}): trace "
        f"window {stamp(w0)} – {stamp(w1)}, log {have} (UTC; --power-tz, --power-offset and "
        "--power-gpu align them)"
    )


def stamp(ns: int) -> str:
    """An epoch-ns time as UTC text with ms: 2024-05-01 10:00:00.123."""
    from datetime import UTC, datetime

    seconds, rest = divmod(ns, 10**9)
    return f"{datetime.fromtimestamp(seconds, UTC):%Y-%m-%d %H:%M:%S}.{rest // 10**6:03d}"


@dataclass(frozen=True)
class Integral:
    """One device's integration: per activity pJ, busy and idle pJ, coverage."""

    activity_pj: np.ndarray
    busy_pj: int
    idle_pj: int
    coverage_pct: float
    period_ns: int  # the refresh interval of the readings (sampling_period)
    row_interval_ns: int = 0


def sampling_period(t: np.ndarray, mw: np.ndarray) -> tuple[int, int]:
    """(row interval, refresh interval) of one GPU's samples, ns: the median interval between
    rows, and the median interval between the rows where the reading changes — a log written
    every 20 ms whose power value changes every ~100 ms is sampled every ~100 ms. The refresh
    interval is the row interval when the reading changes fewer than twice."""
    row = int(np.median(np.diff(t))) if len(t) > 1 else 0
    changes = t[np.flatnonzero(mw[1:] != mw[:-1]) + 1] if len(t) > 1 else t[:0]
    refresh = int(np.median(np.diff(changes))) if len(changes) > 2 else row
    return row, max(refresh, row)


def _reading_times(t: np.ndarray, mw: np.ndarray) -> np.ndarray:
    """Per sample, when its reading was first logged: the row where the value last changed."""
    if len(t) == 0:
        return t
    new = np.r_[True, mw[1:] != mw[:-1]]
    return np.asarray(t[np.maximum.accumulate(np.where(new, np.arange(len(t)), 0))])


def integrate(
    start: np.ndarray, end: np.ndarray, t: np.ndarray, mw: np.ndarray, dtype: Any = np.int64
) -> Integral:
    """Energies of activities [start, end) (dur > 0, epoch ns) under samples (t, mw), sorted
    by t with t[0] ≤ min(start) (see the module docstring)."""
    w0, w1 = int(start.min()), int(end.max())
    inside = t[(t > w0) & (t < w1)]
    bounds = np.unique(np.concatenate([start, end, inside, [w0, w1]]))
    seg, dt = bounds[:-1], np.diff(bounds)
    sample = np.searchsorted(t, seg, side="right") - 1
    energy = mw[sample].astype(dtype) * dt.astype(dtype)
    a, b = np.searchsorted(bounds, start), np.searchsorted(bounds, end)
    k = np.cumsum(np.bincount(a, minlength=len(bounds)) - np.bincount(b, minlength=len(bounds)))
    k = k[:-1]
    busy = k > 0
    share = np.where(busy, energy // np.maximum(k, 1), 0).astype(dtype)
    remainder = np.where(busy, energy - share * k, 0).astype(dtype)
    prefix = np.concatenate([np.zeros(1, dtype=dtype), np.cumsum(share, dtype=dtype)])
    activity = (prefix[b] - prefix[a]).astype(dtype)
    owner = _owners(start, end, seg)
    left = np.flatnonzero(busy & (remainder != 0))
    np.add.at(activity, owner[left], remainder[left])
    row, period = sampling_period(t, mw)
    return Integral(
        activity_pj=activity,
        busy_pj=int(energy[busy].sum()),
        idle_pj=int(energy[~busy].sum()),
        coverage_pct=_coverage(seg, dt, _reading_times(t, mw)[sample], period, w1 - w0),
        period_ns=period,
        row_interval_ns=row,
    )


def _owners(start: np.ndarray, end: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Per segment start, an activity running there when any is: among those started at or
    before it, the one ending last (the latest in start order among equals)."""
    order = np.argsort(start, kind="stable")
    ends = end[order]
    best = np.maximum.accumulate(ends)
    at = np.maximum.accumulate(np.where(ends == best, np.arange(len(ends)), 0))
    position = np.searchsorted(start[order], seg, side="right") - 1
    return order[at[np.maximum(position, 0)]]


def _coverage(
    seg: np.ndarray, dt: np.ndarray, sampled: np.ndarray, period: int, window: int
) -> float:
    """% of the window where the power comes from a reading (``sampled``: when each segment's
    reading was first logged) at most STALE_PERIODS refresh intervals old."""
    if window == 0:
        return 100.0
    if period == 0:
        return 100.0 if len(seg) and (sampled == seg).all() else 0.0
    fresh_until = sampled + STALE_PERIODS * period
    stale = np.clip(seg + dt - fresh_until, 0, dt)
    return 100.0 * (window - sums.total(stale)) / window


def _by_name(events: TraceEvents, row_pj: np.ndarray, rows: np.ndarray) -> list[KernelEnergy]:
    """Per (kind, name), over the busy rows, by energy (largest first)."""
    gpu = events.gpu
    if len(rows) == 0:
        return []
    key = gpu.kind[rows].astype(np.int64) * len(events.names) + gpu.name[rows]
    order = np.argsort(key, kind="stable")
    starts = first_of_runs(key[order])
    sorted_rows = rows[order]
    energy = np.add.reduceat(row_pj[sorted_rows], starts)
    busy = sums.reduceat(gpu.dur[sorted_rows], starts)
    counts = np.diff(np.r_[starts, len(order)])
    out = [
        KernelEnergy(events.names[int(gpu.name[r])], int(gpu.kind[r]), int(c), int(ns), int(e))
        for r, c, ns, e in zip(sorted_rows[starts], counts, busy, energy, strict=True)
    ]
    out.sort(key=lambda k: (-k.energy_pj, k.name))
    return out


def limits(report: EnergyReport) -> list[str]:
    """The honest limits of the figures, for stderr."""
    periods = [d.period_ns for d in report.devices]
    period = int(np.median(periods)) if periods else 0
    rows = [d.row_interval_ns for d in report.devices]
    row = int(np.median(rows)) if rows else 0
    lines = [
        f"power sampled every {period / 1e6:.1f} ms (median interval between changes of "
        f"{report.column}; rows every {row / 1e6:.1f} ms) against a median activity of "
        f"{report.median_activity_ns / 1000:.1f} µs: per-kernel energies are an attribution of "
        "the device's power, not a measurement"
    ]
    lines += [
        f"device {d.device}: its window ({d.window_ns / 1e6:.1f} ms) is shorter than one power "
        f"sampling period ({d.period_ns / 1e6:.1f} ms): its energy is the mean power times the "
        "window, not a measurement"
        for d in report.devices
        if d.window_ns < d.period_ns
    ]
    if report.column == AVERAGE:
        lines.append(
            "the log has power.draw, a 1 s average on Ampere and newer GPUs: record "
            "power.draw.instant for a finer attribution"
        )
    return lines


@dataclass(frozen=True)
class PowerOptions:
    """``--power`` and the options that align the log with the trace."""

    path: Any  # Path of the log
    tz: str | None = None
    offset: str = "0"
    gpus: tuple[str, ...] = ()

    def side_files(self) -> tuple[Any, ...]:
        """The files these options name besides the trace (an -o never replaces them)."""
        return (self.path,)


def read_log(options: PowerOptions) -> tuple[PowerLog, str]:
    """The power log, aligned as the options say, and a stderr note on its zone."""
    from traceview.columns.power import parse_zone, read_power_log
    from traceview.parsing import parse_signed_duration

    offset = parse_signed_duration(options.offset, "--power-offset")
    zone, zone_text = parse_zone(options.tz)
    log = read_power_log(options.path, zone, zone_text, offset)
    return log, f"power log timestamps read in {zone_text}"


def check_power_options(options: PowerOptions) -> dict[int, str]:
    """Usage errors before any reading; the --power-gpu map."""
    from traceview.columns.power import parse_zone
    from traceview.parsing import parse_signed_duration

    parse_zone(options.tz)
    parse_signed_duration(options.offset, "--power-offset")
    return parse_gpu_map(list(options.gpus))

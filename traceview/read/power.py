"""nvidia-smi power logs: ``nvidia-smi --query-gpu=timestamp,index,power.draw --format=csv
-lms 40`` (or ``power.draw.instant``; ``nounits``; extra columns in any order; headers with or
without ``[W]``), as epoch-ns sample times and integer milliwatts per GPU index.

nvidia-smi writes local time without a zone (``2024/05/01 12:00:00.123``): the zone is given
(``UTC``, ``+02:00``, ``Europe/Paris``) or is the machine's. Rows whose power is not a number
(``[N/A]``, ``[Not Supported]``) are skipped and counted.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path

import numpy as np

from traceview.errors import TraceviewError, UsageError

INSTANT, AVERAGE = "power.draw.instant", "power.draw"
_OFFSET = re.compile(r"([+-])(\d{1,2}):?(\d{2})")
_STAMP = re.compile(
    r"\s*(\d{4})[/-](\d{2})[/-](\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?\s*"
)
_WATTS = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(?:W)?\s*", re.IGNORECASE)


@dataclass(frozen=True)
class PowerLog:
    """Samples sorted by (gpu, time), file order kept among equal times."""

    path: str
    gpu: np.ndarray  # nvidia-smi index
    t_ns: np.ndarray  # epoch ns (UTC), offset applied
    mw: np.ndarray  # integer milliwatts
    column: str  # INSTANT or AVERAGE
    zone: str  # how the timestamps were read, for the stderr note
    skipped: int  # rows without a usable power value


def parse_zone(text: str | None) -> tuple[tzinfo | None, str]:
    """``--power-tz``: UTC, ±HH:MM or an IANA zone name; None (the machine's zone)."""
    if text is None:
        local = datetime.now().astimezone().tzinfo
        return None, f"the machine's zone ({local}); --power-tz sets another"
    if text.upper() in ("UTC", "Z", "GMT"):
        return UTC, "UTC"
    match = _OFFSET.fullmatch(text.strip())
    if match:
        sign = -1 if match.group(1) == "-" else 1
        hours, minutes = int(match.group(2)), int(match.group(3))
        if hours > 23 or minutes > 59:
            raise UsageError(f"--power-tz {text!r}: an offset is ±HH:MM up to ±23:59")
        return timezone(sign * timedelta(hours=hours, minutes=minutes)), text
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(text), text
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(
            f"--power-tz {text!r}: expected UTC, ±HH:MM or a zone name such as Europe/Paris"
        ) from None


def read_power_log(path: Path, zone: tzinfo | None, zone_text: str, offset_ns: int) -> PowerLog:
    """Parse the log; a TraceviewError (exit 1) when it is not one or has no sample."""
    try:
        with path.open(newline="", encoding="utf-8", errors="replace") as f:
            rows = list(csv.reader(f, skipinitialspace=True))
    except OSError as e:
        raise TraceviewError(f"{path}: cannot read the power log ({e.strerror or e})") from None
    if not rows:
        raise TraceviewError(f"{path}: empty power log")
    columns = _columns(path, rows[0])
    stamp_at, gpu_at, power_at, column = columns
    gpu, stamps, mw = [], [], []
    skipped = 0
    for row in rows[1:]:
        if len(row) <= max(stamp_at, power_at, gpu_at):
            skipped += bool(row)  # short rows (blank lines are not counted)
            continue
        watts = _WATTS.fullmatch(row[power_at])
        stamp = _STAMP.fullmatch(row[stamp_at])
        index = row[gpu_at].strip() if gpu_at >= 0 else "0"
        if watts is None or stamp is None or not index.isdecimal():
            skipped += 1
            continue
        gpu.append(int(index))
        stamps.append(stamp.groups())
        mw.append(_milliwatts(watts.group(1)))
    if not mw:
        raise TraceviewError(f"{path}: no power sample with a timestamp and a number")
    t_ns = _epoch_ns(stamps, zone) + offset_ns
    gpu_a, mw_a = np.array(gpu, dtype=np.int64), np.array(mw, dtype=np.int64)
    order = np.lexsort((t_ns, gpu_a))
    return PowerLog(str(path), gpu_a[order], t_ns[order], mw_a[order], column, zone_text, skipped)


def _columns(path: Path, header: list[str]) -> tuple[int, int, int, str]:
    """Positions of timestamp, index (−1: absent, every row is GPU 0) and power, and which
    power column (power.draw.instant preferred)."""
    names = [re.sub(r"\s*\[.*\]\s*$", "", h).strip().lower() for h in header]
    if "timestamp" not in names:
        raise TraceviewError(
            f"{path}: not an nvidia-smi power log (no timestamp column; record one with "
            "nvidia-smi --query-gpu=timestamp,index,power.draw.instant --format=csv -lms 40)"
        )
    for column in (INSTANT, AVERAGE):
        if column in names:
            gpu_at = names.index("index") if "index" in names else -1
            return names.index("timestamp"), gpu_at, names.index(column), column
    raise TraceviewError(f"{path}: no power.draw or power.draw.instant column")


def _milliwatts(text: str) -> int:
    """Watts as written (``187.45``) to integer mW, exactly (rounded half up past 3 decimals)."""
    whole, _, fraction = text.partition(".")
    fraction = (fraction + "0000")[:4]
    return int(whole) * 1000 + (int(fraction) + 5) // 10


def _epoch_ns(stamps: list[tuple[str | None, ...]], zone: tzinfo | None) -> np.ndarray:
    """Local wall-clock stamps as epoch ns: the zone's offset is looked up once per distinct
    hour (DST changes on hour boundaries in every zone nvidia-smi machines use)."""
    fields = np.array([[int(v or 0) for v in s[:6]] for s in stamps], dtype=np.int64)
    frac = np.array([int(((s[6] or "") + "000000000")[:9]) for s in stamps], dtype=np.int64)
    hours, inverse = np.unique(fields[:, :4], axis=0, return_inverse=True)
    starts = []
    for y, mo, d, h in hours.tolist():
        try:
            local = datetime(y, mo, d, h)
        except ValueError:
            raise TraceviewError(f"bad timestamp in the power log: {y}/{mo}/{d} {h}h") from None
        aware = local.replace(tzinfo=zone) if zone is not None else local.astimezone()
        starts.append(int(aware.timestamp()) * 10**9)
    minutes_seconds = fields[:, 4] * 60 + fields[:, 5]
    return np.array(starts, dtype=np.int64)[inverse.reshape(-1)] + minutes_seconds * 10**9 + frac

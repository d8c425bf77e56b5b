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
from typing import Any

import numpy as np

from traceview.errors import TraceviewError, UsageError
from traceview.side_files import read_side_file

INSTANT, AVERAGE = "power.draw.instant", "power.draw"
_OFFSET = re.compile(r"([+-])(\d{1,2}):?(\d{2})")
# Arrow (RE2) patterns over trimmed cells. Fractions are right-padded with zeros: a second's
# to 9 digits (ns), a watt's to 4 (a tenth of a mW, rounded half up to mW).
_STAMP = (
    r"^(?P<y>\d{4})[/-](?P<mo>\d{2})[/-](?P<d>\d{2})[ T](?P<h>\d{2}):(?P<mi>\d{2}):"
    r"(?P<s>\d{2})(?:\.(?P<f>\d{1,9}))?$"
)
_WATTS = r"^(?P<w>\d{1,9})(?:\.(?P<f>\d{1,4})\d*)?\s*[Ww]?$"
_INDEX = r"^(?P<i>\d{1,9})$"
_PADS = {_STAMP: {6: 9}, _WATTS: {1: 4}, _INDEX: {}}


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
    """Parse the log into columns (Arrow's CSV reader and compute kernels: no loop per row);
    a TraceviewError (exit 1) when it is not one or has no sample."""
    table, skipped = _read_table(path)
    stamp_at, gpu_at, power_at, column = _columns(path, table.column_names)
    stamp = _fixed_stamps(table.column(stamp_at)) or _groups(table.column(stamp_at), _STAMP)
    watts = _groups(table.column(power_at), _WATTS)
    if gpu_at >= 0:
        index = _groups(table.column(gpu_at), _INDEX)[0]
    else:
        index = np.zeros(table.num_rows, dtype=np.int64)
    # A minute or second of 60 or more is no time of day (it would roll over): not usable.
    usable = (stamp[0] >= 0) & (stamp[4] < 60) & (stamp[5] < 60)
    usable &= (watts[0] >= 0) & (index >= 0)
    if not usable.any():
        raise TraceviewError(f"{path}: no power sample with a timestamp and a number")
    skipped += int((~usable).sum())
    stamp, watts = [c[usable] for c in stamp], [c[usable] for c in watts]
    t_ns = _shifted(path, _epoch_ns(stamp, zone), offset_ns)
    mw = watts[0] * 1000 + (watts[1] + 5) // 10  # 4 decimals kept: rounded half up to mW
    gpu = index[usable]
    order = np.lexsort((t_ns, gpu))
    gpu, t_ns = gpu[order], t_ns[order]
    _check_distinct_times(path, gpu, t_ns)
    return PowerLog(str(path), gpu, t_ns, mw[order], column, zone_text, skipped)


_NS_MIN, _NS_MAX = -(2**63), 2**63 - 1


def _shifted(path: Path, t_ns: np.ndarray, offset_ns: int) -> np.ndarray:
    """``t_ns + offset_ns``, refused when a time would leave int64 ns (1677-2262)."""
    lo, hi = int(t_ns.min()) + offset_ns, int(t_ns.max()) + offset_ns
    if lo < _NS_MIN or hi > _NS_MAX:
        raise TraceviewError(
            f"{path}: with --power-offset, power log times leave the years 1677-2262 "
            "(epoch ns in int64)"
        )
    shifted: np.ndarray = t_ns + np.int64(offset_ns)
    return shifted


def _check_distinct_times(path: Path, gpu: np.ndarray, t_ns: np.ndarray) -> None:
    """Refuse a GPU whose samples mostly repeat a time (two loggers writing one file): its
    sampling period would read as 0 and its coverage as none. ``gpu``, ``t_ns`` sorted."""
    same = (np.diff(gpu) == 0) & (np.diff(t_ns) == 0)
    if not same.any():
        return
    repeats = np.bincount(gpu[1:][same])
    counts = np.bincount(gpu)
    for index in np.flatnonzero(2 * repeats >= counts[: len(repeats)]).tolist():
        raise TraceviewError(
            f"{path}: {repeats[index]} of GPU {index}'s {counts[index]} samples repeat the "
            "time of another (two loggers writing one file?); keep one logger's rows"
        )


def _read_table(path: Path) -> tuple[Any, int]:
    """Every column as text, and how many rows were skipped for a wrong number of fields.
    The log is read once (a pipe too) through the bounded side-file reader; a UTF-8 BOM is
    dropped and bytes that are not UTF-8 become U+FFFD."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    data = _utf8(read_side_file(path, "power log").removeprefix(b"\xef\xbb\xbf"))
    header = _header(path, data)
    names = [f"c{i}" for i in range(len(header))]
    bad: list[int] = []

    def skip(row: Any) -> str:
        bad.append(1)
        return "skip"

    try:
        table = pa_csv.read_csv(
            pa.BufferReader(data),
            # on this thread: the handler, Python, called from Arrow's pool once aborted the
            # process at exit (std::terminate; apache/arrow#34314); the logs are small
            read_options=pa_csv.ReadOptions(column_names=names, skip_rows=1, use_threads=False),
            parse_options=pa_csv.ParseOptions(invalid_row_handler=skip),
            convert_options=pa_csv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()), strings_can_be_null=False
            ),
        )
    except (OSError, pa.ArrowInvalid) as e:
        raise TraceviewError(f"{path}: cannot read the power log ({e})") from None
    return table.rename_columns(header), len(bad)


_MAX_HEADER = 64 << 10  # nvidia-smi's longest header (every --query-gpu field) is ~10 KB


def _header(path: Path, data: bytes) -> list[str]:
    """The header's column names (the first line), checked to be short enough for one."""
    end = data.find(b"\n", 0, _MAX_HEADER + 1)
    if end < 0 and len(data) > _MAX_HEADER:
        raise TraceviewError(
            f"{path}: the first line is longer than {_MAX_HEADER >> 10} KiB: not an "
            "nvidia-smi power log header"
        )
    line = data[: end if end >= 0 else len(data)].decode().rstrip("\r")
    if not line.strip():
        raise TraceviewError(f"{path}: empty power log")
    try:
        return [h.strip() for h in next(csv.reader([line], skipinitialspace=True))]
    except csv.Error as e:
        raise TraceviewError(f"{path}: cannot read the power log header ({e})") from None


def _utf8(data: bytes) -> bytes:
    """``data`` as valid UTF-8 (what is not becomes U+FFFD), copied only when it is not."""
    try:
        data.decode()
    except UnicodeDecodeError:
        return data.decode(errors="replace").encode()
    return data


def _groups(column: Any, pattern: str) -> list[np.ndarray]:
    """The regex's groups of every row as int64 (−1 where the row does not match; a missing
    optional group is 0)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    found = pc.extract_regex(pc.utf8_trim_whitespace(column), pattern)
    out = []
    for i in range(found.type.num_fields):
        text = pc.struct_field(found, [i])
        if i in _PADS[pattern]:  # a fraction: "" (none) is 0 too
            text = pc.utf8_rpad(text, width=_PADS[pattern][i], padding="0")
        text = pc.if_else(pc.equal(text, ""), "0", text)
        out.append(pc.fill_null(pc.cast(text, pa.int64()), -1).to_numpy(zero_copy_only=False))
    return out


# nvidia-smi's own layout, YYYY/MM/DD HH:MM:SS.fff: what is not a digit at these positions.
_SEPARATORS = {4: b"/-", 7: b"/-", 10: b" T", 13: b":", 16: b":", 19: b"."}


def _fixed_stamps(column: Any) -> list[np.ndarray] | None:
    """The stamp fields read straight from the text's bytes when every cell has nvidia-smi's
    layout with the same number of fraction digits (a view, no per-row work); else None."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.utf8_trim_whitespace(column)
    text = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
    n = len(text)
    if n == 0 or text.null_count:
        return None
    width = pc.min_max(pc.binary_length(text)).as_py()
    if width["min"] != width["max"] or not 20 < width["min"] <= 29:
        return None
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int32)[text.offset : text.offset + n + 1]
    cells = np.frombuffer(text.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    cells = cells.reshape(n, width["min"])
    digits = cells - np.uint8(ord("0"))  # a non-digit wraps past 9
    for at in range(width["min"]):
        column_ok = (
            np.isin(cells[:, at], np.frombuffer(_SEPARATORS[at], dtype=np.uint8))
            if at in _SEPARATORS
            else digits[:, at] <= 9
        )
        if not column_ok.all():
            return None

    def number(lo: int, hi: int) -> np.ndarray:
        out = digits[:, lo].astype(np.int64)
        for i in range(lo + 1, hi):
            out *= 10
            out += digits[:, i]
        return out

    fraction = number(20, width["min"]) * 10 ** (29 - width["min"])  # to ns
    return [number(0, 4), number(5, 7), number(8, 10), number(11, 13), number(14, 16),
            number(17, 19), fraction]  # fmt: skip


def _epoch_ns(fields: list[np.ndarray], zone: tzinfo | None) -> np.ndarray:
    """Local wall-clock stamps (year, month, day, hour, minute, second, fraction padded to
    ns) as epoch ns: the zone's offset is looked up once per distinct local hour (DST changes
    on hour boundaries in the zones nvidia-smi machines use)."""
    year, month, day, hour, minute, second, ns = fields
    key = ((year * 100 + month) * 100 + day) * 100 + hour
    hours, inverse = np.unique(key, return_inverse=True)
    starts = np.empty(len(hours), dtype=np.int64)
    for i, k in enumerate(hours.tolist()):
        h, d, mo, y = k % 100, k // 100 % 100, k // 10**4 % 100, k // 10**6
        try:
            local = datetime(y, mo, d, h)
            aware = local.replace(tzinfo=zone) if zone is not None else local.astimezone()
            start = int(aware.timestamp()) * 10**9
        except (ValueError, OverflowError):
            raise TraceviewError(f"bad timestamp in the power log: {y}/{mo}/{d} {h}h") from None
        if not _NS_MIN <= start <= _NS_MAX - 3600 * 10**9:
            raise TraceviewError(
                f"bad timestamp in the power log: {y}/{mo}/{d} {h}h is not within the years "
                "1677-2262 (epoch ns in int64)"
            )
        starts[i] = start
    stamps: np.ndarray = starts[inverse.reshape(-1)] + (minute * 60 + second) * 10**9 + ns
    return stamps


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

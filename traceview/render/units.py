"""Number formatting with explicit units."""

from __future__ import annotations

import math

from traceview.humanize import duration as duration  # also words the data checks


def us(value: float) -> str:
    """Microseconds with thousands separators and 3 decimals (ns resolution)."""
    return f"{value:,.3f}"


def pct(value: float) -> str:
    return f"{value:.2f}"


def count(value: int) -> str:
    return f"{value:,}"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``1 launch``, ``2 launches``, ``1,204 kernels``: the noun agrees with the count."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def time(value_us: float) -> str:
    """A table cell's duration in the unit that fits its size, 4 significant digits:
    ``903.4 ms``, ``32.60 ms``, ``1.359 µs``, ``500 ns`` (never ``903,390.452 µs``)."""
    magnitude = abs(value_us)
    if 1 <= magnitude < 100:  # most kernels: µs, and no rounding up to the next unit
        return f"{value_us:,.{2 if magnitude >= 10 else 3}f} µs"
    return _time(value_us, magnitude)


def _time(value_us: float, magnitude: float) -> str:
    """``time``, every case."""
    if magnitude == 0:
        return "0"
    if magnitude < 1:
        return f"{value_us * 1000:,.0f} ns"
    for scale, unit in ((1, "µs"), (1e3, "ms"), (1e6, "s")):
        v = value_us / scale
        digits = 1 if abs(v) >= 100 else 2 if abs(v) >= 10 else 3
        if abs(round(v, digits)) < 1000 or unit == "s":
            return f"{v:,.{digits}f} {unit}"
    raise AssertionError("unreachable")


def time_ns(value_ns: float) -> str:
    """``time`` of a duration in ns (results hold ns; µs is only how it is shown)."""
    return time(value_ns / 1000)


def duration_ns(value_ns: float) -> str:
    """``duration`` of a duration in ns."""
    return duration(value_ns / 1000)


def timestamp(ts_ns: int) -> str:
    """A trace timestamp in µs as ``gaps`` prints it, without separators, so that it can be
    pasted into ``trim --window @START:@END``: ``1727000001611587.500``."""
    return f"{ts_ns / 1000:.3f}"


def joules(value: float) -> str:
    """Energy to 3 significant digits (``242``, ``19.4``, ``0.00412``), never more than
    whole joules shown: a power log read every ~100 ms, at a few watts' accuracy, tells a
    kernel's energy to a few percent at best."""
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    decimals = max(0, 2 - math.floor(math.log10(magnitude)))
    return f"{value:,.{decimals}f}"


def size(n_bytes: int) -> str:
    """A file size: 812 B, 1.2 MB, 3.4 GB (decimal units)."""
    value = float(n_bytes)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1000
    return f"{value:,.1f} TB"


def memory(n_bytes: int) -> str:
    """An amount of memory in binary units: 512 B, 1.50 KiB, 96.61 MiB, 12.68 GiB."""
    value, unit = float(n_bytes), 0
    while abs(value) >= 1024 and unit < len(_BINARY) - 1:
        value, unit = value / 1024, unit + 1
    return f"{value:,.0f} B" if unit == 0 else f"{value:,.2f} {_BINARY[unit]}"


_BINARY = ("B", "KiB", "MiB", "GiB", "TiB")

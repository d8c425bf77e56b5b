"""Number formatting with explicit units."""

from __future__ import annotations


def us(value: float) -> str:
    """Microseconds with thousands separators and 3 decimals (ns resolution)."""
    return f"{value:,.3f}"


def pct(value: float) -> str:
    return f"{value:.2f}"


def count(value: int) -> str:
    return f"{value:,}"


def duration(value_us: float) -> str:
    """A human duration: 850 µs, 12.3 ms, 4.56 s."""
    if value_us < 1000:
        return f"{value_us:,.1f} µs"
    if value_us < 1_000_000:
        return f"{value_us / 1000:,.1f} ms"
    return f"{value_us / 1_000_000:,.2f} s"


def size(n_bytes: int) -> str:
    """A file size: 812 B, 1.2 MB, 3.4 GB (decimal units)."""
    value = float(n_bytes)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1000
    return f"{value:,.1f} TB"

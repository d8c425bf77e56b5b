"""Durations in words (``850 µs``, ``12.3 ms``), for renderers and the warnings analyses word."""

from __future__ import annotations


def duration(value_us: float) -> str:
    """A human duration: 850 µs, 12.3 ms, 4.56 s."""
    if value_us < 1000:
        return f"{value_us:,.1f} µs"
    if value_us < 1_000_000:
        return f"{value_us / 1000:,.1f} ms"
    return f"{value_us / 1_000_000:,.2f} s"

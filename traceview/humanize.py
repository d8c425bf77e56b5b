"""Durations in words (``850 µs``, ``12.3 ms``), for renderers and the warnings analyses word."""

from __future__ import annotations


def duration(value_us: float) -> str:
    """A human duration: 20 ns, 850.0 µs, 12.3 ms, 4.56 s (under 1 µs in ns, so that 20 ns does
    not read as 0.0 µs)."""
    if 0 < abs(value_us) < 1:
        return f"{value_us * 1000:,.0f} ns"
    if value_us < 1000:
        return f"{value_us:,.1f} µs"
    if value_us < 1_000_000:
        return f"{value_us / 1000:,.1f} ms"
    return f"{value_us / 1_000_000:,.2f} s"

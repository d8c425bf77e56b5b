"""Option values in words, parsed once for the command line and library callers alike:
durations, percentages, step lists and numbers from the environment (each error names the
option or variable it came from)."""

from __future__ import annotations

import os
import re
from decimal import ROUND_HALF_EVEN, Decimal

from traceview.errors import UsageError

MAX_NS = 2**63 - 1  # the longest duration an int64 of ns holds
_UNITS_NS = {"ns": 1, "us": 1000, "µs": 1000, "μs": 1000, "ms": 1_000_000, "s": 1_000_000_000}
_DURATION = re.compile(r"^\s*([+-]?)(\d+(?:\.\d*)?|\.\d+)\s*([a-zµμ]*)\s*$", re.IGNORECASE)
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*%?\s*$")
_SPEC = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_duration(text: str, flag: str = "duration") -> int:
    """``250ns``, ``1us``, ``0.5ms``, ``2s`` or a bare number of µs, as integer ns; errors name
    ``flag``, the option the text came from."""
    m = _DURATION.match(text)
    unit = m.group(3).lower() if m else ""
    if not m or unit not in ("", *_UNITS_NS):
        raise UsageError(f"{flag} {text!r}: expected a number with ns, us, ms or s (e.g. 5us)")
    if m.group(1) == "-":
        raise UsageError(f"{flag} {text!r}: must not be negative")
    value = int((Decimal(m.group(2)) * _UNITS_NS[unit or "us"]).to_integral_value(ROUND_HALF_EVEN))
    if value > MAX_NS:
        raise UsageError(f"{flag} {text!r}: longer than the 292 years int64 ns can hold")
    return value


def parse_signed_duration(text: str, flag: str) -> int:
    """A duration that may be negative (``-2ms``, ``+1s``) as integer ns; errors quote the
    text as typed, sign included."""
    body = text.strip()
    sign = -1 if body.startswith("-") else 1
    try:
        return sign * parse_duration(body.removeprefix("-").removeprefix("+"), flag)
    except UsageError as e:
        raise UsageError(e.message.replace(repr(body.lstrip("+-")), repr(text), 1)) from None


def parse_hist_range(lo: str | None, hi: str | None) -> tuple[int | None, int | None]:
    """``--hist-min`` and ``--hist-max`` as ns; an error quotes them as the user typed them."""
    lo_ns = parse_duration(lo, "--hist-min") if lo else None
    hi_ns = parse_duration(hi, "--hist-max") if hi else None
    if lo_ns is not None and hi_ns is not None and lo_ns >= hi_ns:
        raise UsageError(f"--hist-min {lo} must be below --hist-max {hi}")
    return lo_ns, hi_ns


def parse_percent(text: str, flag: str) -> float:
    """``5%``, ``5`` or ``2.5%`` as a number of percent."""
    m = _PERCENT.match(text)
    if not m:
        raise UsageError(f"{flag} {text!r}: expected a percentage such as 5% or 2.5")
    return float(m.group(1))


def parse_steps(spec: str) -> tuple[tuple[int, int], ...]:
    """``N``, ``N-M`` or ``N,M,...`` (parts may be ranges) as sorted, merged, inclusive
    (first, last) ranges: a range stays two numbers, however many steps it spans."""
    ranges = []
    for part in spec.split(","):
        m = _SPEC.match(part)
        if not m:
            raise UsageError(f"--pstep {spec!r}: expected N, N-M or N,M,... (e.g. 5, 5-7, 5,9)")
        first, last = int(m.group(1)), int(m.group(2) or m.group(1))
        if last < first:
            raise UsageError(f"--pstep {spec!r}: range {first}-{last} runs backwards")
        ranges.append((first, last))
    return tuple(merged_ranges(ranges))


def merged_ranges(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive (first, last) ranges sorted, with overlapping and adjacent ones merged."""
    out: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


def env_count(name: str, default: int) -> int:
    """A whole number from environment variable ``name`` (``1_000`` or ``1000``), else
    ``default``; anything else is a usage error naming the variable."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if not text.replace("_", "").isdecimal() or text.startswith("_"):
        raise UsageError(f"{name}={text!r}: expected a whole number, e.g. {default}")
    return int(text)

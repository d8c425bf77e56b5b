"""The ready ``traceview trim`` command printed beside a gap (gaps' text and the report)."""

from __future__ import annotations

import shlex

TRIM_MARGIN = "2ms"  # trim --margin's default: the work on each side of a gap
TRIM_MARGIN_NS = 2_000_000
PIPE_NAMES = frozenset({"-", "/dev/stdin"})  # a trace read from these cannot be trimmed


def trim_command(trace: str, ts_ns: int, gap_ns: int, number: int) -> str:
    """The command that cuts the gap out with TRIM_MARGIN on each side, as absolute ts (so
    it holds whatever options listed the gap); the path quoted for a POSIX shell."""
    window = gap_window(ts_ns, gap_ns)
    return f"traceview trim {shlex.quote(trace)} --window {window} -o gap{number}.json.gz"


def gap_window(ts_ns: int, gap_ns: int) -> str:
    """trim's --window for a gap with TRIM_MARGIN on each side, as absolute ts."""
    return f"@{_us(max(0, ts_ns - TRIM_MARGIN_NS))}:@{_us(ts_ns + gap_ns + TRIM_MARGIN_NS)}"


def _us(ns: int) -> str:
    """ns as exact µs text (a float would round a 16-digit ts)."""
    sign = "-" if ns < 0 else ""
    return f"{sign}{abs(ns) // 1000}.{abs(ns) % 1000:03d}"

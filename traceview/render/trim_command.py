"""The ready ``traceview trim`` command printed beside a gap (gaps' text and the report)."""

from __future__ import annotations

import shlex

TRIM_MARGIN = "2ms"  # trim --margin's default: the work on each side of a gap
TRIM_MARGIN_NS = 2_000_000
PIPE_NAMES = frozenset({"-", "/dev/stdin"})  # a trace read from these cannot be trimmed


def trim_command(trace: str, ts_ns: int, gap_ns: int, number: int) -> str:
    """The command that cuts the gap out with TRIM_MARGIN on each side, as absolute ts (so
    it holds whatever options listed the gap); the path quoted for a POSIX shell."""
    start = _us(max(0, ts_ns - TRIM_MARGIN_NS))
    end = _us(ts_ns + gap_ns + TRIM_MARGIN_NS)
    return f"traceview trim {shlex.quote(trace)} --window @{start}:@{end} -o gap{number}.json.gz"


def _us(ns: int) -> str:
    """ns as exact µs text (a float would round a 16-digit ts)."""
    sign = "-" if ns < 0 else ""
    return f"{sign}{abs(ns) // 1000}.{abs(ns) % 1000:03d}"

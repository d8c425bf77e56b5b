"""Tables on a terminal, in text and in Markdown cut to their first rows, and the line that
says what was left out; JSON and CSV hold every row (a trace with 10^5 steps or streams would
otherwise print megabytes of table, and spend most of its time formatting it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from traceview.render import units

_T = TypeVar("_T")


def head(items: Sequence[_T], top: int) -> Sequence[_T]:
    """The first ``top`` items (0: all of them)."""
    return items if top == 0 else items[:top]


def more_line(total: int, top: int, noun: str, option: str, detail: str = "") -> str | None:
    """``99,900 more steps not shown (399,600 rows); use --top 0 or -f json/csv for all``, or
    None when ``top`` (0: all) leaves nothing out. ``noun``: singular, ``+ "s"`` for more."""
    hidden = total - top if top else 0
    if hidden <= 0:
        return None
    detail = f" ({detail})" if detail else ""
    return (
        f"{units.counted(hidden, 'more ' + noun)} not shown{detail}; "
        f"use {option} 0 or -f json/csv for all"
    )

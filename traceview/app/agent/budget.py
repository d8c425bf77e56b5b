"""Answers that fit a token budget: a command's JSON with its longest tables cut by rank, and
what was cut said, so that an agent asks for the rest (``offset``) instead of being flooded.

Definitions (docs/mcp.md#budget):

- An answer's tokens are estimated as its UTF-8 bytes / 3, rounded up (``estimate_tokens``):
  common BPE tokenizers give ~4 bytes a token on English and ~3 on JSON dense with numbers,
  names and punctuation, so the estimate errs on the side of a smaller answer.
- A table is a list of objects (rows) reached from the top of the command's JSON through
  objects only (``steps``, ``largest``, ``trace.devices``); a list inside a row is part of
  that row, and a list of numbers or strings (a histogram's bins) is never cut.
- An answer over the budget shows the first k rows of each table (the CLI lists rows best
  first: by rank), k the largest that fits (found by bisection); the rest is what every
  answer needs (a trace's header, totals) and is sent whole even when k = 0 is still over.
- ``offset`` k: the tables that the budget cuts at offset 0 start at their row k + 1; the
  others are whole. So a call with the same arguments and offset = the rows shown pages on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

BYTES_PER_TOKEN = 3
DEFAULT_MAX_TOKENS = 2_000

Path = tuple[str, ...]  # a table's place: the keys from the top of the JSON


@dataclass(frozen=True)
class Cut:
    """A table shown in part: rows first..first + shown - 1 (1-based) of ``total``."""

    table: Path
    first: int
    shown: int
    total: int

    def as_json(self) -> dict[str, Any]:
        return {"table": ".".join(self.table), "first": self.first, "shown": self.shown,
                "of": self.total}  # fmt: skip


# Builds the answer sent from a (cut) result and its cuts: the envelope with the command,
# what was left out and the trim windows of the rows shown.
Frame = Callable[[Any, list[Cut]], dict[str, Any]]


def estimate_tokens(text: str | bytes) -> int:
    """Tokens an answer costs, estimated from its UTF-8 size (see the module's definition)."""
    size = len(text.encode() if isinstance(text, str) else text)
    return -(-size // BYTES_PER_TOKEN)


def encode(answer: Any) -> bytes:
    """An answer as the compact JSON sent (and weighed)."""
    return orjson.dumps(answer)


def fit(result: Any, max_tokens: int, frame: Frame, offset: int = 0) -> dict[str, Any]:
    """``frame`` of ``result`` cut to ``max_tokens``, paged by ``offset`` (module docstring).
    An answer whose tables are all cut to nothing and is still over the budget is sent as
    that: the rest (a trace's header, totals) is what every answer needs."""
    if offset <= 0:
        return _fit(result, max_tokens, frame, {})
    paged = {cut.table for cut in _cuts(result, max_tokens, frame)}
    starts = {table: offset for table in paged}
    return _fit(_sliced(result, starts), max_tokens, frame, starts)


def _cuts(result: Any, max_tokens: int, frame: Frame) -> list[Cut]:
    """The cuts ``fit`` makes at offset 0."""
    cuts: list[Cut] = []

    def keep(shown: Any, made: list[Cut]) -> dict[str, Any]:
        cuts[:] = made
        return frame(shown, made)

    _fit(result, max_tokens, keep, {})
    return cuts


def _fit(result: Any, max_tokens: int, frame: Frame, starts: dict[Path, int]) -> dict[str, Any]:
    """The answer with every table cut to its first k rows, k the most that fits."""
    tables = dict(_tables(result))

    def answer(k: int) -> dict[str, Any]:
        shown = {path: min(len(rows), k) for path, rows in tables.items()}
        cuts = [
            Cut(path, starts.get(path, 0) + 1, shown[path], len(rows) + starts.get(path, 0))
            for path, rows in tables.items()
            if shown[path] < len(rows) or starts.get(path, 0)
        ]
        return frame(_limited(result, shown), cuts)

    def fits(k: int) -> bool:
        return estimate_tokens(encode(answer(k))) <= max_tokens

    low, high = 0, max((len(rows) for rows in tables.values()), default=0)
    if fits(high):
        return answer(high)
    while low + 1 < high:  # answer(low) is the best known (or 0), answer(high) too big
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return answer(low)


def _tables(value: Any, path: Path = ()) -> Iterator[tuple[Path, list[Any]]]:
    """Every list of objects reached from the top through objects only, with its path."""
    if isinstance(value, list) and path:
        if value and all(isinstance(row, dict) for row in value):
            yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tables(item, (*path, str(key)))


def _limited(value: Any, shown: dict[Path, int], path: Path = ()) -> Any:
    """``value`` with each table cut to its first ``shown`` rows."""
    if isinstance(value, list) and path in shown:
        return value[: shown[path]]
    if isinstance(value, dict):
        return {key: _limited(item, shown, (*path, str(key))) for key, item in value.items()}
    return value


def _sliced(value: Any, starts: dict[Path, int], path: Path = ()) -> Any:
    """``value`` with each table of ``starts`` starting at its row there."""
    if isinstance(value, list) and path in starts:
        return value[starts[path] :]
    if isinstance(value, dict):
        return {key: _sliced(item, starts, (*path, str(key))) for key, item in value.items()}
    return value

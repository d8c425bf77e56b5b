"""A collective's metadata, as kineto writes it in the args of NCCL kernels and of the
``record_param_comms`` CPU ops that launch them: a small side table, one row per event that
carries it, so a trace without it costs nothing (traceview.columns.schema.COMM_COLUMNS).

Kept: ``Process Group Name``, ``Collective name`` and ``dtype`` (interned together as one key),
``In msg nelems``, ``Out msg nelems``, ``Group size`` and ``Seq`` (the process group's
sequence number of the collective). An event carries metadata when its ``Collective name`` is
text. Counts written as text (``"2049000"``) are read too; anything else (a negative, a
fraction, a list) counts as absent (−1), as does a missing text field ("").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from traceview.columns.intern import Interner
from traceview.columns.schema import CommColumns, empty
from traceview.read.decode import CommArgs

CommKey = tuple[str, str, str]  # process group, collective, dtype
ABSENT = -1
NO_THREAD = -1
NO_GPU_ROW = -1
_INT64_MAX = 2**63 - 1
_NUMBER = re.compile(r"\s*[0-9]+\s*")
_COUNTS = ("in_nelems", "out_nelems", "group_size", "seq")


def carries(e: Any) -> bool:
    """Whether the event's args carry a collective's metadata (only an event of a span that
    ``may_carry`` can)."""
    args = e.args
    return isinstance(args, CommArgs) and type(args.collective) is str


def key_of(args: CommArgs) -> CommKey:
    """(process group, collective, dtype) of metadata-carrying args; "" where absent."""
    return (_text(args.process_group), _text(args.collective), _text(args.dtype))


def rows(
    events: Sequence[Any],
    keys: Interner,
    gpu_row: Sequence[int] | np.ndarray,
    thread: Sequence[int] | np.ndarray,
    ts: Sequence[int] | np.ndarray,
    end: Sequence[int] | np.ndarray,
) -> tuple[np.ndarray, ...]:
    """The table rows (COMM_COLUMNS order) of metadata-carrying events: their GPU row (or
    NO_GPU_ROW), CPU thread id (or NO_THREAD) and window given; keys interned in ``keys``."""
    args = [e.args for e in events]
    counts = [np.array([count(getattr(a, name)) for a in args], dtype=np.int64) for name in _COUNTS]
    return (
        np.asarray(gpu_row, dtype=np.int64),
        np.asarray(thread, dtype=np.int32),
        np.asarray(ts, dtype=np.int64),
        np.asarray(end, dtype=np.int64),
        keys.ids_of([key_of(a) for a in args]),
        *counts,
    )


def shifted(part: tuple[np.ndarray, ...], gpu_rows: int) -> tuple[np.ndarray, ...]:
    """Rows whose kernels moved ``gpu_rows`` GPU rows down (a part read before them)."""
    gpu_row = part[0]
    return (np.where(gpu_row >= 0, gpu_row + gpu_rows, gpu_row), *part[1:])


def renumbered(
    table: CommColumns, keys: np.ndarray, threads: np.ndarray | None
) -> tuple[np.ndarray, ...]:
    """A table's rows with its key ids (and thread ids, when given) put through maps."""
    thread = table.thread
    if threads is not None and len(thread):
        thread = np.where(thread >= 0, threads[np.maximum(thread, 0)], thread).astype(np.int32)
    key = keys[table.key] if len(table.key) else table.key
    return (table.gpu_row, thread, table.ts, table.end, key, *(getattr(table, n) for n in _COUNTS))


def threadless(table: CommColumns) -> CommColumns:
    """The table of a read without CPU rows: the CPU ops' threads unknown (NO_THREAD)."""
    if not (table.thread >= 0).any():
        return table
    return replace(table, thread=np.full(len(table.thread), NO_THREAD, dtype=np.int32))


def no_comms() -> CommColumns:
    """The table of a trace without metadata."""
    return empty(CommColumns)


def count(value: Any) -> int:
    """A non-negative integer count (text of digits too), else ABSENT."""
    if type(value) is int:
        return value if 0 <= value <= _INT64_MAX else ABSENT
    if isinstance(value, str) and _NUMBER.fullmatch(value):
        number = int(value)
        return number if number <= _INT64_MAX else ABSENT
    return ABSENT


def _text(value: Any) -> str:
    """Text as is (lone surrogates replaced); an integer (a process group named by number) as
    its digits; else ""."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "replace").decode("utf-8")
        return value
    if type(value) is int:
        return str(value)
    return ""

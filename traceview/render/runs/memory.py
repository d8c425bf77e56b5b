"""Renderings of ``traceview memory`` over a run: one line per rank and device, then
(``--per-rank``) each rank's own memory report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from traceview.analyses.core.trace import TraceSummary
from traceview.analyses.memory import MemoryReport
from traceview.render import memory as one_file
from traceview.render import units
from traceview.render.document import Document, Section
from traceview.render.header import run_line
from traceview.render.memory import reserved_text
from traceview.render.tables import Table, to_csv

RankMemory = tuple[int, TraceSummary, MemoryReport]  # rank, its trace, its figures
_HEADERS = ("Rank", "Device", "Peak allocated", "Peak reserved", "% of memory", "Peak step")
_CSV_FIELDS = ("rank", *one_file.CSV_FIELDS)


def table(ranks: Sequence[RankMemory]) -> Table:
    """One row per rank and device (a rank without [memory] events: one row of dashes)."""
    rows = []
    for rank, _, report in ranks:
        for d in report.devices or (None,):
            if d is None:
                rows.append((str(rank), "-", "-", "-", "-", "-"))
                continue
            pct = d.peak_reserved_pct
            rows.append(
                (str(rank), str(d.device), units.memory(d.peak_allocated_bytes),
                 reserved_text(d, d.peak_reserved_bytes), "-" if pct is None else units.pct(pct),
                 "-" if d.peak_step is None else str(d.peak_step))
            )  # fmt: skip
    return Table(_HEADERS, (True,) * 6, rows)


def highest_line(ranks: Sequence[RankMemory]) -> str:
    """The rank and device with the highest peak allocated."""
    peaks = [(d.peak_allocated_bytes, rank, d.device) for rank, _, r in ranks for d in r.devices]
    if not peaks:
        return "memory   no rank has [memory] events (record with profile_memory=True)"
    top, rank, device = max(peaks, key=lambda p: (p[0], -p[1], -p[2]))
    return f"memory   highest peak: rank {rank}, device {device}: {units.memory(top)} allocated"


def as_json(ranks: Sequence[RankMemory]) -> dict[str, Any]:
    return {
        "schema_version": one_file.SCHEMA_VERSION,
        "ranks": [{"rank": rank, **one_file.as_json(trace, r)} for rank, trace, r in ranks],
    }


def csv(ranks: Sequence[RankMemory]) -> str:
    rows = [(rank, *row) for rank, _, r in ranks for row in one_file.csv_rows(r)]
    return to_csv(_CSV_FIELDS, rows)


def document(ranks: Sequence[RankMemory], size_bytes: int, top: int, per_rank: bool) -> Document:
    """The run's roll-up in every format; with ``per_rank``, each rank's report after it
    (JSON and CSV hold every rank's figures whatever ``per_rank`` says)."""
    parts = [(f"rank {rank}", one_file.document(t, r, top)) for rank, t, r in ranks]
    return Document(
        head=[run_line(len(ranks), size_bytes), highest_line(ranks)],
        sections=[Section(table(ranks), title="Peaks per rank and device")],
        data=lambda: as_json(ranks),
        csv=lambda: csv(ranks),
        parts=parts if per_rank else (),
    )

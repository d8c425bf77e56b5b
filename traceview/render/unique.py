"""Renderings of a UniqueReport: JSON records (one a line in the -o file), table, CSV."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from traceview.analyses.core.names import display_names
from traceview.analyses.unique import SCHEMA_VERSION, TIERS, UniqueKernel, UniqueReport
from traceview.analyses.unique import launch_fields as _launch_fields
from traceview.render import units
from traceview.render.document import Document, Section
from traceview.render.tables import Table, to_csv

_HEADERS = ("#", "Tier", "Kind", "Count", "Total", "Mean", "Grid", "Block", "Regs", "Shared",
            "Bytes", "Category", "Op", "Name")  # fmt: skip
_RIGHT = (True, True, False, True, True, True, False, False, True, True, True, False, False, False)
_NARROW_DROP = ("Op", "Category", "Regs", "Shared", "Mean", "Block", "Grid", "Bytes", "Kind")
CSV_FIELDS = ("kind", "name", "short_name", "grid", "block", "registers_per_thread",
              "shared_memory", "bytes", "count", "total_us", "mean_us", "min_us", "max_us",
              "devices", "streams", "category", "op", "input_dims", "input_types",
              "tier")  # fmt: skip


def shown_names(report: UniqueReport) -> Mapping[str, str]:
    """The name each record shows: its short name, told apart from the report's other names
    as ``kernels`` tells them (analyses.names.display_names)."""
    return display_names(list(dict.fromkeys(k.name for k in report.kernels)))


def record(
    kernel: UniqueKernel, energy_j: float | None = None, shown: str | None = None
) -> dict[str, Any]:
    """One activity as its JSON record (times in µs; absent launch values as null);
    ``shown``: its displayed short name (records() decides it over every name)."""
    short = shown if shown is not None else display_names([kernel.name])[kernel.name]
    out: dict[str, Any] = {"kind": kernel.kind, "name": kernel.name,
                           "short_name": short, **_launch_fields(kernel),
                           "count": kernel.count, "total_us": kernel.total_ns / 1000,
                           "mean_us": kernel.mean_ns / 1000, "min_us": kernel.min_ns / 1000,
                           "max_us": kernel.max_ns / 1000, "devices": list(kernel.devices),
                           "streams": list(kernel.streams), "category": kernel.category,
                           "op": kernel.op, "input_dims": kernel.input_dims,
                           "input_types": kernel.input_types, "tier": kernel.tier}  # fmt: skip
    if energy_j is not None:
        out["energy_j"] = energy_j
    return out


def records(report: UniqueReport, energies: Sequence[float] | None = None) -> list[dict[str, Any]]:
    """Every record, in the report's order; ``energies`` (J, one per record) when known."""
    shown = shown_names(report)
    if energies is None:
        return [record(k, None, shown[k.name]) for k in report.kernels]
    return [record(k, e, shown[k.name]) for k, e in zip(report.kernels, energies, strict=True)]


def json_lines(report: UniqueReport, energies: Sequence[float] | None = None) -> str:
    """The -o file: one JSON object a line, each with ``schema_version``."""
    lines = [
        orjson.dumps({"schema_version": SCHEMA_VERSION, **r}).decode()
        for r in records(report, energies)
    ]
    return "".join(line + "\n" for line in lines)


def as_json(report: UniqueReport, energies: Sequence[float] | None = None) -> dict[str, Any]:
    """The terminal's JSON document."""
    return {
        "schema_version": SCHEMA_VERSION,
        "activities": report.activities,
        "unique": len(report.kernels),
        "per_tier": {str(t): n for t, n in report.per_tier().items()},
        "kernels": records(report, energies),
    }


def csv(report: UniqueReport, energies: Sequence[float] | None = None) -> str:
    """One CSV row per record; lists as JSON text."""
    fields = CSV_FIELDS if energies is None else (*CSV_FIELDS, "energy_j")
    rows = []
    for r in records(report, energies):
        rows.append(tuple(_csv_value(r[f]) for f in fields))
    return to_csv(fields, rows)


def _csv_value(value: Any) -> Any:
    if isinstance(value, list):
        return orjson.dumps(value).decode()
    return "" if value is None else value


def summary_line(report: UniqueReport) -> str:
    """``N activities → M unique (tier 1: a, tier 2: b, tier 3: c)``."""
    tiers = ", ".join(f"tier {t}: {units.count(n)}" for t, n in report.per_tier().items())
    return (
        f"{units.counted(report.activities, 'activity', 'activities')} → "
        f"{units.count(len(report.kernels))} unique ({tiers})"
    )


def table(
    report: UniqueReport, verbose: bool, top: int, energies: Sequence[float] | None = None
) -> Table:
    """The first ``top`` records (0: all) as formatted cells; with ``energies`` (--power),
    an ``Energy J`` column after the total time."""
    kept = report.kernels if top == 0 else report.kernels[:top]
    names = None if verbose else shown_names(report)
    rows = [_cells(i, k, k.name if names is None else names[k.name]) for i, k in enumerate(kept, 1)]
    if energies is None:
        return Table(_HEADERS, _RIGHT, rows)
    at = _HEADERS.index("Total") + 1
    rows = [(*r[:at], units.joules(e), *r[at:]) for r, e in zip(rows, energies, strict=False)]
    return Table(
        (*_HEADERS[:at], "Energy J", *_HEADERS[at:]), (*_RIGHT[:at], True, *_RIGHT[at:]), rows
    )


def _cells(rank: int, kernel: UniqueKernel, name: str) -> tuple[str, ...]:
    launch = _launch_fields(kernel)

    def dims(value: list[int] | None) -> str:
        return "" if value is None else "×".join(map(str, value))

    def number(value: int | None) -> str:
        return "" if value is None else units.count(value)

    return (
        str(rank), str(kernel.tier), kernel.kind, units.count(kernel.count),
        units.time_ns(kernel.total_ns), units.time_ns(kernel.mean_ns),
        dims(launch["grid"]), dims(launch["block"]), number(launch["registers_per_thread"]),
        number(launch["shared_memory"]), number(launch["bytes"]), kernel.category, kernel.op,
        name,
    )  # fmt: skip


def document(
    report: UniqueReport, verbose: bool, top: int, energies: Sequence[float] | None
) -> Document:
    """``traceview unique`` in every format (its summary line goes to stderr; JSON and CSV
    hold every record)."""
    hidden = len(report.kernels) - top if top else 0
    more = f"{units.count(hidden)} more not shown; use --top 0 for all" if hidden > 0 else None
    return Document(
        head=[],
        sections=[
            Section(table(report, verbose, top, energies), note=more, drop_order=_NARROW_DROP)
        ],
        data=lambda: as_json(report, energies),
        csv=lambda: csv(report, energies),
    )


__all__ = ["TIERS", "as_json", "csv", "document", "json_lines", "record", "summary_line"]

"""Renderings of an EnergyReport: table (rich or text), Markdown, CSV, JSON."""

from __future__ import annotations

from typing import Any

from traceview.analyses.core.names import display_names
from traceview.analyses.energy import PJ_PER_J, SCHEMA_VERSION, EnergyReport, stamp
from traceview.columns.schema import GPU_KINDS
from traceview.render import units
from traceview.render.document import Document, Section
from traceview.render.tables import Table, to_csv

_DEVICE_HEADERS = ("Device", "Window", "Energy J", "Busy J", "Idle J", "Kernels J",
                   "Copies J", "Mean W", "Coverage %")  # fmt: skip
_KERNEL_HEADERS = ("#", "Kind", "Count", "Energy J", "Mean W", "J / launch", "Name")


def joules(pj: int) -> float:
    return pj / PJ_PER_J


def as_json(report: EnergyReport, top: int) -> dict[str, Any]:
    kernels = report.kernels if top == 0 else report.kernels[:top]
    return {
        "schema_version": SCHEMA_VERSION,
        "devices": [
            {
                "device": d.device,
                "window_us": d.window_ns / 1000,
                "energy_j": joules(d.energy_pj),
                "busy_energy_j": joules(d.busy_pj),
                "idle_energy_j": joules(d.idle_pj),
                "kernel_energy_j": joules(d.kernel_pj),
                "copy_energy_j": joules(d.copy_pj),
                "mean_power_w": d.mean_power_w,
                "coverage_pct": d.coverage_pct,
                "row_interval_ms": d.row_interval_ns / 1e6,
                "refresh_interval_ms": d.refresh_interval_ns / 1e6,
            }
            for d in report.devices
        ],
        "kernels": [
            {
                "name": k.name,
                "kind": GPU_KINDS[k.kind],
                "count": k.count,
                "energy_j": joules(k.energy_pj),
                "mean_power_w": k.mean_power_w,
                "energy_per_launch_j": joules(k.energy_pj) / k.count,
            }
            for k in kernels
        ],
    }


def device_table(report: EnergyReport) -> Table:
    rows = [
        (str(d.device), units.time_ns(d.window_ns), _j(d.energy_pj), _j(d.busy_pj),
         _j(d.idle_pj), _j(d.kernel_pj), _j(d.copy_pj), f"{d.mean_power_w:,.1f}",
         f"{d.coverage_pct:.1f}")
        for d in report.devices
    ]  # fmt: skip
    return Table(_DEVICE_HEADERS, (False,) + (True,) * 8, rows)


def kernel_table(report: EnergyReport, top: int, verbose: bool) -> Table:
    kernels = report.kernels if top == 0 else report.kernels[:top]
    # short names told apart as `kernels` tells them, decided over every name of the report
    shown = None if verbose else display_names(list(dict.fromkeys(k.name for k in report.kernels)))
    rows = [
        (str(i), GPU_KINDS[k.kind], units.count(k.count), _j(k.energy_pj),
         f"{k.mean_power_w:,.1f}", units.joules(joules(k.energy_pj) / k.count),
         k.name if shown is None else shown[k.name])
        for i, k in enumerate(kernels, 1)
    ]  # fmt: skip
    return Table(_KERNEL_HEADERS, (True, False, True, True, True, True, False), rows)


def _j(pj: int) -> str:
    return units.joules(joules(pj))


def document(report: EnergyReport, top: int, verbose: bool) -> Document:
    """``traceview energy`` in every format (the CSV: every kernel name)."""
    hidden = len(report.kernels) - top if top else 0
    more = f"{units.count(hidden)} more not shown; use --top 0 for all" if hidden > 0 else None
    return Document(
        head=[],
        sections=[
            Section(device_table(report), drop_order=("Copies J", "Kernels J", "Coverage %")),
            Section(
                kernel_table(report, top, verbose), note=more, drop_order=("J / launch", "Kind")
            ),
        ],
        data=lambda: as_json(report, top),
        csv=lambda: csv(report),
    )


def csv(report: EnergyReport) -> str:
    """Every name (whatever --top says), numbers raw."""
    headers = ("kind", "name", "count", "energy_j", "mean_power_w", "energy_per_launch_j")
    rows = [
        (GPU_KINDS[k.kind], k.name, k.count, joules(k.energy_pj), k.mean_power_w,
         joules(k.energy_pj) / k.count)
        for k in report.kernels
    ]  # fmt: skip
    return to_csv(headers, rows)


def window_line(report: EnergyReport) -> str:
    """The aligned windows, for stderr."""
    t0, t1 = report.trace_window_ns
    l0, l1 = report.log_window_ns
    return f"trace window {stamp(t0)} – {stamp(t1)} UTC; power log {stamp(l0)} – {stamp(l1)} UTC"

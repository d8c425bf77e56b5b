"""What ``traceview record`` leaves in its directory for later commands: ``.record.json``
(hidden: a reader of the run directory takes only its traces; ``record.json`` in directories
recorded before), the power logger's clock zone (nvidia-smi writes local times without a
zone), so that ``energy`` and ``unique --power`` need no ``--power-tz`` for a recorded log."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from traceview.side_files import read_side_file

if TYPE_CHECKING:
    from traceview.analyses.energy import PowerOptions

RECORD_FILE = ".record.json"
OLD_RECORD_FILE = "record.json"  # where traceview record wrote it before: still read


def write_power_zone(out: Path, log_name: str, zone: str) -> None:
    """Say in ``out/.record.json`` which zone the power log ``log_name`` beside it is in."""
    text = json.dumps({"power_log": log_name, "power_tz": zone}, indent=2)
    (out / RECORD_FILE).write_text(text + "\n", encoding="utf-8")


def recorded_zone(log: Path) -> str | None:
    """The zone ``traceview record`` recorded for the power log ``log`` (a .record.json beside
    it naming it), else None; a .record.json that is damaged or names another file is none."""
    where = log.parent / RECORD_FILE
    if not where.is_file():
        where = log.parent / OLD_RECORD_FILE
    if not where.is_file():
        return None
    try:
        doc = json.loads(read_side_file(where, "record file"))
    except Exception:  # unreadable, too big, not JSON: nothing recorded
        return None
    if not isinstance(doc, dict) or doc.get("power_log") != log.name:
        return None
    zone = doc.get("power_tz")
    return zone if isinstance(zone, str) else None


def with_recorded_zone(power: PowerOptions) -> tuple[PowerOptions, str]:
    """``power`` with the recorded zone when --power-tz was not given; a note saying so."""
    if power.tz is not None:
        return power, ""
    zone = recorded_zone(Path(power.path))
    if zone is None:
        return power, ""
    return replace(power, tz=zone), f" (recorded by traceview record in {RECORD_FILE})"

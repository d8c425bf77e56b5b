"""The peak FLOP/s and memory bandwidth of a trace's GPU, for % of peak and the roofline.

Looked up by the deviceProperties ``name`` the trace carries, else by (compute capability, SM
count) when exactly one table entry has them; entries of a ``--peaks`` file (JSON or TOML, the
shape of analyses.peak_table: ``{"devices": [...]}``) come first, and one without ``names``
applies to any device. No match: no peaks, and a note says why.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traceview.analyses.ops.peak_table import DEVICES
from traceview.errors import TraceviewError, UsageError
from traceview.side_files import read_side_file

DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")


@dataclass(frozen=True)
class Peaks:
    """One device's peaks: TFLOP/s per dtype (dense), memory bandwidth in TB/s, and where
    they come from (the table entry or the file, and the key that matched)."""

    device: str
    tflops: dict[str, float]
    tb_per_s: float | None
    source: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "peak_tflops_per_s": dict(self.tflops),
            "peak_tb_per_s": self.tb_per_s,
            "source": self.source,
        }


def load_peaks_file(path: Path) -> list[dict[str, Any]]:
    """The checked entries of a ``--peaks`` file (UsageError, one line, if it is wrong)."""
    try:
        text = read_side_file(path, "peaks file", f"--peaks {path}")
    except TraceviewError as e:
        raise UsageError(e.message) from None
    import tomllib  # only for a --peaks file (start-up of summary and steps)

    try:
        data = tomllib.loads(text.decode()) if path.suffix == ".toml" else json.loads(text)
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"--peaks {path}: not valid {_format(path)} ({e})") from None
    except RecursionError:
        raise UsageError(f"--peaks {path}: nested too deeply for a peaks file") from None
    entries = data.get("devices") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise UsageError(f'--peaks {path}: expected {{"devices": [...]}} with at least one')
    for i, entry in enumerate(entries):
        problem = _problem(entry)
        if problem:
            raise UsageError(f"--peaks {path}: devices[{i}]: {problem}")
    return entries


def _format(path: Path) -> str:
    return "TOML" if path.suffix == ".toml" else "JSON"


def _problem(entry: Any) -> str | None:
    """What is wrong with one entry, or None."""
    if not isinstance(entry, dict):
        return "not an object"
    names = entry.get("names", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return "names: expected a list of strings"
    tflops = entry.get("tflops", {})
    if not isinstance(tflops, dict) or not all(
        k in DTYPES and _positive(v) for k, v in tflops.items()
    ):
        return f"tflops: expected positive numbers keyed by {', '.join(DTYPES)}"
    if "tb_per_s" in entry and not _positive(entry["tb_per_s"]):
        return "tb_per_s: expected a positive number"
    return None


def _positive(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def device_peaks(
    header: dict[str, Any], extra: list[dict[str, Any]] | None = None
) -> tuple[Peaks | None, str | None]:
    """The peaks of the trace's GPU (the first of deviceProperties), and a note when there
    are none or when its devices differ."""
    props = header.get("deviceProperties")
    devices = [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    from_file = list(extra or [])
    generic = [e for e in from_file if "names" not in e]
    if not devices:
        if generic:
            return _peaks(generic[0], "--peaks file (any device)"), None
        return None, "no deviceProperties in the trace: no peaks, so no % of peak or bound"
    first = devices[0]
    name = str(first.get("name", ""))
    names = {str(d.get("name", "")) for d in devices}
    note = (
        f"devices differ ({', '.join(sorted(names))}): peaks of {name!r}"
        if len(names) > 1
        else None
    )
    for entries, where in ((from_file, "--peaks file"), (DEVICES, "table")):
        for entry in entries:
            if name and name in entry.get("names", []):
                return _peaks(entry, f"{where}, by name {name!r}"), note
    key = (_cc(first), first.get("numSms"))
    for entries, where in ((from_file, "--peaks file"), (DEVICES, "table")):
        matches = [e for e in entries if (e.get("cc"), e.get("sms")) == key and key[0]]
        if len(matches) == 1:
            how = f"{where}, by compute capability {key[0]} and {key[1]} SMs"
            return _peaks(matches[0], how), note
    if generic:
        return _peaks(generic[0], "--peaks file (any device)"), note
    why = f"device {name!r} (compute capability {key[0]}, {key[1]} SMs) is not in the peak table"
    return None, why + "; give its peaks with --peaks FILE for % of peak and the bound"


def _cc(props: dict[str, Any]) -> str | None:
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    if type(major) is int and type(minor) is int:
        return f"{major}.{minor}"
    return None


def _peaks(entry: dict[str, Any], source: str) -> Peaks:
    name = str(entry.get("device") or (entry.get("names") or ["?"])[0])
    tb = entry.get("tb_per_s")
    return Peaks(name, {k: float(v) for k, v in entry.get("tflops", {}).items()},
                 None if tb is None else float(tb), source)  # fmt: skip

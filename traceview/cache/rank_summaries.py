"""A RankSummary's numbers as named numpy arrays and back, to keep in the rank's cache entry.

Numbers only: no wording (warnings are worked out from the entry's metadata on each run),
nothing that depends on where the file is or which rank it is in a run (both given back
when the summary is rebuilt), and none of the optional per-file tables (``--per-rank``,
snapshots), which need the events anyway. The key names the kernel options and step regex
the numbers were worked out with and a fingerprint of the code that worked them out, so a
summary is served only to the code and options that would compute the same one.
"""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

import numpy as np

from traceview.aggregate import moments, sketch
from traceview.analyses.core.devices import DeviceUsage
from traceview.analyses.kernels import KernelOptions
from traceview.analyses.runs.rank_summary import CommKernels, GapFigures, KernelStats, RankSummary
from traceview.cache.fingerprint import INGEST_SOURCES, code_fingerprint

# The code a summary's numbers come from: the ingest code (the entry's columns), and every
# analysis and aggregate (tests/cli/test_rank_summary_arrays.py checks what rank_summary imports).
SUMMARY_SOURCES = (
    *INGEST_SOURCES,
    "cache/rank_summaries.py",
    "analyses",
    "aggregate",
    "choices.py",
    "parsing.py",
)
FORMAT = 2  # the layout of the arrays below (2: the collectives' metadata)
_SCALARS = ("size_bytes", "kernels", "kernel_time_ns", "comm_ns", "exposed_comm_ns")


def summary_key(options: KernelOptions, step_regex: str | None) -> str:
    """The key of the summary a run with these options needs (hex digits)."""
    import xxhash

    chosen = (options.include, options.name_regex, options.steps, step_regex)
    text = repr((FORMAT, code_fingerprint(SUMMARY_SOURCES), chosen))
    return xxhash.xxh3_128_hexdigest(text.encode())


def to_arrays(summary: RankSummary) -> dict[str, np.ndarray]:
    """The numbers of a summary as named arrays."""
    text = {
        "kernel_names": summary.stats.names,
        "comm_names": summary.comm.names,
        "comm_groups": summary.comm.groups,
        "devices": [d.device for d in summary.devices],
    }
    gaps = summary.gaps
    return {
        "text": np.frombuffer(json.dumps(text).encode(), np.uint8),
        "scalars": np.array([getattr(summary, name) for name in _SCALARS], np.int64),
        "median_step_ns": np.array(
            [] if summary.median_step_ns is None else [summary.median_step_ns], np.int64
        ),
        "devices": np.array(
            [(d.start_ns, d.end_ns, d.busy_ns) for d in summary.devices], np.int64
        ).reshape(-1, 3),
        "steps": np.array(summary.steps, np.int64).reshape(-1, 3),
        **_flat("moments", summary.stats.moments),
        **_flat("sketch", summary.stats.sketch),
        **_flat("comm", summary.comm),
        **({} if gaps is None else _gap_arrays(gaps)),
    }


def from_arrays(arrays: dict[str, np.ndarray], rank: int, path: str) -> RankSummary:
    """The summary of ``rank`` (read from ``path``) whose numbers are ``arrays``; KeyError or
    ValueError when they are not what ``to_arrays`` writes."""
    text = json.loads(arrays["text"].tobytes())
    median = arrays["median_step_ns"].tolist()
    return RankSummary(
        rank=rank,
        path=path,
        **dict(zip(_SCALARS, arrays["scalars"].tolist(), strict=True)),
        stats=KernelStats(
            names=[str(n) for n in text["kernel_names"]],
            moments=_unflat("moments", moments.Moments, arrays),
            sketch=_unflat("sketch", sketch.Sketch, arrays),
        ),
        devices=[
            DeviceUsage(device, *row)
            for device, row in zip(text["devices"], arrays["devices"].tolist(), strict=True)
        ],
        median_step_ns=median[0] if median else None,
        comm=_unflat(
            "comm",
            CommKernels,
            arrays,
            names=[str(n) for n in text["comm_names"]],
            groups=[(str(pg), str(c)) for pg, c in text["comm_groups"]],
        ),
        steps=tuple((step, cpu, gpu) for step, cpu, gpu in arrays["steps"].tolist()),
        gaps=_gaps(arrays) if "gaps.host_wait_ns" in arrays else None,
    )


def _gap_arrays(gaps: GapFigures) -> dict[str, np.ndarray]:
    return {
        **_flat("gaps.lengths", gaps.lengths),
        **_flat("gaps.sketch", gaps.sketch),
        "gaps.host_wait_ns": np.array([gaps.host_wait_ns], np.int64),
    }


def _gaps(arrays: dict[str, np.ndarray]) -> GapFigures:
    return GapFigures(
        _unflat("gaps.lengths", moments.Moments, arrays),
        _unflat("gaps.sketch", sketch.Sketch, arrays),
        int(arrays["gaps.host_wait_ns"][0]),
    )


def _flat(prefix: str, value: Any) -> dict[str, np.ndarray]:
    """The array fields of a dataclass, named ``prefix.field``."""
    return {
        f"{prefix}.{f.name}": getattr(value, f.name)
        for f in fields(value)
        if isinstance(getattr(value, f.name), np.ndarray)
    }


def _unflat(prefix: str, cls: Any, arrays: dict[str, np.ndarray], **others: Any) -> Any:
    """The dataclass ``_flat`` flattened (its other fields given)."""
    return cls(
        **{f.name: arrays[f"{prefix}.{f.name}"] for f in fields(cls) if f.name not in others},
        **others,
    )

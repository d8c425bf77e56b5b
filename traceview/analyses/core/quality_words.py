"""The data-quality checks in words, built for each report's header and JSON from the numbers
the cache keeps (a change of wording never needs a cache rebuild)."""

from __future__ import annotations

from typing import Any

from traceview.analyses.core.quality import SUSPICIOUS_NS
from traceview.columns.model import DataChecks
from traceview.humanize import duration


def quality_warnings(
    checks: DataChecks, header: dict[str, Any], before: tuple[int, int, int] = (0, 0, 0)
) -> list[str]:
    """The checks that found something, in words (and a display unit the trace misstates);
    ``before``: the activities launched before the trace (count, GPU time, how far into
    the trace the last ends, ns), of those with no matching launch."""
    warnings = []
    if checks.overlaps:
        warnings.append(
            f"{checks.overlaps} GPU activities overlap the previous one on their stream "
            f"(up to {duration(checks.overlap_max_ns / 1000)})"
        )
    if checks.zero_durations:
        warnings.append(f"{checks.zero_durations} GPU activities have a duration of 0")
    if checks.no_launches:
        warnings.append("no runtime launch events: --pstep uses each kernel's own start time")
    elif checks.missing_launches:
        count, gpu_ns, until_ns = before
        if count:
            warnings.append(
                f"{count} GPU activities were launched before the trace began (the previous "
                f"step's queued tail): {duration(gpu_ns / 1000)} of GPU time in the first "
                f"{duration(until_ns / 1000)}; shown as (launched before the trace), in no op "
                "and no step"
            )
        if checks.missing_launches > count:
            warnings.append(
                f"{checks.missing_launches - count} GPU activities have no matching launch "
                "event (--pstep uses their own start time)"
            )
    if checks.long_activities:
        warnings.append(
            f"{checks.long_activities} GPU activities last longer than "
            f"{duration(SUSPICIOUS_NS / 1000)} (longest {duration(checks.longest_ns / 1000)}): "
            "check the trace"
        )
    unit = header.get("displayTimeUnit")
    if unit not in (None, "ms", "us"):
        warnings.append(
            f"displayTimeUnit is {unit!r}; ts and dur are read as µs, as the trace format defines"
        )
    return warnings

"""``diff --explain``: the change in median step time as a waterfall of parts that add up to
it exactly (docs/metrics.md "Diff --explain").

Each side's **median step** is the compared step whose step time is the ⌈n/2⌉-th smallest
(the earliest of equals): a real step, so its time splits exactly (analyses.core.step_parts)
into kernel time by group (as the diff compares them: name, short name, category, launching
op or fused op; the kernels below a snapshot's storage cut as one group), copy time, overlap,
idle per cause and step overlap. The parts of the change are those figures' differences
(integer ns): per group ``slower`` / ``faster`` (on both sides), ``new`` / ``gone`` (on one);
``copies``; ``overlap`` (more work at once shortens the step: −Δ overlap); ``idle`` per cause;
and a ``remainder`` row for anything the figures do not cover (none by construction, but a
snapshot stores µs, so it says so if rounding ever left one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from traceview.analyses.core.step_parts import CAUSES, StepParts
from traceview.analyses.snapshot import KernelStat, OtherKernels, Snapshot

OTHER_KERNELS = "(kernels below the snapshot's cut)"
KINDS = ("slower", "faster", "new", "gone", "copies", "overlap", "idle", "remainder")


@dataclass(frozen=True)
class Part:
    """One bar of the waterfall: what (``group``), which way (``kind``) and by how much."""

    group: str
    kind: str
    delta_ns: int

    def as_dict(self) -> dict[str, Any]:
        return {"group": self.group, "kind": self.kind, "delta_us": self.delta_ns / 1000}


@dataclass(frozen=True)
class Explain:
    """The median steps compared, their step times, the change and its parts (largest |Δ|
    first; the copies, overlap and idle rows always present)."""

    base_step: int
    new_step: int
    base_ns: int
    new_ns: int
    parts: tuple[Part, ...]

    @property
    def total_ns(self) -> int:
        return self.new_ns - self.base_ns

    def as_dict(self) -> dict[str, Any]:
        return {
            "base_step": self.base_step,
            "new_step": self.new_step,
            "base_step_time_us": self.base_ns / 1000,
            "new_step_time_us": self.new_ns / 1000,
            "total_us": self.total_ns / 1000,
            "parts": [p.as_dict() for p in self.parts],
        }


def median_step(parts: Sequence[StepParts]) -> int:
    """The position (in ``parts``) of the median step: the ⌈n/2⌉-th smallest step time, the
    earliest of equals."""
    order = sorted(range(len(parts)), key=lambda i: (parts[i].step_ns, i))
    return order[(len(order) + 1) // 2 - 1]


def explain(
    base: Snapshot,
    new: Snapshot,
    base_idx: list[int],
    new_idx: list[int],
    groups: Callable[[Snapshot], dict[str, list[KernelStat | OtherKernels]]],
) -> Explain | None:
    """The Explain of the compared steps (positions in each snapshot's steps); ``groups``:
    per side, each group's kernel rows (the diff's grouping). None without step parts."""
    if not (base.step_parts and new.step_parts and base_idx and new_idx):
        return None
    b = base_idx[median_step([base.step_parts[i] for i in base_idx])]
    n = new_idx[median_step([new.step_parts[i] for i in new_idx])]
    bp, np_ = base.step_parts[b], new.step_parts[n]
    before, after = _group_times(base, b, groups(base)), _group_times(new, n, groups(new))
    parts = []
    for name in sorted(before.keys() | after.keys()):
        was, now = before.get(name), after.get(name)
        delta = (now or (0, 0))[1] - (was or (0, 0))[1]
        if was is None or was[0] == 0:
            kind = "new"
        elif now is None or now[0] == 0:
            kind = "gone"
        else:
            kind = "slower" if delta > 0 else "faster"
        if delta or kind in ("new", "gone"):
            parts.append(Part(name, kind, delta))
    # the kernel time the groups do not cover (rounding of stored µs): its own row
    kernel_gap = (np_.kernel_ns - bp.kernel_ns) - sum(p.delta_ns for p in parts)
    parts.append(Part("memcpy/memset", "copies", np_.copy_ns - bp.copy_ns))
    parts.append(Part("work at once on several streams", "overlap", bp.overlap_ns - np_.overlap_ns))
    for c, cause in enumerate(CAUSES):
        parts.append(Part(cause, "idle", np_.idle_ns[c] - bp.idle_ns[c]))
    parts.append(Part("steps overlapping", "overlap", np_.step_overlap_ns - bp.step_overlap_ns))
    total = np_.step_ns - bp.step_ns
    remainder = total - sum(p.delta_ns for p in parts)
    if remainder or kernel_gap:
        parts.append(Part("remainder", "remainder", remainder))
    parts.sort(key=lambda p: (-abs(p.delta_ns), KINDS.index(p.kind), p.group))
    return Explain(
        base_step=base.steps[b].step,
        new_step=new.steps[n].step,
        base_ns=bp.step_ns,
        new_ns=np_.step_ns,
        parts=tuple(parts),
    )


def _group_times(
    snap: Snapshot, at: int, groups: dict[str, list[KernelStat | OtherKernels]]
) -> dict[str, tuple[int, int]]:
    """Per group: its kernels' count and time (ns) in the step at position ``at``."""
    out = {}
    for name, rows in groups.items():
        count = sum(r.step_counts[at] for r in rows)
        time = sum(round(r.step_totals_us[at] * 1000) for r in rows)
        if count:
            out[name] = (count, time)
    return out


__all__ = ["KINDS", "OTHER_KERNELS", "Explain", "Part", "explain", "median_step"]

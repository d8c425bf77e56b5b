"""Damage a real trace in a known way, seeded, and say what ``traceview audit`` must report.

Each damage takes the trace's top-level object and events (as ``json`` parses them), removes or
moves known rows, and returns what changes against the undamaged trace: per check id, the
change of its count and of its time (ns), and of the counts of its parts. The expectations are
worked out here from the rows themselves, event by event (an independent, plain reading), never
from traceview.

    python tests/audit_damage.py SRC DST --damage kernels --seed 7   # writes DST, prints JSON
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference  # tests/reference.py, the plain reading

Event = dict[str, Any]
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
KERNEL_LAUNCH = re.compile(r"^(?:cuda|cu|hip)(?:Ext)?(?:Module)?Launch(?:Cooperative)?Kernel\w*$")
ANY_LAUNCH = re.compile(r"^(?:cuda|cu|hip)\w*(?:Launch|Memcpy|Memset)\w*$")


@dataclass
class Expected:
    """Per check id: how its count, time (ns; None: not checked) and parts' counts change."""

    count: dict[str, int] = field(default_factory=dict)
    time_ns: dict[str, int | None] = field(default_factory=dict)
    parts: dict[str, dict[str, int]] = field(default_factory=dict)
    approx_time_ns: dict[str, int] = field(default_factory=dict)  # within 15%
    steps: dict[str, list[int]] = field(default_factory=dict)  # steps that must be listed
    partial: bool = False  # read with --partial (a cut file)

    def add(self, check: str, count: int, time_ns: int | None, part: str | None = None) -> None:
        self.count[check] = self.count.get(check, 0) + count
        old = self.time_ns.get(check, 0)
        self.time_ns[check] = None if time_ns is None or old is None else old + time_ns
        if part is not None:
            self.parts.setdefault(check, {})[part] = count


def load(path: Path) -> tuple[dict[str, Any], list[Event]]:
    """The top-level object and the events; numbers with a fraction as Decimal, so that an
    epoch-µs ts (which a float64 holds only to 0.25 µs) is written back as it was read."""
    with gzip.open(path, "rt") as f:
        top = json.load(f, parse_float=Decimal)
    return top, top.pop("traceEvents")


_DECIMAL = "\x00decimal:"  # how a Decimal crosses json.dumps, as a string


def _exact(value: object) -> str:
    if isinstance(value, Decimal):
        return f"{_DECIMAL}{value}"
    raise TypeError(f"cannot write {type(value).__name__}")


def save(top: dict[str, Any], events: list[Event], path: Path, cut: float | None = None) -> None:
    """Write the trace (gzip); ``cut``: keep only that share of its text (a file cut short)."""
    text = json.dumps({**top, "traceEvents": events}, default=_exact)
    text = re.sub(r'"\\u0000decimal:([^"]*)"', r"\1", text)
    if cut is not None:
        text = text[: int(len(text) * cut)]
    with gzip.open(path, "wt") as f:
        f.write(text)


def _corr(e: Event) -> Any:
    args = e.get("args")
    return args.get("correlation") if isinstance(args, dict) else None


def _is_gpu(e: Event) -> bool:
    return e.get("ph") == "X" and str(e.get("cat", "")).lower() in GPU_CATS


def _is_call(e: Event) -> bool:
    return (
        e.get("ph") == "X"
        and str(e.get("cat", "")).lower() in reference.RUNTIME_CATEGORIES
        and _corr(e) is not None
    )


def _own_kernels(events: list[Event]) -> list[tuple[Event, Event]]:
    """(launch call, kernel) pairs: a kernel launch call whose id one kernel alone carries,
    launched in the middle 60% of the launches (far from the trace's two ends)."""
    gpu: dict[Any, list[Event]] = {}
    for e in events:
        if _is_gpu(e):
            gpu.setdefault(_corr(e), []).append(e)
    calls = [e for e in events if _is_call(e) and KERNEL_LAUNCH.match(str(e.get("name")))]
    calls.sort(key=lambda e: reference.ts_ns(e) or 0)
    middle = calls[len(calls) // 5 : len(calls) * 4 // 5]
    return [
        (c, gpu[_corr(c)][0])
        for c in middle
        if len(gpu.get(_corr(c), [])) == 1 and str(gpu[_corr(c)][0].get("cat")) == "kernel"
    ]


def _without(events: list[Event], gone: list[Event]) -> list[Event]:
    ids = {id(e) for e in gone}
    return [e for e in events if id(e) not in ids]


def delete_kernels(
    events: list[Event], rng: random.Random, k: int = 5
) -> tuple[list[Event], Expected]:
    """Kernels whose launch call stays: launch-without-gpu, k kernel launches, their calls' time."""
    picked = rng.sample(_own_kernels(events), k)
    out = Expected()
    out.add("launch-without-gpu", k, sum(reference.dur_ns(c) for c, _ in picked), "kernel launches")
    return _without(events, [g for _, g in picked]), out


def delete_launches(
    events: list[Event], rng: random.Random, k: int = 5
) -> tuple[list[Event], Expected]:
    """Launch calls whose kernel stays: gpu-without-launch, k activities, their GPU time."""
    picked = rng.sample(_own_kernels(events), k)
    out = Expected()
    out.add("gpu-without-launch", k, sum(reference.dur_ns(g) for _, g in picked))
    return _without(events, [c for c, _ in picked]), out


def delete_runtime(
    events: list[Event], rng: random.Random, k: int = 20
) -> tuple[list[Event], Expected]:
    """Runtime calls that launch nothing (no GPU activity carries their id): nothing changes."""
    launched = {_corr(e) for e in events if _is_gpu(e)}
    idle = [
        e for e in events
        if _is_call(e) and _corr(e) not in launched and not ANY_LAUNCH.match(str(e.get("name")))
    ]  # fmt: skip
    return _without(events, rng.sample(idle, min(k, len(idle)))), Expected()


def _cpu_steps(events: list[Event]) -> list[Event]:
    return sorted(
        (
            e for e in events
            if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
            and str(e.get("cat", "")).lower() in reference.CPU_STEP_CATEGORIES
        ),
        key=lambda e: reference.ts_ns(e) or 0,
    )  # fmt: skip


def delete_step_end(events: list[Event], rng: random.Random) -> tuple[list[Event], Expected]:
    """The end (dur) of one CPU ProfilerStep in the middle: truncated, a step without an end."""
    steps = _cpu_steps(events)
    step = rng.choice(steps[1:-1])
    del step["dur"]
    number = int(str(step["name"]).removeprefix("ProfilerStep#"))
    out = Expected()
    out.add("truncated", 1, 0, "steps without an end")
    out.steps["truncated"] = [number]
    return events, out


def delete_step(events: list[Event], rng: random.Random) -> tuple[list[Event], Expected]:
    """One CPU ProfilerStep range in the middle deleted (its GPU annotation stays): truncated,
    a step missing its CPU range."""
    step = rng.choice(_cpu_steps(events)[1:-1])
    out = Expected()
    out.add("truncated", 1, 0, "steps missing their CPU range")
    out.steps["truncated"] = [int(str(step["name"]).removeprefix("ProfilerStep#"))]
    return _without(events, [step]), out


def negative_durations(
    events: list[Event], rng: random.Random, k: int = 3
) -> tuple[list[Event], Expected]:
    """k kernels given a negative dur: the reader skips them (negative-duration), so their
    launch calls ran nothing (launch-without-gpu, kernel launches)."""
    picked = rng.sample(_own_kernels(events), k)
    for _, kernel in picked:
        kernel["dur"] = -abs(kernel["dur"]) - 1
    out = Expected()
    out.add("negative-duration", k, 0)
    out.add("launch-without-gpu", k, sum(reference.dur_ns(c) for c, _ in picked), "kernel launches")
    return events, out


def zero_durations(
    events: list[Event], rng: random.Random, k: int = 4
) -> tuple[list[Event], Expected]:
    """k kernels given dur 0 in a trace with ns timestamps: zero-duration."""
    for _, kernel in rng.sample(_own_kernels(events), k):
        kernel["dur"] = 0
    out = Expected()
    out.add("zero-duration", k, 0)
    return events, out


def far_kernel(events: list[Event], rng: random.Random) -> tuple[list[Event], Expected]:
    """One kernel moved 100 s later (a broken ts): beyond-span; and, now last on its stream
    with an id lower than the kernel before it, out-of-order. Both count its GPU time."""
    _, kernel = rng.choice(_own_kernels(events))
    kernel["ts"] = kernel["ts"] + 100_000_000  # µs
    out = Expected()
    out.add("beyond-span", 1, reference.dur_ns(kernel))
    out.add("out-of-order", 1, reference.dur_ns(kernel))
    return events, out


def add_warnings(top: dict[str, Any], rng: random.Random, k: int = 3) -> Expected:
    """kineto's WARNING list in the top-level object, k lines: profiler-warning, verbatim."""
    top["WARNING"] = [
        f"WARNING:2026-01-01 00:00:0{i} 1:1 CuptiActivityProfiler.cpp:{rng.randint(1, 999)}] "
        f"CUPTI buffer overflow: {rng.randint(1, 99)} activities lost"
        for i in range(k)
    ]
    out = Expected()
    out.add("profiler-warning", k, 0)
    return out


def _launch_ns(events: list[Event]) -> dict[Any, int]:
    return reference.launch_ts_by_correlation(events)


def _device(e: Event) -> Any:
    args = e.get("args")
    return args.get("device") if isinstance(args, dict) else None


def shift_clock(events: list[Event], rng: random.Random) -> tuple[list[Event], Expected]:
    """Every GPU activity of one device moved 10 µs earlier (its clock set back): the kernels
    whose launch → start delay was under 10 µs now start before their launch call."""
    devices = sorted({_device(e) for e in events if _is_gpu(e)}, key=str)
    device = rng.choice(devices)
    shift_ns = 10_000
    launch = _launch_ns(events)
    out = Expected()
    early, early_ns = 0, 0
    for e in events:
        if _is_gpu(e) and _device(e) == device:
            start = (reference.ts_ns(e) or 0) - shift_ns
            called = launch.get(_corr(e))
            if called is not None and start < called:
                early, early_ns = early + 1, early_ns + called - start
            e["ts"] = e["ts"] - Decimal(shift_ns) / 1000
    out.add("start-before-launch", early, early_ns)
    return events, out


def drift_clock(events: list[Event], rng: random.Random) -> tuple[list[Event], Expected]:
    """One device's clock running fast: each GPU ts moved later by 2 ms × its share of the
    trace (ts' = ts + (ts − first) · rate): clock-drift on that device, ~2 ms."""
    devices = sorted({_device(e) for e in events if _is_gpu(e)}, key=str)
    device = rng.choice(devices)
    gpu = [e for e in events if _is_gpu(e) and _device(e) == device]
    first = min(float(e["ts"]) for e in gpu)
    last = max(float(e["ts"]) for e in gpu)
    rate = 2000.0 / (last - first)  # 2 ms (2000 µs) over the device's span
    for e in gpu:
        e["ts"] = float(e["ts"]) + (float(e["ts"]) - first) * rate
    out = Expected()
    out.add("clock-drift", 1, None)
    # the drift is measured over the launches' span, not the activities': a little less
    launches = sorted(_launch_ns(events).values())
    out.approx_time_ns["clock-drift"] = round(
        2_000_000 * (launches[-1] - launches[0]) / ((last - first) * 1000)
    )
    return events, out


def cut_tail(events: list[Event], rng: random.Random, k: int = 6) -> tuple[list[Event], Expected]:
    """The GPU work of the trace's last k launch calls removed (the profiler stopped before it
    ran): launch-without-gpu's part "cut by the profiler's stop", and the last step cut."""
    gpu_ids = {_corr(e) for e in events if _is_gpu(e)}
    calls = sorted(
        (e for e in events if _is_call(e) and ANY_LAUNCH.match(str(e.get("name")))),
        key=lambda e: reference.ts_ns(e) or 0,
    )
    calls = [c for c in calls if _corr(c) in gpu_ids]
    tail = calls[-k:]
    ids = {_corr(c) for c in tail}
    out = Expected()
    out.add(
        "launch-without-gpu",
        k,
        sum(reference.dur_ns(c) for c in tail),
        "cut by the profiler's stop",
    )
    last = _cpu_steps(events)[-1]
    lo = reference.ts_ns(last) or 0
    inside = any(lo <= (reference.ts_ns(c) or 0) <= lo + reference.dur_ns(last) for c in tail)
    if inside:
        out.add("truncated", 1, 0, "steps the trace ends inside")
    return [e for e in events if not (_is_gpu(e) and _corr(e) in ids)], out


def overflow(events: list[Event], rng: random.Random) -> tuple[list[Event], Expected]:
    """Every GPU activity launched from a ProfilerStep in the second half on removed (a CUPTI
    buffer that overflowed): launch-without-gpu counts every such launch call, the steps
    between lost their GPU work, and the last one is cut."""
    steps = _cpu_steps(events)
    first = rng.choice(steps[len(steps) // 2 : -1])
    start = reference.ts_ns(first) or 0
    gpu_ids = {_corr(e) for e in events if _is_gpu(e)}
    calls = [
        c for c in events
        if _is_call(c) and ANY_LAUNCH.match(str(c.get("name"))) and _corr(c) in gpu_ids
        and (reference.ts_ns(c) or 0) >= start
    ]  # fmt: skip
    ids = {_corr(c) for c in calls}
    out = Expected()
    out.add("launch-without-gpu", len(calls), sum(reference.dur_ns(c) for c in calls))

    def launched_in(step: Event) -> bool:
        lo = reference.ts_ns(step) or 0
        return any(lo <= (reference.ts_ns(c) or 0) <= lo + reference.dur_ns(step) for c in calls)

    emptied = [s for s in steps if s is not steps[-1] and launched_in(s)]
    out.add("truncated", len(emptied) + launched_in(steps[-1]), 0)
    out.parts["truncated"] = {
        "steps with no GPU work": len(emptied),
        "steps the trace ends inside": int(launched_in(steps[-1])),
    }
    return [e for e in events if not (_is_gpu(e) and _corr(e) in ids)], out


def short_replay(
    events: list[Event], rng: random.Random, k: int = 2, first: bool = False
) -> tuple[list[Event], Expected]:
    """k kernels (not the first; ``first``: the first and k − 1 others) removed from one
    CUDA-graph replay: launch-without-gpu's part "kernels missing from graph replays", the
    kernel time it lacks against the longest replay of its graph."""
    graph_ids = {
        _corr(e) for e in events
        if _is_call(e) and re.match(r"^(?:cuda|cu|hip)GraphLaunch", str(e.get("name")))
    }  # fmt: skip
    replays: dict[Any, list[Event]] = {}
    for e in events:
        if _is_gpu(e) and str(e.get("cat")) == "kernel" and _corr(e) in graph_ids:
            replays.setdefault(_corr(e), []).append(e)
    for kernels in replays.values():
        kernels.sort(key=lambda e: reference.ts_ns(e) or 0)
    victim = rng.choice(sorted(c for c, ks in replays.items() if len(ks) > k + 1))
    gone = rng.sample(replays[victim][1:], k - first) + replays[victim][:first]
    left = [e for e in replays[victim] if e not in gone]
    # the reference: of the replays that start or end as the damaged one, the most kernels,
    # the earliest among equals
    same = [
        ks for c, ks in replays.items()
        if c != victim and (ks[0]["name"] == left[0]["name"] or ks[-1]["name"] == left[-1]["name"])
    ]  # fmt: skip
    same.sort(key=lambda ks: (-len(ks), reference.ts_ns(ks[0]) or 0))
    if not same or len(same[0]) < len(replays[victim]):
        raise ValueError("the graph has no other replay as long as the one damaged")
    lacking = sum(map(reference.dur_ns, same[0])) - sum(map(reference.dur_ns, left))
    out = Expected()
    out.add("launch-without-gpu", k, max(lacking, 0), "kernels missing from graph replays")
    return _without(events, gone), out


DAMAGES: dict[str, Callable[..., tuple[list[Event], Expected]]] = {
    "kernels": delete_kernels,
    "launches": delete_launches,
    "runtime": delete_runtime,
    "step-end": delete_step_end,
    "step": delete_step,
    "negative": negative_durations,
    "zero": zero_durations,
    "far": far_kernel,
    "overflow": overflow,
    "shift": shift_clock,
    "drift": drift_clock,
    "tail": cut_tail,
    "graph": short_replay,
    "graph-first": lambda events, rng: short_replay(events, rng, first=True),
}


def damage(src: Path, dst: Path, what: str, seed: int) -> Expected:
    """Write ``src`` damaged by ``what`` (a DAMAGES key, ``warnings`` or ``truncate``) to
    ``dst``."""
    top, events = load(src)
    if what == "warnings":
        expected = add_warnings(top, random.Random(seed))
        save(top, events, dst)
        return expected
    if what == "truncate":  # the file cut at 70% of its text
        save(top, events, dst, cut=0.7)
        out = Expected(partial=True)
        out.parts["truncated"] = {"file cut before its end": 1}
        return out
    events, expected = DAMAGES[what](events, random.Random(seed))
    save(top, events, dst)
    return expected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("dst", type=Path)
    parser.add_argument("--damage", choices=[*DAMAGES, "truncate", "warnings"], required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(json.dumps(damage(args.src, args.dst, args.damage, args.seed).__dict__, indent=2))


if __name__ == "__main__":
    main()

"""A deliberately simple ``source`` (docs/source.md), straight from the JSON, to check
traceview.analyses.source against: per kernel, every frame whose window holds its launch is
found by brute force (a mask over the thread's frames); a backward kernel's frames are those
around its flow's start; module paths follow the ``Python parent id`` chain."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

RUNTIME = {"cuda_runtime", "cuda_driver", "runtime"}
ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")  # a built-in's object: not part of its name
MODULE = "nn.Module: "


def _ns(value: Any) -> int:
    return int((Decimal(str(value)) * 1000).to_integral_value())


@dataclass
class Reference:
    kernel_ns: int = 0
    self_ns: Counter[str] = field(default_factory=Counter)
    total_ns: Counter[str] = field(default_factory=Counter)
    backward_ns: Counter[str] = field(default_factory=Counter)
    kernels: Counter[str] = field(default_factory=Counter)
    module_forward: Counter[str] = field(default_factory=Counter)
    module_backward: Counter[str] = field(default_factory=Counter)
    unattributed_ns: int = 0


class _Frames:
    """One thread's frames as arrays."""

    def __init__(self, frames: list[dict[str, Any]]) -> None:
        self.events = frames
        self.ts = np.array([_ns(e["ts"]) for e in frames], dtype=np.int64)
        self.end = self.ts + np.array([_ns(e.get("dur", 0)) for e in frames], dtype=np.int64)

    def around(self, t: int) -> list[dict[str, Any]]:
        """The frames holding t, outermost first (earlier start, then longer, then file order)."""
        at = np.flatnonzero((self.ts <= t) & (t < self.end))
        at = sorted(at.tolist(), key=lambda i: (self.ts[i], -self.end[i], i))
        return [self.events[i] for i in at]


def reference(path: Path) -> Reference:
    with gzip.open(path, "rb") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    launches: dict[int, tuple[Any, int]] = {}
    frames: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    ops: dict[tuple[Any, int], int] = {}
    flow_start: dict[int, tuple[Any, int]] = {}
    flow_finish: dict[Any, list[tuple[int, int]]] = defaultdict(list)
    kernels = []
    for e in events:
        cat, ph = str(e.get("cat", "")).lower(), e.get("ph")
        thread = (e.get("pid"), e.get("tid"))
        if ph == "X" and cat == "kernel":
            kernels.append(e)
        elif ph == "X" and cat in RUNTIME and "correlation" in e.get("args", {}):
            corr = e["args"]["correlation"]
            t = _ns(e["ts"])
            if corr not in launches or t < launches[corr][1]:
                launches[corr] = (thread, t)
        elif ph == "X" and cat == "python_function":
            frames[thread].append({**e, "name": ADDRESS.sub("", e["name"])})
        elif ph == "X" and cat == "cpu_op":
            key = (thread, _ns(e["ts"]))
            ops[key] = max(ops.get(key, 0), key[1] + _ns(e.get("dur", 0)))
        elif cat == "fwdbwd" and ph == "s":
            flow_start.setdefault(e["id"], (thread, _ns(e["ts"])))
        elif cat == "fwdbwd" and ph == "f" and e.get("bp") == "e":
            flow_finish[thread].append((_ns(e["ts"]), e["id"]))
    by_thread = {t: _Frames(f) for t, f in frames.items()}
    by_id = {e["args"].get("Python id"): e for f in frames.values() for e in f}
    ref = Reference()
    for k in kernels:
        dur = _ns(k.get("dur", 0))
        ref.kernel_ns += dur
        launch = launches.get(k.get("args", {}).get("correlation"))
        stack: list[dict[str, Any]] = []
        backward = False
        if launch is not None and launch[0] in by_thread:
            stack = by_thread[launch[0]].around(launch[1])
        if launch is not None and not stack:
            start = _flow_start(launch, flow_finish, ops, flow_start)
            if start is not None and start[0] in by_thread:
                stack, backward = by_thread[start[0]].around(start[1]), True
        if not stack:
            ref.unattributed_ns += dur
            continue
        ref.self_ns[stack[-1]["name"]] += dur
        for name in {e["name"] for e in stack}:
            ref.total_ns[name] += dur
            ref.kernels[name] += 1
            if backward:
                ref.backward_ns[name] += dur
        for e in stack:
            if e["name"].startswith(MODULE):
                path = _module_path(e, by_id)
                (ref.module_backward if backward else ref.module_forward)[path] += dur
    return ref


def _flow_start(
    launch: tuple[Any, int],
    finish: dict[Any, list[tuple[int, int]]],
    ops: dict[tuple[Any, int], int],
    start: dict[int, tuple[Any, int]],
) -> tuple[Any, int] | None:
    """The start of the flow whose backward op (the op starting at its finish) holds the
    launch, the latest starting of them."""
    thread, t = launch
    holding = [
        (ts, flow) for ts, flow in finish.get(thread, []) if ts <= t < ops.get((thread, ts), ts)
    ]
    if not holding:
        return None
    return start.get(max(holding)[1])


def _module_path(frame: dict[str, Any], by_id: dict[Any, dict[str, Any]]) -> str:
    """The module frames up the Python parent id chain, outermost first."""
    parts = []
    seen = set()
    at: dict[str, Any] | None = frame
    while at is not None and id(at) not in seen:
        seen.add(id(at))
        if at["name"].startswith(MODULE):
            parts.append(at["name"][len(MODULE) :])
        at = by_id.get(at["args"].get("Python parent id"))
    return "/".join(reversed(parts))

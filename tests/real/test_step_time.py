"""Step time where the GPU sets the pace (docs/metrics.md "Step time"): on h200/graphs.json.gz
(one CUDA-graph replay a step, the GPU ~1.0 ms a step behind a ~0.5 ms CPU step) ``summary``
and ``steps`` give the GPU's period, with the CPU's beside it; on a CPU-paced trace the step
time stays the CPU's. Figures against tests/reference.py."""

from __future__ import annotations

import json
import statistics
from typing import Any

import pytest
import reference
from conftest import SHARED_TRACES
from typer.testing import CliRunner

from traceview.cli import app

H200 = SHARED_TRACES / "h200"
pytestmark = pytest.mark.skipif(not H200.is_dir(), reason="../shared/traces/h200 is absent")


def _json(*args: str) -> dict[str, Any]:
    r = CliRunner().invoke(app, [*args, "-f", "json", "--no-cache"])
    assert r.exit_code == 0, r.output
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def _reference(name: str) -> dict[int, tuple[int, str]]:
    _, events = reference.load_trace(H200 / name)
    return reference.step_times(reference.step_devices(events))


def test_graphs_step_time_is_the_gpu_period() -> None:
    want = _reference("graphs.json.gz")
    # Every step: the first too, since its GPU work waits behind the 26 activities launched
    # before the trace (analyses.core.prelaunch), which no step holds.
    assert sum(1 for _, by in want.values() if by == "gpu") == 6
    steps = _json("steps", str(H200 / "graphs.json.gz"))["steps"]
    got = {s["step"]: (round(s["step_time_us"] * 1000), s["paced_by"]) for s in steps}
    assert got == want
    for s in steps:
        if s["paced_by"] == "gpu":  # ~1.0 ms on the GPU against ~0.5 ms on the CPU
            assert 990 < s["step_time_us"] < 1010 and s["cpu_dur_us"] < 650
    summary = _json("summary", str(H200 / "graphs.json.gz"))["steps"]
    times = sorted(ns for ns, _ in want.values())
    assert summary["median_step_time_us"] * 1000 == times[(len(times) + 1) // 2 - 1]
    assert summary["paced_by"] == "gpu" and summary["gpu_paced_steps"] == 6
    assert summary["median_cpu_dur_us"] == pytest.approx(483.924)
    text = CliRunner().invoke(app, ["summary", str(H200 / "graphs.json.gz"), "--no-cache"])
    assert "median 1.0 ms (GPU-paced in 6 of 6; CPU 483.9 µs)" in text.stdout


def test_a_cpu_paced_trace_keeps_the_cpu_step_time() -> None:
    want = _reference("eager.json.gz")
    assert {by for _, by in want.values()} == {"cpu"}
    summary = _json("summary", str(H200 / "eager.json.gz"))["steps"]
    assert summary["paced_by"] == "cpu"
    assert summary["median_step_time_us"] == summary["median_cpu_dur_us"]
    assert statistics.median_low(ns for ns, _ in want.values()) / 1000 == pytest.approx(
        summary["median_cpu_dur_us"]
    )

"""Each step's device windows on every real trace: equal to tests/reference.py, and the same
in ``steps``, ``kernels --pstep N``, ``gaps --pstep N`` and ``snapshot`` (one definition)."""

from __future__ import annotations

from typing import Any

import pytest
import reference as ref
from conftest import RealTrace

from traceview.analyses.core.steps import step_table
from traceview.analyses.gaps import GapOptions, analyse_gaps
from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.analyses.snapshot import build_snapshot
from traceview.columns.model import TraceEvents


def _load(trace: RealTrace) -> tuple[list[dict[str, Any]], TraceEvents]:
    return trace.raw, trace.gpu_events


def test_step_devices_match_reference(real_trace: RealTrace) -> None:
    raw, events = _load(real_trace)
    want = ref.step_devices(raw)
    rows = step_table(events)
    assert [r.step for r in rows] == sorted(want)
    for row in rows:
        expected = want[row.step]
        assert (row.cpu_start_ns, row.cpu_end_ns) == (
            expected["cpu_start_ns"],
            expected["cpu_end_ns"],
        )
        assert (row.kernels, row.kernel_time_ns) == (
            expected["kernels"],
            expected["kernel_time_ns"],
        )
        got = {
            d.device: (d.start_ns, d.window_ns, d.busy_ns, d.idle_ns, d.lag_ns, d.queue_ns)
            for d in row.devices
        }
        assert got == {
            device: (
                v["gpu_start_ns"],
                v["window_ns"],
                v["busy_ns"],
                v["idle_ns"],
                v["lag_ns"],
                v["queue_ns"],
            )
            for device, v in expected["devices"].items()
        }, row.step
    times = ref.step_times(want)
    assert {r.step: (r.step_ns, "gpu" if r.gpu_paced else "cpu") for r in rows} == times


def test_every_command_reports_the_same_step_device_figures(real_trace: RealTrace) -> None:
    _, events = _load(real_trace)
    rows = step_table(events)
    if not rows:
        pytest.skip("no steps in this trace")
    snapshot = {s.step: s for s in build_snapshot(events).steps}
    for row in rows:
        want = {d.device: (d.window_ns, d.busy_ns) for d in row.devices}
        kernels = analyse_kernels(events, KernelOptions(steps=(row.step,)))
        assert {d.device: (d.window_ns, d.busy_ns) for d in kernels.trace.devices} == want
        gaps = analyse_gaps(events, GapOptions(steps=(row.step,), largest=0))
        got = {d.device: (d.window_ns, d.busy_ns) for d in gaps.devices}
        assert got == want
        assert {d.device: (d.window_ns, d.busy_ns) for d in gaps.trace.devices} == want
        stored = snapshot[row.step]
        got = {
            d.device: (round(d.window_us * 1000), round(d.busy_us * 1000)) for d in stored.devices
        }
        assert got == want
        idle = sum(d.idle_ns for d in row.devices)
        assert round(stored.idle_us * 1000) == idle
        assert gaps.totals.idle_ns == idle


def test_device_usage_is_device_idles_own_figures(real_trace: RealTrace) -> None:
    """``device_usage`` (snapshot's, without the gaps) gives device_idle's devices, windows,
    busy and idle time, in its order; also of a selection of the rows (memcpy alone)."""
    from traceview.analyses.gaps import device_idle, device_usage

    events = real_trace.gpu_events
    for options in (GapOptions(), GapOptions(busy=("memcpy",))):
        want = [
            (d.device, d.window_ns, d.busy_ns, d.idle_ns, d.idle_pct)
            for d in device_idle(events, options)
        ]
        got = [
            (u.device, u.window_ns, u.busy_ns, u.idle_ns, u.idle_pct)
            for u in device_usage(events, options)
        ]
        assert got == want

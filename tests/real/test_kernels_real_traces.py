"""kernels and steps on every real trace equal the independent reference computation."""

from __future__ import annotations

import pytest
import reference as ref
from conftest import RealTrace

from traceview.analyses.kernels import KernelOptions, analyse_kernels

TOL_NS = 10  # for the derived floats (mean, std); integer-ns figures are compared exactly
EXACT = ("total_ns", "min_ns", "max_ns", "p50_ns", "p90_ns", "p99_ns")


def assert_rows_match(report_rows: list, expected: dict[str, dict]) -> None:
    got = {row.name: row for row in report_rows}
    assert set(got) == set(expected)
    for name, want in expected.items():
        row = got[name]
        assert row.count == want["count"], name
        for key in EXACT:
            assert getattr(row, key) == want[key], (name, key)
        for key in ("mean", "std"):
            got_ns, want_us = getattr(row, f"{key}_ns"), want[f"{key}_us"]
            assert got_ns == pytest.approx(want_us * 1000, abs=TOL_NS), (name, key)
        shown = row.as_dict()  # the JSON's µs: ns / 1000, rounded once
        assert [shown[k.replace("_ns", "_us")] for k in EXACT] == [
            want[k.replace("_ns", "_us")] for k in EXACT
        ], name
        for key in ("pct_launches", "pct_time"):
            assert getattr(row, key) == pytest.approx(want[key], abs=1e-6), (name, key)


@pytest.mark.parametrize("include", [("kernel",), ("kernel", "memcpy", "memset")])
def test_kernel_statistics_equal_reference(real_trace: RealTrace, include: tuple[str, ...]) -> None:
    events, raw = real_trace.gpu_events, real_trace.raw
    report = analyse_kernels(events, KernelOptions(top=0, include=include))
    assert_rows_match(report.rows, ref.kernel_stats(raw, include=include))
    totals = ref.kernel_totals(raw, include=include)
    assert (report.count, report.distinct) == (totals["count"], totals["distinct"])
    assert report.total_ns / 1000 == totals["total_us"]
    assert report.trace.span_ns / 1000 == ref.trace_span_us(raw)
    devices = ref.device_gaps(raw)  # busy: kernel, memcpy, memset whatever --include says
    got = {d.device: (d.window_ns, d.busy_ns) for d in report.trace.devices}
    assert got == {k: (v["window_ns"], v["busy_ns"]) for k, v in devices.items()}
    assert report.gpu_busy_ns == sum(v["busy_ns"] for v in devices.values())


def test_pstep_selection_equals_reference(real_trace: RealTrace) -> None:
    events, raw = real_trace.gpu_events, real_trace.raw
    steps = sorted(ref.step_windows(raw))
    if not steps:
        pytest.skip("no ProfilerStep in this trace")
    chosen = tuple(steps[-2:])
    report = analyse_kernels(events, KernelOptions(top=0, steps=chosen))
    assert_rows_match(report.rows, ref.kernel_stats(raw, steps=set(chosen)))

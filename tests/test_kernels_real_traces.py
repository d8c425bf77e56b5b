"""kernels and steps on every real trace equal the independent reference computation."""

from __future__ import annotations

from pathlib import Path

import pytest
import reference as ref
from conftest import trace_params

from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.events import TraceEvents
from traceview.parallel import collect_events
from traceview.read.reader import TraceReader

TOL_US = 0.01
_cache: dict[Path, tuple[TraceEvents, list[dict]]] = {}


def load(path: Path) -> tuple[TraceEvents, list[dict]]:
    if path not in _cache:
        _cache.clear()
        _cache[path] = (collect_events(TraceReader(path)), ref.load_trace(path)[1])
    return _cache[path]


def assert_rows_match(report_rows: list, expected: dict[str, dict]) -> None:
    got = {row.name: row for row in report_rows}
    assert set(got) == set(expected)
    for name, want in expected.items():
        row = got[name]
        assert row.count == want["count"], name
        for key in (
            "total_us",
            "mean_us",
            "std_us",
            "min_us",
            "max_us",
            "p50_us",
            "p90_us",
            "p99_us",
        ):
            assert getattr(row, key) == pytest.approx(want[key], abs=TOL_US), (name, key)
        for key in ("pct_launches", "pct_time"):
            assert getattr(row, key) == pytest.approx(want[key], abs=1e-6), (name, key)


@pytest.mark.parametrize("path", trace_params())
@pytest.mark.parametrize("include", [("kernel",), ("kernel", "memcpy", "memset")])
def test_kernel_statistics_equal_reference(path: Path, include: tuple[str, ...]) -> None:
    events, raw = load(path)
    report = analyse_kernels(events, KernelOptions(top=0, include=include))
    assert_rows_match(report.rows, ref.kernel_stats(raw, include=include))
    totals = ref.kernel_totals(raw, include=include)
    assert (report.count, report.distinct) == (totals["count"], totals["distinct"])
    assert report.total_us == pytest.approx(totals["total_us"], abs=TOL_US)
    assert report.trace.span_us == pytest.approx(ref.trace_span_us(raw), abs=TOL_US)
    devices = ref.device_gaps(raw)  # busy: kernel, memcpy, memset whatever --include says
    got = {d.device: (d.window_ns, d.busy_ns) for d in report.trace.devices}
    assert got == {k: (v["window_ns"], v["busy_ns"]) for k, v in devices.items()}
    assert round(report.gpu_busy_us * 1000) == sum(v["busy_ns"] for v in devices.values())


@pytest.mark.parametrize("path", trace_params())
def test_pstep_selection_equals_reference(path: Path) -> None:
    events, raw = load(path)
    steps = sorted(ref.step_windows(raw))
    if not steps:
        pytest.skip("no ProfilerStep in this trace")
    chosen = tuple(steps[-2:])
    report = analyse_kernels(events, KernelOptions(top=0, steps=chosen))
    assert_rows_match(report.rows, ref.kernel_stats(raw, steps=set(chosen)))

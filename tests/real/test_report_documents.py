"""The report's page, its documents worked out after the runtime calls are let go of (as
``traceview report`` does once the documents that read them are done: calls_read), is the
page worked out with them, byte for byte, on every real trace."""

from __future__ import annotations

import pytest
from conftest import RealTrace

from traceview.analyses.core.common import work_out
from traceview.analyses.core.prelaunch import without_runtime
from traceview.app.reading import read_trace
from traceview.columns.model import flows_for_frames
from traceview.columns.schema import Dropped
from traceview.options import ReadOptions
from traceview.render.html.documents import ReportOptions, calls_read, collect
from traceview.render.html.page import PageInfo, render_bytes

INFO = PageInfo("test", "traceview report <trace>")


@pytest.fixture(scope="module")
def trace(real_trace: RealTrace) -> RealTrace:
    return real_trace


def test_the_page_is_the_same_without_the_runtime_calls(trace: RealTrace) -> None:
    read = ReadOptions(quiet=True, cache=False)
    events = read_trace(trace.path, read, keep_cpu=True, memory=True, frames=True)
    events = flows_for_frames(events)
    shared = work_out(events)
    want = render_bytes(collect(events, ReportOptions(), shared), INFO)
    first = calls_read(events)
    lean = without_runtime(events)
    assert isinstance(lean.runtime.ts, Dropped) or not len(events.gpu.ts)
    assert render_bytes(collect(lean, ReportOptions(), shared, first), INFO) == want

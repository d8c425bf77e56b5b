"""CUDA-graph replays in summary's launch figures, against a plain reading of the trace: the
graph launch calls by name, and the kernels carrying their correlation ids."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import SHARED_TRACES

from traceview.analyses.core.graphs import GRAPH_LAUNCH
from traceview.analyses.summary import overview
from traceview.app.reading import read_trace
from traceview.options import ReadOptions

GRAPHS = SHARED_TRACES / "h200" / "graphs.json.gz"
NONE = SHARED_TRACES / "h200" / "train.json.gz"


def _reference(path: Path) -> tuple[int, int, int]:
    """(graph launches with a kernel, their kernels, those kernels' time in ns)."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    launches = {
        e["args"]["correlation"]
        for e in events
        if e.get("ph") == "X" and GRAPH_LAUNCH.match(e.get("name", "")) and "args" in e
    }
    kernels = [
        e
        for e in events
        if e.get("ph") == "X"
        and e.get("cat", "").lower() == "kernel"
        and e.get("args", {}).get("correlation") in launches
    ]
    used = {e["args"]["correlation"] for e in kernels}
    return len(used), len(kernels), sum(round(e["dur"] * 1000) for e in kernels)


@pytest.mark.parametrize("path", [GRAPHS, NONE], ids=["graphs", "train"])
def test_graph_replays_are_counted_once(path: Path) -> None:
    if not path.exists():
        pytest.skip("../shared/traces is absent")
    launch = overview(
        read_trace(path, ReadOptions(quiet=True, cache=False), keep_cpu=True)
    ).launches
    want = _reference(path)
    assert (launch.graph_launches, launch.graph_kernels, launch.graph_kernel_ns) == want
    if path == GRAPHS:  # what its README says: 216 of 248 kernels from 6 launches
        assert want[:2] == (6, 216) and launch.kernels == 248
        assert launch.timed == launch.linked - 216  # only kernels launched on their own
    else:
        assert want == (0, 0, 0)


def test_the_launch_names_are_matched_whole() -> None:
    for name in ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch", "cudaGraphLaunch_v10000"):
        assert GRAPH_LAUNCH.match(name)
    for name in ("cudaGraphLaunchX", "cudaLaunchKernel", "myGraphLaunch", "cudaGraphInstantiate"):
        assert not GRAPH_LAUNCH.match(name)

"""CUDA-graph replays in summary's launch figures, against a plain reading of the trace: the
graph launch calls by name, and the kernels carrying their correlation ids."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_TRACES

from traceview.analyses.core.graphs import GRAPH_LAUNCH
from traceview.analyses.summary import overview
from traceview.app.reading import read_trace
from traceview.options import ReadOptions
from traceview.render.summary import detail_lines

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


SERVING = [
    SHARED_TRACES / "tracelens__inference__vllm_decode_full__graph_execution.json.gz",
    SHARED_TRACES / "tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz",
]


@pytest.mark.parametrize(
    "path", [GRAPHS, NONE, *SERVING], ids=["graphs", "train", "vllm", "sglang"]
)
def test_graph_replays_are_counted_once(path: Path) -> None:
    if not path.exists():
        pytest.skip("../shared/traces is absent")
    report = overview(read_trace(path, ReadOptions(quiet=True, cache=False), keep_cpu=True))
    launch = report.launches
    want = _reference(path)
    assert (launch.graph_launches, launch.graph_kernels, launch.graph_kernel_ns) == want
    if path == GRAPHS:  # what its README says: 216 of 248 kernels from 6 launches
        assert want[:2] == (6, 216) and launch.kernels == 248
        assert launch.timed == launch.linked - 216  # only kernels launched on their own
        # and the text says the share is of those, not of every kernel
        (line,) = [x for x in detail_lines(report) if x.startswith("launch")]
        assert f"of the {launch.timed} kernels launched on their own, " in line, line
    elif path == NONE:
        assert want == (0, 0, 0)
    else:  # one hipGraphLaunch replays the decode step: 421 of 425, 544 of 555 kernels
        assert want[0] == 1 and want[1] >= 0.95 * launch.kernels


def test_the_launch_names_are_matched_whole() -> None:
    for name in ("cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch", "cudaGraphLaunch_v10000"):
        assert GRAPH_LAUNCH.match(name)
    for name in ("cudaGraphLaunchX", "cudaLaunchKernel", "myGraphLaunch", "cudaGraphInstantiate"):
        assert not GRAPH_LAUNCH.match(name)


# ---- ops: a replay's kernels under the op around its launch, its launch call counted once ----


def _replays(path: Path) -> dict[str, tuple[int, int, list[float]]]:
    """Per op around a graph launch (innermost cpu_op on its thread holding the launch start;
    "(graph replay, no op)" for none): (launches, kernels, each launch's first kernel start −
    launch start in µs)."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    x = [e for e in events if e.get("ph") == "X"]
    ops = [e for e in x if e.get("cat") == "cpu_op"]
    out: dict[str, tuple[int, int, list[float]]] = {}
    for call in (e for e in x if GRAPH_LAUNCH.match(e.get("name", ""))):
        starts = [
            e["ts"]
            for e in x
            if e.get("cat") == "kernel"
            and e["args"].get("correlation") == call["args"]["correlation"]
        ]
        if not starts:
            continue
        around = [
            o
            for o in ops
            if (o["pid"], o["tid"]) == (call["pid"], call["tid"])
            and o["ts"] <= call["ts"] <= o["ts"] + o["dur"]
        ]
        name = max(around, key=lambda o: (o["ts"], -o["dur"]))["name"] if around else None
        launches, kernels, delays = out.get(name or "(graph replay, no op)", (0, 0, []))
        out[name or "(graph replay, no op)"] = (
            launches + 1,
            kernels + len(starts),
            [*delays, min(starts) - call["ts"]],
        )
    return out


@pytest.mark.parametrize("path", [GRAPHS, *SERVING], ids=["graphs", "vllm", "sglang"])
def test_ops_put_replays_under_the_op_around_their_launch(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path.name} is absent")
    from traceview.analyses.ops.view import OpOptions, analyse_ops

    events = read_trace(path, ReadOptions(quiet=True, cache=False), keep_cpu=True)
    rows = {r.name: r for r in analyse_ops(events, OpOptions(top=0)).rows}
    want = _replays(path)
    assert want
    for name, (launches, kernels, delays) in want.items():
        row = rows[name]
        assert (row.graph_launches, row.graph_kernels) == (launches, kernels), name
        assert row.as_dict()["graph"] is True
        if row.kernels == kernels:  # only replays: the delay is the replays' median
            median = sorted(delays)[(len(delays) + 1) // 2 - 1]
            assert row.queue_delay_ns is not None
            assert abs(row.queue_delay_ns / 1000 - median) < 0.002, name
        # each replay's kernels ran far longer than its one launch call: never launch-bound
        assert row.bound != "launch", name
    assert sum(r.graph_kernels for r in rows.values()) == sum(k for _, k, _ in want.values())
    if path == GRAPHS:  # README: 6 replays of 36 kernels, each in a compiled region
        [(name, (launches, kernels, _))] = want.items()
        assert name.startswith("## Call CompiledFxGraph") and (launches, kernels) == (6, 216)


# ---- the report's timeline: graph kernels marked, the steps that ran replays named ------------

EAGER = SHARED_TRACES / "h200" / "eager.json.gz"


def _graph_kernels_per_step(path: Path) -> dict[int, tuple[int, int, int]]:
    """Per step with graph kernels (steps' membership rule of tests/reference.py): (graph
    kernels, kernels, graph launches)."""
    import reference

    _, events = reference.load_trace(path)
    launches = {
        e["args"]["correlation"]
        for e in events
        if e.get("ph") == "X" and GRAPH_LAUNCH.match(e.get("name", "")) and "args" in e
    }
    by_corr = reference.launch_ts_by_correlation(events)
    out = {}
    for step, window in reference.step_windows(events).items():
        kernels = [
            k for k in reference.gpu_events(events) if reference._in_step(k, window, by_corr)
        ]
        graph = [k for k in kernels if k["args"].get("correlation") in launches]
        if graph:
            used = {k["args"]["correlation"] for k in graph}
            out[step] = (len(graph), len(kernels), len(used))
    return out


@pytest.mark.parametrize("path", [GRAPHS, EAGER], ids=["graphs", "eager"])
def test_timeline_marks_graph_replays(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path.name} is absent")
    from traceview.analyses.core.common import work_out
    from traceview.analyses.timeline import graph_steps, pick_step, step_work

    events = read_trace(path, ReadOptions(quiet=True, cache=False), keep_cpu=True)
    shared = work_out(events)
    found = graph_steps(events, shared.graphs, shared.launch)
    want = _graph_kernels_per_step(path)
    assert {s.step: (s.graph_kernels, s.kernels, s.replays) for s in found} == want
    step = pick_step(events, None)
    assert step is not None
    work = step_work(events, step, launch=shared.launch, graphs=shared.graphs)
    assert work.graph is not None
    marked = int(np.count_nonzero(work.graph))
    assert not work.capped and marked == want.get(step, (0, 0, 0))[0]
    if path == GRAPHS:  # README: each of the 6 steps one replay of 36 kernels
        assert sorted(want) == [2, 3, 4, 5, 6, 7]
        assert all(g == 36 and r == 1 for g, _, r in want.values())
        assert marked == 36
    else:
        assert want == {} and marked == 0 and not len(shared.graphs)


@pytest.mark.parametrize("path", [GRAPHS, EAGER], ids=["graphs", "eager"])
def test_report_says_which_steps_are_graph_replays(path: Path, tmp_path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path.name} is absent")
    from typer.testing import CliRunner

    from traceview.cli import app

    out = tmp_path / "r.html"
    r = CliRunner().invoke(app, ["report", str(path), "-o", str(out), "--no-cache"])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    said = "ran CUDA-graph replays (hatched): 216 of their 243 kernels, in 6 replays"
    assert (said in page) is (path == GRAPHS)
    assert ('(graph replay)"' in page) is (path == GRAPHS)

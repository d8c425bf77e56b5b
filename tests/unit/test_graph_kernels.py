"""CUDA-graph replays in the operator view and the launch hint, on tiny traces built to show
them: graph kernels across steps, one launch whose kernels run on two streams, graph and eager
kernels mixed, and a launch outside any op."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from traceview.analyses.ops.view import GRAPH_NO_OP_ROW, OpOptions, OpRow, analyse_ops
from traceview.analyses.summary import overview
from traceview.columns.model import TraceEvents
from traceview.columns.parallel import collect_events
from traceview.read.reader import TraceReader


class Trace:
    """CPU ops and launches on thread 1, kernels on device 0 (stream 7 unless told)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.correlation = 0

    def op(self, name: str, ts: float, dur: float, cat: str = "cpu_op") -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1,
                            "ts": ts, "dur": dur, "args": {}})  # fmt: skip

    def launch(self, name: str, ts: float, dur: float) -> int:
        self.correlation += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1,
                            "tid": 1, "ts": ts, "dur": dur,
                            "args": {"correlation": self.correlation}})  # fmt: skip
        return self.correlation

    def kernel(self, correlation: int, ts: float, dur: float, stream: int = 7) -> None:
        self.events.append({"ph": "X", "cat": "kernel", "name": f"k{len(self.events)}",
                            "pid": 0, "tid": stream, "ts": ts, "dur": dur,
                            "args": {"correlation": correlation, "device": 0,
                                     "stream": stream}})  # fmt: skip

    def replay(self, ts: float, kernels: int, dur: float = 10, streams: tuple[int, ...] = (7,)):
        """One cudaGraphLaunch (80 µs) at ``ts`` and its kernels, back to back from ts + 100,
        dealt round the ``streams``."""
        corr = self.launch("cudaGraphLaunch", ts, 80)
        for i in range(kernels):
            self.kernel(corr, ts + 100 + i * dur, dur, streams[i % len(streams)])

    def read(self, tmp_path: Path) -> TraceEvents:
        path = tmp_path / "t.json"
        path.write_text(json.dumps({"traceEvents": self.events}))
        return collect_events(TraceReader(path), keep_cpu=True)


def ops_of(t: Trace, tmp_path: Path) -> dict[str, OpRow]:
    return {r.name: r for r in analyse_ops(t.read(tmp_path), OpOptions(top=0)).rows}


def compiled_steps(t: Trace, steps: int = 3, kernels: int = 36, **kw: Any) -> None:
    """Steps of 10 ms, each one compiled region launching one replay."""
    for s in range(steps):
        base = 10_000 * s
        t.op(f"ProfilerStep#{s}", base, 9_000, cat="user_annotation")
        t.op("## Call CompiledFxGraph abc ##", base + 10, 200)
        t.replay(base + 20, kernels, **kw)


def test_graph_kernels_across_steps_go_to_the_op_around_the_launch(tmp_path: Path) -> None:
    t = Trace()
    compiled_steps(t)
    row = ops_of(t, tmp_path)["## Call CompiledFxGraph abc ##"]
    assert (row.calls, row.kernels, row.graph_kernels, row.graph_launches) == (3, 108, 108, 3)
    assert row.as_dict()["graph"] is True
    assert row.queue_delay_ns == 100_000  # first kernel − the launch call, once per replay
    # 108 kernels × the 80 µs launch would be 8.6 ms > 1.08 ms busy; 3 × 80 µs is not
    assert row.gpu_busy_ns == 1_080_000 and row.bound != "launch"


def test_eager_kernels_with_slow_launches_are_launch_bound(tmp_path: Path) -> None:
    """The counterpart: the same kernels, each launched on its own by an 80 µs call."""
    t = Trace()
    for s in range(3):
        t.op("aten::add", 10_000 * s, 5_000)
        for i in range(36):
            corr = t.launch("cudaLaunchKernel", 10_000 * s + 1 + 100 * i, 80)
            t.kernel(corr, 10_000 * s + 100 + 100 * i, 10)
    row = ops_of(t, tmp_path)["aten::add"]
    assert row.bound == "launch" and row.graph_kernels == 0
    assert row.as_dict()["graph"] is False


def test_one_launch_on_two_streams_counts_once(tmp_path: Path) -> None:
    t = Trace()
    compiled_steps(t, steps=1, kernels=6, streams=(7, 9))
    first = next(i for i, e in enumerate(t.events) if e["cat"] == "kernel")
    t.events.append(t.events.pop(first))  # the earliest kernel written last
    events = t.read(tmp_path)
    rows = {r.name: r for r in analyse_ops(events, OpOptions()).rows}
    row = rows["## Call CompiledFxGraph abc ##"]
    assert (row.kernels, row.graph_kernels, row.graph_launches) == (6, 6, 1)
    assert row.queue_delay_ns == 100_000  # launch at 20 µs, earliest kernel at 120 µs
    assert row.bound == "launch"  # 60 µs of work behind one 80 µs launch call
    launch = overview(events).launches
    assert (launch.graph_launches, launch.graph_kernels, launch.timed) == (1, 6, 0)


def test_graph_and_eager_kernels_mixed(tmp_path: Path) -> None:
    t = Trace()
    compiled_steps(t, steps=2, kernels=4)
    t.op("aten::_foreach_copy_", 30_000, 50)
    t.kernel(t.launch("cudaLaunchKernel", 30_001, 5), 30_100, 20)
    rows = ops_of(t, tmp_path)
    copy = rows["aten::_foreach_copy_"]
    assert (copy.kernels, copy.graph_kernels, copy.queue_delay_ns) == (1, 0, 99_000)
    assert rows["## Call CompiledFxGraph abc ##"].graph_kernels == 8
    launch = overview(t.read(tmp_path)).launches
    assert (launch.graph_launches, launch.graph_kernels, launch.linked) == (2, 8, 9)


def test_a_launch_outside_any_op_has_its_own_row(tmp_path: Path) -> None:
    t = Trace()
    t.replay(0, 5)
    t.kernel(12345, 1_000, 10)  # a kernel no launch call names
    rows = ops_of(t, tmp_path)
    assert rows[GRAPH_NO_OP_ROW].graph_kernels == 5 and rows[GRAPH_NO_OP_ROW].graph_launches == 1
    assert rows["(no op)"].kernels == 1 and rows["(no op)"].graph_kernels == 0


def starved(t: Trace, graphs: bool) -> None:
    """Short kernels the GPU waits for: 20 replays of 10 × 2 µs kernels 1 ms apart, or the
    same kernels each launched on its own just before it runs."""
    for i in range(20):
        base = 1_000 * i
        if graphs:
            t.replay(base, 10, dur=2)
            continue
        for j in range(10):
            t.kernel(t.launch("cudaLaunchKernel", base + 90 + 2 * j, 1), base + 100 + 2 * j, 2)


def test_launch_hint_only_for_kernels_launched_on_their_own(tmp_path: Path) -> None:
    eager, graphs = Trace(), Trace()
    starved(eager, False)
    starved(graphs, True)
    fired = {h.rule: h for h in overview(eager.read(tmp_path)).hints}
    assert "cuda-graphs" in fired and "graph replays" not in fired["cuda-graphs"].evidence
    assert "cuda-graphs" not in {h.rule for h in overview(graphs.read(tmp_path)).hints}

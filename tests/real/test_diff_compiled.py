"""Eager vs compiled (h200/eager.json.gz → compiled2.json.gz, the same layer; README there):
``diff --group-by op`` and ``--group-by category`` say where the time moved, and ``diff``
says when a side's step time is CPU-bound under the profiler. Figures against a plain
computation on the raw events (tests/reference.py)."""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from functools import cache
from typing import Any

import pytest
import reference
from conftest import SHARED_TRACES
from typer.testing import CliRunner

from traceview.cli import app

H200 = SHARED_TRACES / "h200"
needs_h200 = pytest.mark.skipif(not H200.is_dir(), reason="../shared/traces/h200 is absent")
COMPILED = re.compile(
    r"^(triton_|## Call CompiledFxGraph |Torch-Compiled Region: |CompiledFunction)"
)


@cache
def diff_json(base: str, new: str, *args: str) -> dict[str, Any]:
    r = CliRunner().invoke(
        app, ["diff", str(H200 / base), str(H200 / new), "-f", "json", "--no-cache", *args]
    )
    assert r.exit_code == 0, r.output
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def _by_op(name: str) -> dict[str, float]:
    """Per launching op (compiled regions as one): the median over steps of its kernel
    time in µs (0 in a step without it)."""
    _, events = reference.load_trace(H200 / name)
    links = {id(k): leaf for k, leaf, _ in reference.op_links(events)}
    launches = reference.launch_ts_by_correlation(events)
    per_step: dict[str, list[float]] = defaultdict(list)
    windows = reference.step_windows(events)
    for i, window in enumerate(windows.values()):
        for e in reference.gpu_events(events):
            if reference._in_step(e, window, launches):  # the steps' membership rule
                leaf = links[id(e)]
                op = "(no op)" if leaf is None else leaf
                op = "(torch.compile region)" if COMPILED.match(op) else op
                times = per_step[op]
                times += [0.0] * (i + 1 - len(times))
                times[i] += reference.dur_ns(e) / 1000
    return {
        op: statistics.median(t + [0.0] * (len(windows) - len(t))) for op, t in per_step.items()
    }


@needs_h200
def test_diff_by_op_explains_eager_vs_compiled() -> None:
    doc = diff_json("eager.json.gz", "compiled2.json.gz", "--group-by", "op")
    both = {k["name"]: k for k in doc["kernels"]}
    new = {k["name"] for k in doc["new_kernels"]}
    gone = {k["name"] for k in doc["vanished_kernels"]}
    for op in ("aten::mm", "aten::addmm", "aten::_cudnn_attention_forward",
               "aten::_cudnn_attention_backward"):  # fmt: skip
        assert op in both, op
        assert abs(both[op]["pct"]) < 5, op  # the same GEMMs and attention, compiled or not
    assert "(torch.compile region)" in new
    assert {"aten::native_layer_norm", "aten::native_dropout", "aten::add"} <= gone
    base_time = doc["totals"]["kernel_time_us"]["before"]
    assert sum(k["time_before_us"] for k in both.values()) >= 0.5 * base_time
    for side, name in (("before", "eager.json.gz"), ("after", "compiled2.json.gz")):
        want = {op: t for op, t in _by_op(name).items() if t > 0}
        got = {
            k["name"]: k[f"time_{side}_us"]
            for k in [*doc["kernels"], *doc["new_kernels"], *doc["vanished_kernels"]]
            if k[f"time_{side}_us"] > 0
        }
        assert got.keys() == want.keys()
        for op, t in want.items():
            assert got[op] == pytest.approx(t, abs=0.002), (side, op)


@needs_h200
def test_diff_by_category_shows_the_elementwise_work_fused() -> None:
    doc = diff_json("eager.json.gz", "compiled2.json.gz", "--group-by", "category")
    both = {k["name"]: k for k in doc["kernels"]}
    new = {k["name"] for k in doc["new_kernels"]}
    assert abs(both["gemm"]["pct"]) < 5 and abs(both["attention"]["pct"]) < 5
    assert both["elementwise"]["pct"] < -80  # became Triton kernels
    assert {"triton pointwise", "triton persistent", "triton reduction"} <= new


def _step_busy_pct(name: str) -> float:
    """Median over steps of the devices' busy time / the CPU step's duration, in %."""
    _, events = reference.load_trace(H200 / name)
    shares = [
        100
        * sum(d["busy_ns"] for d in s["devices"].values())
        / (s["cpu_end_ns"] - s["cpu_start_ns"])
        for s in reference.step_devices(events).values()
    ]
    return statistics.median(shares)


@needs_h200
@pytest.mark.parametrize(
    ("base", "new"), [("eager.json.gz", "compiled2.json.gz"), ("graphs.json.gz", "eager.json.gz")]
)
def test_diff_says_when_step_time_is_cpu_bound(base: str, new: str) -> None:
    doc = diff_json(base, new)
    for side, name in (("base", base), ("new", new)):
        want = _step_busy_pct(name)
        assert doc[side]["step_busy_pct"] == pytest.approx(want, abs=1e-6)
        assert doc[side]["cpu_bound"] is (want < 80)
        noted = any(n.startswith(f"{side}: step time is CPU-bound") for n in doc["notes"])
        assert noted is (want < 80)
    # eager and compiled run ~55% busy under the profiler; the graph replays ~98%
    assert doc["base"]["cpu_bound"] is (base != "graphs.json.gz")
    assert list(doc["totals"])[:2] == ["kernel_time_us", "gpu_busy_us"]


@needs_h200
def test_diff_by_op_needs_the_traces(tmp_path: Any) -> None:
    snap = tmp_path / "eager.snapshot.json"
    r = CliRunner().invoke(app, ["snapshot", str(H200 / "eager.json.gz"), "-o", str(snap)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(
        app, ["diff", str(snap), str(H200 / "compiled2.json.gz"), "--group-by", "op"]
    )
    assert r.exit_code == 2
    assert "--group-by op" in r.output and "Traceback" not in r.output

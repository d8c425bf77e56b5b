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


def _by_fused_op(name: str) -> dict[str, float]:
    """Per op: the median over steps of its kernel time (µs), a Triton kernel of Inductor's
    shared equally among the ops its name lists (the first dur mod k ops 1 ns more), any other
    kernel its launching op's (an implementation op — the copy of a cast — its caller's)."""
    from traceview.analyses.core.fused import fused_ops  # the name's tokens (tested apart)

    _, events = reference.load_trace(H200 / name)
    leaves = {id(k): leaf for k, leaf in reference.fusion_leaves(events)}
    windows = reference.step_windows(events)
    times = reference.launch_ts_by_correlation(events)
    per_step: dict[str, list[int]] = defaultdict(lambda: [0] * len(windows))
    for i, window in enumerate(windows.values()):
        for k in reference.gpu_events(events):
            if not reference._in_step(k, window, times):
                continue
            dur = reference.dur_ns(k)
            leaf = leaves[id(k)]
            ops = fused_ops(reference.event_name(k)) or (
                "(no op)" if leaf is None else reference.fused_op_label(leaf),
            )
            for j, op in enumerate(ops):
                per_step[op][i] += dur // len(ops) + (j < dur % len(ops))
    return {op: statistics.median(t) / 1000 for op, t in per_step.items()}


@needs_h200
def test_diff_by_fused_op_matches_inductor_kernels_to_eager_ops() -> None:
    """The eager ops and the Triton kernels that fused them meet op by op: the casts
    (``_to_copy``), adds, clones, layer norms and dropouts are on both sides and faster
    compiled; the GEMMs and attention unchanged; each side's figures as a plain sum."""
    doc = diff_json("eager.json.gz", "compiled2.json.gz", "--group-by", "fused-op")
    both = {k["name"]: k for k in doc["kernels"]}
    for op in ("add", "clone", "_to_copy", "native_layer_norm", "native_layer_norm_backward",
               "native_dropout", "native_dropout_backward", "sum"):  # fmt: skip
        assert op in both and both[op]["delta_us"] < 0, op
    for op in ("mm", "addmm", "_cudnn_attention_forward", "_cudnn_attention_backward"):
        assert abs(both[op]["pct"]) < 5, op
    rows = [*doc["kernels"], *doc["new_kernels"], *doc["vanished_kernels"]]
    for side, name in (("before", "eager.json.gz"), ("after", "compiled2.json.gz")):
        want = {op: t for op, t in _by_fused_op(name).items() if t > 0}
        got = {k["name"]: k[f"time_{side}_us"] for k in rows if k[f"time_{side}_us"] > 0}
        assert got.keys() == want.keys(), side
        for op, t in want.items():
            assert got[op] == pytest.approx(t, abs=0.002), (side, op)
    # The headline, ahead of the tables: kernel and step time, the largest moves by op.
    head = doc["headline"]
    assert head["kernel_time_pct"] == doc["totals"]["kernel_time_us"]["pct"] < -20
    assert head["step_time_pct"] == doc["totals"]["step_time_us"]["pct"] < 0
    largest = sorted(rows, key=lambda k: -abs(k["delta_us"]))[:3]
    assert [m["name"] for m in head["moves"]] == [k["name"] for k in largest]
    assert head["moves"][0]["name"] == "add"
    text = CliRunner().invoke(
        app, ["diff", str(H200 / "eager.json.gz"), str(H200 / "compiled2.json.gz"),
              "--group-by", "fused-op", "--no-cache"],
    ).stdout  # fmt: skip
    lines = text.splitlines()
    assert lines[3].startswith("headline kernel time -24.60%, step time")
    assert "largest moves by op: add -" in lines[3]

"""``diff --explain`` (docs/metrics.md "Diff --explain"): the change in median step time in
parts that add up to it exactly. On constructed traces whose answer is known by construction
(a kernel stretched, idle added before each step, a trace against itself), and on the H200
eager/compiled twin, where the parts add up to the measured delta of the two traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import reference
from conftest import SHARED_TRACES
from typer.testing import CliRunner

from traceview.cli import app

H200 = SHARED_TRACES / "h200"
STEPS = 5


def _trace(
    path: Path,
    kernels: list[tuple[str, int]],
    cpu_step_us: int,
    lead_us: int = 1,
    stretch: dict[str, int] | None = None,
) -> Path:
    """STEPS ProfilerSteps of ``cpu_step_us`` each; ``lead_us`` into each, the CPU launches the
    step's kernels (name, µs), 1 µs apart; the GPU runs them in order, 5 µs apart, each as soon
    as it is launched and the previous one is done. ``stretch``: µs added to each kernel of
    that name (later work shifted)."""
    stretch = stretch or {}
    events: list[dict[str, Any]] = []
    gpu_free, corr = 0, 0
    for s in range(STEPS):
        start = s * cpu_step_us
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s + 1}",
                       "pid": 1, "tid": 1, "ts": start, "dur": cpu_step_us})  # fmt: skip
        for i, (name, dur) in enumerate(kernels):
            corr += 1
            launch = start + lead_us + i
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                           "pid": 1, "tid": 1, "ts": launch, "dur": 1,
                           "args": {"correlation": corr}})  # fmt: skip
            ts = max(launch + 5, gpu_free + 5)
            dur += stretch.get(name, 0)
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
                           "ts": ts, "dur": dur,
                           "args": {"correlation": corr, "device": 0, "stream": 7}})  # fmt: skip
            gpu_free = ts + dur
    path.write_text(json.dumps({"traceEvents": events}))
    return path


KERNELS = [("gemm_a", 100), ("elementwise_b", 50), ("reduce_c", 80), ("elementwise_b", 50)]


def _explain(base: Path, new: Path, *args: str, code: int = 0) -> dict[str, Any]:
    r = CliRunner().invoke(
        app, ["diff", str(base), str(new), "--explain", "-f", "json", "--no-cache", *args]
    )
    assert r.exit_code == code, r.output
    out: dict[str, Any] = json.loads(r.stdout)["explain"]
    return out


def _parts(explain: dict[str, Any]) -> dict[tuple[str, str], float]:
    return {(p["group"], p["kind"]): p["delta_us"] for p in explain["parts"]}


def _adds_up(explain: dict[str, Any]) -> None:
    total = sum(round(p["delta_us"] * 1000) for p in explain["parts"])
    assert total == round(explain["total_us"] * 1000)
    delta = explain["new_step_time_us"] - explain["base_step_time_us"]
    assert round(explain["total_us"] * 1000) == round(delta * 1000)


@pytest.mark.parametrize("x", [7, 40])
def test_a_stretched_kernel_is_its_count_times_x(tmp_path: Path, x: int) -> None:
    """The GPU runs behind the CPU (a 100 µs CPU step launches ~300 µs of GPU work): every
    elementwise_b (2 a step) 7 or 40 µs longer makes each step 2·X longer, all of it on
    elementwise_b, nothing elsewhere."""
    base = _trace(tmp_path / "base.json", KERNELS, cpu_step_us=100)
    new = _trace(tmp_path / "new.json", KERNELS, cpu_step_us=100, stretch={"elementwise_b": x})
    explain = _explain(base, new)
    _adds_up(explain)
    assert explain["total_us"] == 2 * x
    parts = _parts(explain)
    assert parts.pop(("elementwise_b", "slower")) == 2 * x
    assert all(v == 0 for v in parts.values()), parts
    assert {kind for _, kind in parts} >= {"idle", "overlap", "copies"}  # the fixed rows


def test_idle_before_each_step_lands_in_idle(tmp_path: Path) -> None:
    """A CPU-paced run (1 ms CPU steps, ~300 µs of GPU work): 200 µs more of CPU work before
    each step's launches makes each step 200 µs longer, all of it host wait."""
    base = _trace(tmp_path / "base.json", KERNELS, cpu_step_us=1000, lead_us=10)
    new = _trace(tmp_path / "new.json", KERNELS, cpu_step_us=1200, lead_us=210)
    explain = _explain(base, new)
    _adds_up(explain)
    assert explain["total_us"] == 200
    parts = _parts(explain)
    assert parts.pop(("host wait", "idle")) == 200
    assert all(v == 0 for v in parts.values()), parts


def test_a_self_diff_is_zero_in_every_row(tmp_path: Path) -> None:
    path = _trace(tmp_path / "t.json", KERNELS, cpu_step_us=100)
    explain = _explain(path, path)
    assert explain["total_us"] == 0
    assert explain["parts"] and all(p["delta_us"] == 0 for p in explain["parts"])


def test_the_gate_takes_any_part(tmp_path: Path) -> None:
    """--max-regression 1%: the 80 µs of elementwise_b (of a ~300 µs step) fails as a part."""
    base = _trace(tmp_path / "base.json", KERNELS, cpu_step_us=100)
    new = _trace(tmp_path / "new.json", KERNELS, cpu_step_us=100, stretch={"elementwise_b": 40})
    r = CliRunner().invoke(
        app, ["diff", str(base), str(new), "--explain", "--max-regression", "1%", "--no-cache"]
    )
    assert r.exit_code == 1
    assert "part elementwise_b (slower) +" in r.output
    lines = r.stdout.splitlines()
    explain = next(x for x in lines if x.startswith("explain  "))
    assert "largest parts: elementwise_b (slower) +80.00 µs" in explain


def test_explain_needs_traces(tmp_path: Path) -> None:
    path = _trace(tmp_path / "t.json", KERNELS, cpu_step_us=100)
    snap = tmp_path / "s.json"
    r = CliRunner().invoke(app, ["snapshot", str(path), "-o", str(snap), "-q", "--no-cache"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["diff", str(snap), str(path), "--explain", "--no-cache"])
    assert r.exit_code == 2 and "--explain" in r.output and "Traceback" not in r.output


@pytest.mark.skipif(not H200.is_dir(), reason="../shared/traces/h200 is absent")
@pytest.mark.parametrize("group_by", ["fused-op", "name"])
def test_eager_vs_compiled_parts_add_up_to_the_measured_delta(group_by: str) -> None:
    """The median steps' times are the traces' own (tests/reference.py: the ⌈n/2⌉-th smallest
    step time of each), and the parts add up to their difference exactly."""
    explain = _explain(H200 / "eager.json.gz", H200 / "compiled2.json.gz", "--group-by", group_by)
    _adds_up(explain)
    for side, name in (("base", "eager.json.gz"), ("new", "compiled2.json.gz")):
        _, events = reference.load_trace(H200 / name)
        times = reference.step_times(reference.step_devices(events))
        ordered = sorted(times.items(), key=lambda kv: (kv[1][0], kv[0]))
        step, (ns, _) = ordered[(len(ordered) + 1) // 2 - 1]
        assert explain[f"{side}_step"] == step
        assert round(explain[f"{side}_step_time_us"] * 1000) == ns
    parts = _parts(explain)
    if group_by == "fused-op":  # the casts, adds and norms fused away lead the kernel parts
        assert parts[("add", "faster")] < -100
        assert parts[("clone", "faster")] < -100
    assert ("remainder", "remainder") not in parts


@pytest.mark.skipif(not H200.is_dir(), reason="../shared/traces/h200 is absent")
def test_two_step_ranges_of_one_trace() -> None:
    """train.json.gz, its ordinary steps against the ones where the data loader stalls (5, 8):
    the change is host wait, and the parts add up to it."""
    path = H200 / "train.json.gz"
    explain = _explain(path, path, "--pstep", "6,7,9", "--new-pstep", "5,8")
    _adds_up(explain)
    assert (explain["base_step"], explain["new_step"]) == (9, 8)
    host = next(p for p in explain["parts"] if p["group"] == "host wait")
    assert explain["parts"][0] == host and host["delta_us"] > 0.9 * explain["total_us"] > 15_000
    r = CliRunner().invoke(app, ["diff", str(path), str(path), "--new-pstep", "5", "--no-cache"])
    assert r.exit_code == 2 and "--new-pstep" in r.output

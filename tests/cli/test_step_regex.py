"""--step-regex: steps from the CPU ranges whose name matches, for kineto traces and nsys
exports alike; a bad pattern is a usage error before any reading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from nsys_writer import kineto_to_nsys, load_kineto


def x(cat: str, name: str, ts: int, dur: int, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def trace(tmp_path: Path) -> Path:
    """Three iterations annotated ``train_step_N`` (no ProfilerStep), one kernel launched in
    each, the second one twice as long."""
    events = []
    for n in range(3):
        t = 1000 * n
        events += [
            x("user_annotation", f"train_step_{n + 10}", t, 500),
            x("cuda_runtime", "cudaLaunchKernel", t + 10, 5, correlation=n + 1),
            {**x("kernel", "k", t + 20, 100 * (2 if n == 1 else 1), correlation=n + 1,
                 device=0, stream=7), "pid": 0, "tid": 7},
            x("user_annotation", "train_step_x", t, 10),  # no number: no step
        ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def steps(path: Path, *args: str) -> list[tuple[int, int, float]]:
    r = run_cli("steps", str(path), "-f", "json", "--no-cache", *args)
    assert r.returncode == 0, r.stderr
    return [(s["step"], s["kernels"], s["kernel_time_us"]) for s in json.loads(r.stdout)["steps"]]


def test_steps_from_a_pattern(tmp_path: Path) -> None:
    path = trace(tmp_path)
    assert steps(path) == []  # no ProfilerStep#N
    assert steps(path, "--step-regex", r"train_step_(\d+)") == [
        (10, 1, 100.0),
        (11, 1, 200.0),
        (12, 1, 100.0),
    ]
    r = run_cli("kernels", str(path), "-f", "json", "--no-cache", "--step-regex",
                r"train_step_(\d+)", "--pstep", "11")  # fmt: skip
    assert json.loads(r.stdout)["totals"]["total_us"] == 200.0


def test_an_nsys_export_has_the_same_steps(tmp_path: Path) -> None:
    path = trace(tmp_path)
    nsys = tmp_path / "t.sqlite"
    kineto_to_nsys(load_kineto(path), nsys)
    pattern = r"train_step_(\d+)"
    assert steps(nsys, "--step-regex", pattern) == steps(path, "--step-regex", pattern)


@pytest.mark.parametrize(
    ("pattern", "said"),
    [("train_(", "not a valid regular expression"), ("train_step_\\d+", "exactly one group")],
)
def test_a_bad_pattern_is_a_usage_error(tmp_path: Path, pattern: str, said: str) -> None:
    r = run_cli("steps", str(trace(tmp_path)), "--step-regex", pattern)
    assert r.returncode == 2 and said in r.stderr and r.stderr.count("\n") == 1

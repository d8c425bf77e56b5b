"""Work launched before the trace began, against a plain reading of the trace: GPU activities
whose correlation no runtime call carries, starting before the first launched activity on
their device (docs/metrics.md, "Launched before the trace")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import reference
from conftest import SHARED_TRACES, RealTrace
from typer.testing import CliRunner

from traceview.analyses.core.prelaunch import PRELAUNCH_ROW, launched_before_trace
from traceview.cli import app

H200 = SHARED_TRACES / "h200"


def _reference(raw: list[dict[str, object]]) -> tuple[int, int]:
    """(how many, their summed duration in ns), by the definition, event by event."""
    gpu = [e for e in raw if reference.gpu_kind(e) is not None]
    launches = {
        e["args"].get("correlation")  # type: ignore[union-attr]
        for e in raw
        if e.get("ph") == "X"
        and str(e.get("cat", "")).lower() in ("cuda_runtime", "cuda_driver", "runtime")
        and isinstance(e.get("args"), dict)
    }
    launches.discard(None)

    def device(e: dict[str, object]) -> object:
        return e.get("args", {}).get("device")  # type: ignore[union-attr]

    def corr(e: dict[str, object]) -> object:
        return e.get("args", {}).get("correlation", -1)  # type: ignore[union-attr]

    first: dict[object, int] = {}
    for e in gpu:
        if corr(e) in launches:
            ts = reference.ts_ns(e)
            assert ts is not None
            first[device(e)] = min(first.get(device(e), ts), ts)
    if not first:
        return 0, 0
    before = [
        e
        for e in gpu
        if corr(e) not in launches and (reference.ts_ns(e) or 0) < first.get(device(e), -(2**63))
    ]
    return len(before), sum(reference.dur_ns(e) for e in before)


def cli_json(command: str, path: Path, *rest: str) -> dict[str, Any]:
    r = CliRunner().invoke(app, [command, str(path), "-f", "json", "--no-cache", *rest])
    assert r.exit_code == 0, r.output
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def test_matches_reference(real_trace: RealTrace) -> None:
    mask = launched_before_trace(real_trace.events)
    got = (int(mask.sum()), int(real_trace.events.gpu.dur[mask].sum()))
    assert got == _reference(real_trace.raw)


@pytest.mark.parametrize(("name", "count"), [("train", 619), ("big", 757), ("eager", 0)])
def test_h200_warm_up_tail(name: str, count: int) -> None:
    """train and big start with the warm-up step's queued tail (the h200 README); eager none."""
    path = H200 / f"{name}.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    mask = launched_before_trace(RealTrace(path).events)
    assert int(np.count_nonzero(mask)) == count


def test_train_names_them_and_keeps_them_out_of_ops_and_steps() -> None:
    """train: the 619 activities show as (launched before the trace), not (no op), in no
    step (ProfilerStep#3 has the 1,106 kernels of every other step) and the warning says
    what they are and how long they run."""
    path = H200 / "train.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    raw = RealTrace(path).raw
    before = reference.launched_before(raw)
    kernels = [e for e in raw if reference.gpu_kind(e) == "kernel" and id(e) in before]
    doc = cli_json("summary", path)
    start = round(doc["trace"]["span_start_us"] * 1000)  # the trace's span: its X events
    until = max(reference.interval_ns(e)[1] for e in raw if id(e) in before) - start
    gpu_ns = sum(reference.dur_ns(e) for e in raw if id(e) in before)
    (warning,) = [w for w in doc["trace"]["warnings"] if "before the trace" in w]
    assert warning.startswith(f"{len(before)} GPU activities were launched before the trace")
    assert f"{gpu_ns / 1e6:.1f} ms of GPU time in the first {until / 1e6:.1f} ms" in warning
    ops = {o["name"]: o for o in cli_json("ops", path, "--top", "0")["ops"]}
    assert ops[PRELAUNCH_ROW]["kernels"] == len(kernels)
    assert ops[PRELAUNCH_ROW]["gpu_time_us"] * 1000 == pytest.approx(
        sum(reference.dur_ns(e) for e in kernels), abs=1
    )
    assert "(no op)" not in ops  # every other kernel of train has its op
    steps = cli_json("steps", path)["steps"]
    assert {s["kernels"] for s in steps} == {1106}

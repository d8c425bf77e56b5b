"""The host-stall hint names the Python frame the host is in during the stalls, when the trace
has frames: h200/train.json.gz (two input-pipeline stalls, recorded without stacks) with
frames added around its stalls, as with_stack=True would have recorded its loader."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED_TRACES
from typer.testing import CliRunner

from traceview.cli import app

TRAIN = SHARED_TRACES / "h200" / "train.json.gz"
pytestmark = pytest.mark.skipif(not TRAIN.is_file(), reason="../shared/traces/h200 is absent")
LOADER = "loader.py(12): __next__"
TRAIN_FRAME = "train.py(40): train"


def _stalls(events: list[dict[str, Any]]) -> list[tuple[float, float, Any, Any]]:
    """(gap start, launch, pid, tid) of the gaps between the fused AdamW kernel and the next
    H2D copy (tests/real/test_advice.py finds the same two)."""
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    gpu = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"], e["args"]["correlation"])
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    )
    out = []
    for (_, end, before, _), (start, _, after, corr) in itertools.pairwise(gpu):
        if start - end > 10_000 and "FusedAdam" in before and after.startswith("Memcpy HtoD"):
            launch = launches[corr]
            out.append((end, float(launch["ts"]), launch["pid"], launch["tid"]))
    return out


def _frame(name: str, ts: float, dur: float, pid: Any, tid: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": pid, "tid": tid,
            "ts": ts, "dur": dur, "args": {}}  # fmt: skip


def _host_stall(tmp_path: Path, frames: bool, share: float, outer: bool = True) -> dict[str, Any]:
    """The host-stall hint of train.json.gz, with (``frames``) a loader frame over ``share``
    of each stall (a short frame inside it, and with ``outer`` a frame around the whole stall)
    on the launching thread."""
    with gzip.open(TRAIN) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    stalls = _stalls(events)
    assert len(stalls) == 2
    if frames:
        for start, launch, pid, tid in stalls:
            length = (launch - start) * share
            if outer:
                events.append(_frame(TRAIN_FRAME, start - 50, launch - start + 100, pid, tid))
            events.append(_frame(LOADER, start + 1, length, pid, tid))
            events.append(_frame("loader.py(30): busy", start + 2, length / 10, pid, tid))
    path = tmp_path / "train.json"
    path.write_text(json.dumps(trace))
    r = CliRunner().invoke(app, ["summary", str(path), "-f", "json", "--no-cache"])
    assert r.exit_code == 0, r.output
    return next(h for h in json.loads(r.stdout)["hints"] if h["rule"] == "host-stall")


def test_the_hint_names_the_frame_over_the_stalls(tmp_path: Path) -> None:
    hint = _host_stall(tmp_path, True, 0.9)
    assert hint["action"].startswith(f"look at {LOADER}, where the host is for ")
    assert " of 2 of these stalls: an input pipeline" in hint["action"]
    assert hint["evidence"].startswith("2 device gaps held ")


def test_a_frame_over_less_than_half_gives_way_to_the_one_around_it(tmp_path: Path) -> None:
    hint = _host_stall(tmp_path, True, 0.3)
    assert hint["action"].startswith(f"look at {TRAIN_FRAME}, where the host is for ")


def test_without_frames_or_with_none_over_half_it_says_how_to_record_them(tmp_path: Path) -> None:
    for frames, share in ((False, 0.0), (True, 0.3)):
        hint = _host_stall(tmp_path, frames, share, outer=False)
        assert hint["action"].startswith("look at the Python that runs there"), hint["action"]
        assert "with_stack=True" in hint["action"]

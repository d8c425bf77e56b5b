"""``traceview audit`` on small hand-made traces: odd but readable input (no traceback, the
right exit code), and hostile names and kineto lines shown escaped in every text format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from test_hostile_cli import KERNEL, LAUNCH, STEP, trace_text

EVIL = "k\x1b[31mred\x1b[0m\nnext line | `x` <b>"


def _write(tmp_path: Path, top: dict[str, object]) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(top))
    return path


@pytest.mark.parametrize(
    ("events", "note", "sound"),
    [
        ([], "no GPU activity", True),
        ([KERNEL], "no launch calls", False),  # no CPU ops: op attribution untrusted
        ([STEP, LAUNCH], "no GPU activity", True),
    ],
    ids=["0 events", "kernels, no runtime", "steps, no kernels"],
)
def test_odd_traces_are_audited(tmp_path: Path, events: list[dict], note: str, sound: bool) -> None:
    path = tmp_path / "t.json"
    path.write_text(trace_text(events))
    r = run_cli("audit", str(path), "-q", "-f", "json")
    assert r.returncode == (0 if sound else 1), r.stderr
    doc = json.loads(r.stdout)
    assert any(note in n for n in doc["notes"])
    assert doc["sound"] is sound
    untrusted = [n for n, f in doc["figures"].items() if f["trust"] == "untrusted"]
    assert untrusted == ([] if sound else ["op_attribution"])


def test_hostile_names_are_escaped(tmp_path: Path) -> None:
    kernel = {**KERNEL, "name": EVIL}
    lost = {**LAUNCH, "name": "cudaLaunchKernel", "ts": 1, "args": {"correlation": 2}}
    step = {**STEP, "ts": 0, "dur": 4}  # ends before the kernel's launch: no GPU work in it
    path = _write(tmp_path, {"traceEvents": [step, lost, LAUNCH, kernel], "WARNING": [EVIL]})
    for fmt in ("table", "md", "csv"):
        r = run_cli("audit", str(path), "-q", "-f", fmt)
        assert r.returncode == 1, r.stderr  # a launched kernel left no GPU activity
        assert "\x1b" not in r.stdout
        assert fmt == "csv" or "next line" in r.stdout  # the CSV holds no names
        assert fmt != "table" or "`x` <b>" in r.stdout  # kineto's line whole, not short-named
    doc = json.loads(run_cli("audit", str(path), "-q", "-f", "json").stdout)
    warning = next(c for c in doc["checks"] if c["id"] == "profiler-warning")
    assert warning["examples"][0]["name"] == EVIL  # verbatim in JSON, escaped by the encoder

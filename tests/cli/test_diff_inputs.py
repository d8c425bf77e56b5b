"""The CI gate never passes a growth from zero; snapshots are recognised by parsing (any key
order, a BOM), their numbers validated, their size bounded."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from traceview.analyses.snapshot import build_snapshot
from traceview.app.reading import read_trace
from traceview.app.snapshot_file import MAX_SNAPSHOT_BYTES, to_json
from traceview.options import ReadOptions

DEMO = ROOT / "fixtures" / "demo.json.gz"
LAUNCH = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
          "ts": 10, "dur": 5, "args": {"correlation": 7}}  # fmt: skip
CPU_OP = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 90}


def kernel(ts: int, dur: int, correlation: int = 7) -> dict[str, object]:
    return {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": correlation}}  # fmt: skip


def write_trace(path: Path, events: list[dict[str, object]]) -> Path:
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def diff(*argv: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "traceview", "diff", *map(str, argv), "-q"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        timeout=120,
    )


def one_error(r: subprocess.CompletedProcess[str], fragment: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1, r.stderr
    assert len(lines) == 1 and lines[0].startswith("traceview: error: "), r.stderr
    assert fragment in lines[0] and "Traceback" not in r.stderr and "Warning" not in r.stderr


def snapshot_doc() -> dict[str, object]:
    doc = json.loads(to_json(build_snapshot(read_trace(DEMO, ReadOptions(quiet=True)))))
    assert isinstance(doc, dict)
    return doc


def test_a_baseline_without_kernels_fails_the_gate(tmp_path: Path) -> None:
    base = write_trace(tmp_path / "cpu_only.json", [CPU_OP, LAUNCH])
    new = write_trace(tmp_path / "gpu.json", [CPU_OP, LAUNCH, kernel(20, 640)])
    r = diff(base, new, "--max-regression", "5%")
    one_error(r, "total kernel time grew from 0 in the baseline")
    ok = diff(base, new, "--max-regression", "5%", "--allow-empty-baseline")
    assert ok.returncode == 0 and "gate     PASS" in ok.stdout, ok.stderr


def test_a_baseline_without_idle_fails_the_idle_gate(tmp_path: Path) -> None:
    base = write_trace(tmp_path / "busy.json", [LAUNCH, kernel(20, 100), kernel(120, 100, 8)])
    new = write_trace(tmp_path / "idle.json", [LAUNCH, kernel(20, 100), kernel(170, 50, 8)])
    r = diff(base, new, "--max-idle-regression", "10%", "-f", "json")
    one_error(r, "GPU idle time grew from 0 in the baseline")
    (failure,) = json.loads(r.stdout)["gate"]["failures"]
    assert failure["what"] == "idle" and failure["before"] == 0 and failure["pct"] is None


@pytest.mark.parametrize("variant", ["sorted", "bom", "sorted-gzip"])
def test_snapshots_are_recognised_by_parsing(tmp_path: Path, variant: str) -> None:
    doc = snapshot_doc()
    text = json.dumps(doc, sort_keys=True, indent=2).encode()
    assert not text.lstrip(b"{ \n").startswith(b'"kind"')  # kind is no longer first
    path = tmp_path / "baseline.json"
    if variant == "bom":
        text = b"\xef\xbb\xbf" + to_json(build_snapshot(read_trace(DEMO, ReadOptions()))).encode()
    path.write_bytes(gzip.compress(text) if variant.endswith("gzip") else text)
    r = diff(path, DEMO, "--max-regression", "5%", "-f", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["base"]["source"] == "snapshot"


@pytest.mark.parametrize(
    ("field", "value"),
    [("total_us", 1e308), ("max_us", -1.0), ("p99_us", 1e16)],
)
def test_snapshot_numbers_are_validated(tmp_path: Path, field: str, value: float) -> None:
    doc = snapshot_doc()
    kernels = doc["kernels"]
    assert isinstance(kernels, list)
    kernels[0][field] = value
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(doc))
    one_error(diff(path, DEMO, "--max-regression", "5%"), f"kernels[0].{field} = ")


def test_totals_overflowing_float64_are_refused(tmp_path: Path) -> None:
    doc = snapshot_doc()
    doc["totals"] = {**doc["totals"], "idle_us": 1e308}  # type: ignore[dict-item]
    for step in doc["steps"]:  # type: ignore[attr-defined]
        step["duration_us"] = 1e308
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(doc))
    one_error(diff(path, DEMO), "out of range")


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_a_huge_snapshot_is_refused(tmp_path: Path, compressed: bool) -> None:
    head = b'{"kind": "traceview-snapshot", "schema_version": 1, "pad": "'
    data = head + b"x" * (MAX_SNAPSHOT_BYTES + 1) + b'"}'
    path = tmp_path / "huge.json"
    path.write_bytes(gzip.compress(data, compresslevel=1) if compressed else data)
    one_error(diff(path, DEMO), "larger than 64 MB is not accepted")


def test_a_trace_is_told_from_its_first_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from traceview.app import snapshot_file as snapshot

    trace = write_trace(tmp_path / "t.json", [LAUNCH, kernel(20, 30)])
    sorted_snapshot = tmp_path / "s.json"
    sorted_snapshot.write_text(json.dumps(snapshot_doc(), sort_keys=True))

    def read_all(path: Path) -> bytes:
        raise AssertionError(f"{path} read whole")

    monkeypatch.setattr(snapshot, "_read_bounded", read_all)
    assert snapshot.is_snapshot(trace) is False
    with pytest.raises(AssertionError, match="read whole"):
        snapshot.is_snapshot(sorted_snapshot)  # "devices" first: it must be parsed

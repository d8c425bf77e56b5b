"""traceview snapshot and diff end to end: the CI gate on generated traces, bad baselines."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_cli
from test_fixtures_generator import gen
from typer.testing import CliRunner

from traceview.analyses.snapshot import build_snapshot
from traceview.app.reading import read_trace
from traceview.app.snapshot_file import load_snapshot, to_json
from traceview.cli import app
from traceview.errors import TraceviewError
from traceview.options import ReadOptions

DEMO = ROOT / "fixtures" / "demo.json.gz"
SLOWED = "ampere_sgemm_128x128_nt"  # ~14% of the generated traces' kernel time
RENAMED = "at::native::reduce_kernel"  # a short name; its full name is renamed in `renamed`
runner = CliRunner()


def _edit(source: Path, target: Path, change: Any) -> Path:
    """Copy a small generated trace, applying ``change`` to every kernel event."""
    doc = json.loads(source.read_text())
    for event in doc["traceEvents"]:
        if event.get("cat") == "kernel":
            change(event)
    target.write_text(json.dumps(doc))
    return target


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``base`` (3 steps), ``slow`` (SLOWED 30% slower) and ``renamed`` (one kernel renamed)."""
    tmp = tmp_path_factory.mktemp("diff")
    base = tmp / "base.json"
    gen.write_trace(base, steps=3, seed=1)

    def slower(e: dict[str, Any]) -> None:
        if e["name"] == SLOWED:
            e["dur"] = round(e["dur"] * 1.3, 3)

    def rename(e: dict[str, Any]) -> None:
        if e["name"].startswith("void at::native::reduce_kernel"):
            e["name"] = "my_fused_reduce_kernel"

    return {
        "base": base,
        "slow": _edit(base, tmp / "slow.json", slower),
        "renamed": _edit(base, tmp / "renamed.json", rename),
    }


def _diff(*args: str) -> Any:
    return runner.invoke(app, ["diff", *map(str, args), "-q"])


def _json(*args: str) -> dict[str, Any]:
    r = _diff(*args, "-f", "json", "--top", "0")
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)


def _zero(doc: dict[str, Any]) -> None:
    """Nothing changed: every figure and kernel delta is 0, nothing new or vanished."""
    assert all(f["delta"] == 0 for f in doc["totals"].values() if f["before"] is not None)
    assert doc["kernels"] and all(k["delta_us"] == 0 and k["pct"] == 0 for k in doc["kernels"])
    assert doc["new_kernels"] == [] and doc["vanished_kernels"] == []


def test_trace_against_itself_passes() -> None:
    r = _diff(DEMO, DEMO, "--max-regression", "0%", "--max-idle-regression", "0")
    assert r.exit_code == 0, r.output
    assert "gate     PASS" in r.stdout
    _zero(_json(DEMO, DEMO))


def test_trace_against_its_own_snapshot_passes(tmp_path: Path) -> None:
    snap = tmp_path / "baseline.json"
    r = runner.invoke(app, ["snapshot", str(DEMO), "-o", str(snap), "-q"])
    assert r.exit_code == 0, r.output
    assert r.stderr == "" and snap.is_file()  # -q: not even ``Wrote``
    r = _diff(snap, DEMO, "--max-regression", "0", "--max-idle-regression", "0")
    assert r.exit_code == 0, r.output
    via_snapshot, via_trace = _json(snap, DEMO), _json(DEMO, DEMO)
    _zero(via_snapshot)
    assert via_snapshot["base"]["source"] == "snapshot"
    for key in ("mode", "totals", "kernels"):
        assert via_snapshot[key] == via_trace[key], key


def test_one_kernel_30_percent_slower(traces: dict[str, Path]) -> None:
    r = _diff(traces["base"], traces["slow"], "--max-regression", "5%")
    assert r.exit_code == 1, r.output
    assert f"  kernel {SLOWED} +30.00% > 5%" in r.stdout
    assert r.stderr.startswith("traceview: error: regression gate failed: kernel " + SLOWED)
    assert len(r.stderr.splitlines()) == 1
    assert _diff(traces["base"], traces["slow"], "--max-regression", "50%").exit_code == 0
    assert _diff(traces["base"], traces["slow"]).exit_code == 0  # no gate: always 0


def test_regression_json(traces: dict[str, Path]) -> None:
    doc = _json(traces["base"], traces["slow"], "--max-regression", "5")
    assert doc["mode"] == "median" and doc["base"]["steps"] == [5, 6, 7]
    assert doc["gate"]["passed"] is False
    assert [(f["what"], f["name"]) for f in doc["gate"]["failures"]] == [("kernel", SLOWED)]
    first = doc["kernels"][0]
    assert (
        first["name"] == SLOWED and first["regressed"] and first["pct"] == pytest.approx(30, 0.01)
    )
    assert [k["name"] for k in doc["kernels"] if k["regressed"]] == [SLOWED]
    assert doc["totals"]["kernel_time_us"]["pct"] == pytest.approx(4.1, abs=0.1)


def test_idle_gate(traces: dict[str, Path]) -> None:
    """Faster kernels leave the GPU idle longer: the idle gate catches it."""
    r = _diff(traces["slow"], traces["base"], "--max-idle-regression", "0.1%")
    assert r.exit_code == 1, r.output
    assert "regression gate failed: GPU idle time +" in r.stderr


def test_new_and_vanished_kernels(traces: dict[str, Path]) -> None:
    doc = _json(traces["base"], traces["renamed"], "--max-regression", "5%")
    assert [k["name"] for k in doc["new_kernels"]] == ["my_fused_reduce_kernel"]
    assert [k["short_name"] for k in doc["vanished_kernels"]] == [RENAMED]
    assert doc["gate"]["passed"] is True
    text = _diff(traces["base"], traces["renamed"]).stdout
    new_part = text.split("New kernels (only in NEW)")[1]
    assert "my_fused_reduce_kernel" in new_part
    assert RENAMED in new_part.split("Vanished kernels (only in BASE)")[1]


def test_step_selection_and_modes(traces: dict[str, Path]) -> None:
    text = _diff(traces["base"], traces["slow"]).stdout
    assert "compare  per-step medians of ProfilerSteps 5-7 (base) and 5-7 (new)" in text
    one = _json(traces["base"], traces["slow"], "--pstep", "6")
    assert one["mode"] == "steps" and one["new"]["steps"] == [6]
    r = _diff(traces["base"], traces["slow"], "--pstep", "9")
    assert r.exit_code == 2 and "no ProfilerStep 9 in BASE" in r.stderr
    assert "(steps found: 5-7)" in r.stderr


def test_markdown_for_a_review_comment(traces: dict[str, Path]) -> None:
    r = _diff(traces["base"], traces["slow"], "--max-regression", "5%", "-f", "md")
    assert r.stdout.startswith("**traceview diff — FAIL: 1 regression;")
    assert "| # | Count | Time before |" in r.stdout
    assert "\n- kernel ampere_sgemm_128x128_nt +30.00% &gt; 5%" in r.stdout  # the regressions


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-regression", "five"], "--max-regression 'five': expected a percentage"),
        (["--max-regression", "-5%"], "expected a percentage"),
        (["--min-share", "150%"], "--min-share 150%: must be at most 100%"),
        (["--min-time", "5 parsecs"], "--min-time '5 parsecs'"),
        (["--format", "csv"], "--format 'csv': expected one of table, json, md"),
        (["--pstep", "x"], "--pstep 'x'"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    r = _diff(DEMO, DEMO, *args)
    assert r.exit_code == 2 and message in r.stderr, r.output


def _snapshot_text() -> str:
    return to_json(build_snapshot(read_trace(DEMO, ReadOptions(quiet=True))))


def _bad_baselines(tmp: Path) -> dict[str, tuple[Path, str]]:
    """Broken baseline files and what the error must say about each."""
    good = json.loads(_snapshot_text())
    cases: dict[str, tuple[Any, str]] = {
        # Cut just after a comma, never inside a number: the snapshot holds the trace's path,
        # so a cut at a fixed byte lands in a number or not depending on the checkout's path.
        "truncated": (
            _cut_after_comma(_snapshot_text(), 3000),
            "not a valid snapshot: Input data was truncated",
        ),
        "version": ({**good, "schema_version": 3}, "snapshot schema_version 3 is not supported"),
        "missing": ({k: v for k, v in good.items() if k != "totals"}, "field `totals`"),
        "type": (
            {**good, "kernels": [{**good["kernels"][0], "total_us": "12"}]},
            "Expected `float`, got `str` - at `$.kernels[0].total_us`",
        ),
        "steps": (
            {**good, "kernels": [{**good["kernels"][0], "step_counts": [1]}]},
            "kernels[0]: step arrays must have one entry per step (6)",
        ),
        "other_output": (
            runner.invoke(app, ["kernels", str(DEMO), "-f", "json"]).stdout,
            "traceview JSON output, not a trace or a snapshot",
        ),
        "empty": ("", "empty file"),
        "text": ("not a baseline\n", "not JSON"),
    }
    out = {}
    for kind, (content, message) in cases.items():
        path = tmp / f"{kind}.json"
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        out[kind] = (path, message)
    out["missing_file"] = (tmp / "nothing.json", "no such file")
    return out


def _cut_after_comma(text: str, at: int) -> str:
    return text[: text.index(",", at) + 1]


def test_bad_baselines_fail_with_one_clear_line(tmp_path: Path) -> None:
    for kind, (path, message) in _bad_baselines(tmp_path).items():
        r = _diff(path, DEMO, "--max-regression", "5%")
        assert r.exit_code == 1, (kind, r.output)
        assert r.stdout == "", kind
        assert r.stderr.startswith(f"traceview: error: {path}: "), (kind, r.stderr)
        assert message in r.stderr and len(r.stderr.splitlines()) == 1, (kind, r.stderr)


def test_snapshot_document(tmp_path: Path) -> None:
    text = _snapshot_text()
    doc = json.loads(text)
    assert list(doc)[:3] == ["kind", "schema_version", "traceview_version"]
    assert (doc["kind"], doc["schema_version"]) == ("traceview-snapshot", 2)
    assert len(text) < 40_000  # kilobytes: every kernel of the demo trace, per step
    assert [s["step"] for s in doc["steps"]] == [5, 6, 7, 8, 9, 10]
    assert doc["totals"]["total_us"] == pytest.approx(243805.327)
    assert doc["other"]["kernels"] == 0 and len(doc["kernels"]) == 50
    for step, row in enumerate(doc["steps"]):
        in_step = sum(k["step_totals_us"][step] for k in doc["kernels"])
        assert in_step == pytest.approx(row["kernel_time_us"])
    path = tmp_path / "s.json"
    path.write_text(text)
    assert to_json(load_snapshot(path)) == text


def test_snapshot_output_file(tmp_path: Path) -> None:
    out = tmp_path / "b.json"
    assert runner.invoke(app, ["snapshot", str(DEMO), "-o", str(out), "-q"]).exit_code == 0
    r = runner.invoke(app, ["snapshot", str(DEMO), "-o", str(out), "-q"])
    assert r.exit_code == 2 and "already exists (use --force" in r.stderr
    assert runner.invoke(app, ["snapshot", str(DEMO), "-o", str(out), "--force"]).exit_code == 0
    stdout = runner.invoke(app, ["snapshot", str(DEMO), "-q"]).stdout
    assert stdout == out.read_text()


def test_gzipped_snapshot_is_recognised(tmp_path: Path) -> None:
    path = tmp_path / "baseline.json.gz"
    path.write_bytes(gzip.compress(_snapshot_text().encode()))
    r = _diff(path, DEMO, "--max-regression", "0")
    assert r.exit_code == 0, r.output
    assert f"base     {path} (snapshot of" in r.stdout


def test_ci_flow_as_a_subprocess(traces: dict[str, Path], tmp_path: Path) -> None:
    """What the README's CI snippet does: snapshot the baseline, diff a new run, fail."""
    baseline = tmp_path / "baseline.json"
    assert run_cli("snapshot", str(traces["base"]), "-o", str(baseline)).returncode == 0
    ok = run_cli("diff", str(baseline), str(traces["base"]), "--max-regression", "5%")
    assert ok.returncode == 0, ok.stderr
    r = run_cli("diff", str(baseline), str(traces["slow"]), "--max-regression", "5%", "-f", "md")
    assert r.returncode == 1, r.stderr
    assert f"- kernel {SLOWED} +30.00% &gt; 5%" in r.stdout  # Markdown: > as an entity
    assert r.stderr.startswith("traceview: error: regression gate failed: kernel ")
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1


def test_a_schema_1_snapshot_is_still_a_baseline(tmp_path: Path) -> None:
    """Version 1 lacks the steps' device figures; every figure diff compares is the same."""
    doc = json.loads(_snapshot_text())
    doc["schema_version"] = 1
    for step in doc["steps"]:
        del step["devices"]
    old = tmp_path / "v1.json"
    old.write_text(json.dumps(doc))
    r = runner.invoke(app, ["diff", str(old), str(DEMO), "--max-regression", "0", "-q"])
    assert r.exit_code == 0, r.output
    assert load_snapshot(old).steps[0].devices == ()


def test_a_negative_lag_is_a_valid_snapshot_number(tmp_path: Path) -> None:
    """A step whose GPU work starts before the CPU step has a negative lag: not out of range."""
    doc = json.loads(_snapshot_text())
    doc["steps"][0]["devices"][0]["lag_us"] = -51.0
    path = tmp_path / "lag.json"
    path.write_text(json.dumps(doc))
    assert load_snapshot(path).steps[0].devices[0].lag_us == -51.0
    doc["steps"][0]["devices"][0]["busy_us"] = -1.0
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceviewError, match=r"busy_us = -1\.0 is out of range"):
        load_snapshot(path)

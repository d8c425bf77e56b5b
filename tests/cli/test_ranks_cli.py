"""A run on the command line: several files, a directory or a glob for kernels, gaps, steps,
snapshot and ranks; the JSON field names issue #15 gives; bad ranks as one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import run_cli
from test_ranks import generated_run
from typer.testing import CliRunner

from traceview.app.run_snapshot_file import load_run_snapshot
from traceview.cli import app

runner = CliRunner()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated_run(tmp_path_factory.mktemp("run"), "--ranks", "4", "--late-rank", "2")


def _json(*args: str) -> dict:  # type: ignore[type-arg]
    r = runner.invoke(app, [*args, "-q", "-j", "1", "--format", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def test_ranks_json_has_the_issue_fields(run_dir: Path) -> None:
    doc = _json("ranks", str(run_dir))
    assert {"schema_version", "ranks", "collectives"} <= set(doc)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3]
    for row in doc["ranks"]:
        assert {"rank", "kernels", "kernel_time_us", "times_last", "wait_us"} <= set(row)
    assert doc["collectives"] and all(c["last"] == 2 for c in doc["collectives"])
    for c in doc["collectives"]:
        assert {"name", "index", "skew_us", "last", "latency_us"} <= set(c)
    assert doc["slowest"] == 2


def test_kernels_of_several_files_has_the_issue_fields(run_dir: Path) -> None:
    files = sorted(str(p) for p in run_dir.glob("*.json"))
    doc = _json("kernels", *files, "--top", "0")
    assert {"schema_version", "ranks", "rollup"} <= set(doc)
    for rank in doc["ranks"]:
        assert {"rank", "path", "totals"} <= set(rank)
        assert set(rank["totals"]) == {"count", "total_us", "distinct"}
    assert set(doc["rollup"]["totals"]) == {"count", "total_us", "distinct"}
    issue = {"name", "short_name", "count", "total_us", "mean_us", "std_us", "min_us", "max_us",
             "p50_us", "p90_us", "p99_us", "pct_launches", "pct_time", "ranks"}  # fmt: skip
    for row in doc["rollup"]["kernels"]:
        assert issue <= set(row)
    assert doc["rollup"]["totals"]["count"] == sum(r["totals"]["count"] for r in doc["ranks"])
    assert sum(k["count"] for k in doc["rollup"]["kernels"]) == doc["rollup"]["totals"]["count"]


def test_a_glob_steps_and_gaps(run_dir: Path) -> None:
    steps = _json("steps", str(run_dir / "run_rank*.json"))
    assert steps["schema_version"] and steps
    gaps = _json("gaps", str(run_dir))
    assert gaps["schema_version"]
    r = runner.invoke(app, ["gaps", str(run_dir), "--min-gap", "3"])
    assert r.exit_code == 2 and "takes no gap options" in r.output


def test_per_rank_tables_follow_the_roll_up(run_dir: Path) -> None:
    r = runner.invoke(app, ["kernels", str(run_dir), "-q", "-j", "1", "--per-rank"])
    assert r.exit_code == 0, r.output
    assert r.stdout.index("run ") < r.stdout.index("rank 0 ") < r.stdout.index("rank 3 ")


def test_snapshot_of_a_run(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.snapshot.json"
    r = runner.invoke(app, ["snapshot", str(run_dir), "-q", "-j", "1", "-o", str(out)])
    assert r.exit_code == 0, r.output
    snap = load_run_snapshot(out)
    assert [r.rank for r in snap.ranks] == [0, 1, 2, 3]


def test_one_file_is_still_one_trace(run_dir: Path) -> None:
    doc = _json("kernels", str(run_dir / "run_rank0.json"))
    assert "rollup" not in doc and doc["totals"]["count"] > 0


def test_bad_runs_are_one_line(tmp_path: Path) -> None:
    run = generated_run(tmp_path / "run", "--ranks", "3")
    (run / "run_rank1.json").write_text("this is not json")
    r = run_cli("ranks", str(run), "-q")
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("traceview: error: rank 1: ") and "--partial" in r.stderr
    r = run_cli("ranks", str(run), "-q", "--partial")
    assert r.returncode == 0 and "skipped rank 1" in r.stderr
    dup = generated_run(tmp_path / "dup", "--ranks", "2")
    (dup / "copy.json").write_bytes((dup / "run_rank0.json").read_bytes())
    r = run_cli("ranks", str(dup), "-q")
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "run_rank0.json" in r.stderr and "copy.json" in r.stderr
    r = run_cli("ranks", str(tmp_path / "nothing*.json"))
    assert r.returncode != 0 and r.stderr.count("\n") == 1, r.stderr


def test_without_dask_the_dask_engine_is_one_line(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if traceview[dask] were absent
    r = runner.invoke(app, ["ranks", str(run_dir), "-q", "--engine", "dask"])
    assert r.exit_code == 1
    assert r.output == "traceview: error: --engine dask needs dask.distributed: " + (
        "pip install 'traceview[dask]'\n"
    )
    r = runner.invoke(app, ["ranks", str(run_dir), "-q", "--scheduler", "tcp://x:8786"])
    assert r.exit_code == 2 and "need --engine dask" in r.output


def test_a_run_snapshot_never_overwrites_a_rank(tmp_path: Path) -> None:
    run = generated_run(tmp_path / "run", "--ranks", "2")
    rank0 = run / "run_rank0.json"
    before = rank0.read_bytes()
    for given in (str(run), str(run / "*.json")):
        r = run_cli("snapshot", given, "-q", "-o", str(rank0), "--force")
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert rank0.read_bytes() == before


def test_ranks_json_with_process_groups_has_sizes_and_bandwidth(tmp_path: Path) -> None:
    run = generated_run(tmp_path, "--ranks", "3", "--comm-args", "op", "--seq")
    doc = _json("ranks", str(run))
    fields = {"process_group", "matched_by", "ranks", "bytes", "algbw_gbps", "busbw_gbps"}
    for c in doc["collectives"]:
        assert fields <= set(c)
        assert c["matched_by"] == "seq" and c["process_group"] == "0" and c["ranks"] == 3
        assert c["bytes"] > 0 and c["busbw_gbps"] > 0
    kinds = {b["collective"]: b for b in doc["bandwidth"]}
    assert set(kinds) == {"allreduce", "allgather"}
    for b in kinds.values():
        assert set(b) == {"collective", "collectives", "bytes", "time_us", "algbw_gbps",
                          "busbw_gbps"}  # fmt: skip
        assert b["algbw_gbps"] == pytest.approx(b["bytes"] / (b["time_us"] * 1000))
    r = runner.invoke(app, ["ranks", str(run), "-q", "-j", "1"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "busbw GB/s" in r.stdout and "bandwidth per collective kind" in r.stdout

"""``traceview diff`` of two runs: the roll-up gate, the per-rank gate, run snapshots as
baselines, and what a run diff refuses."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli
from test_ranks import generated_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A run, its snapshot, and a copy whose rank 1 runs volta_sgemm 3× longer."""
    tmp = tmp_path_factory.mktemp("runs")
    base = generated_run(tmp / "base", "--ranks", "3")
    snapshot = tmp / "base.snapshot.json"
    assert run_cli("snapshot", str(base), "-q", "-j", "1", "-o", str(snapshot)).returncode == 0
    slower = tmp / "slower"
    shutil.copytree(base, slower)
    doc = json.loads((slower / "run_rank1.json").read_text())
    for e in doc["traceEvents"]:
        if e["name"] == "volta_sgemm_128x64_nn":
            e["dur"] *= 3
    (slower / "run_rank1.json").write_text(json.dumps(doc))
    return base, snapshot, slower


def _diff(*args: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    r = run_cli("diff", *args, "-q", "-j", "1", "-f", "json")
    return r.returncode, json.loads(r.stdout) if r.stdout else {}, r.stderr


def test_a_run_against_its_own_snapshot_passes(runs: tuple[Path, Path, Path]) -> None:
    base, snapshot, _ = runs
    code, doc, err = _diff(str(snapshot), str(base), "--per-rank", "--max-regression", "0")
    assert code == 0, err
    assert doc["passed"] and [r["rank"] for r in doc["ranks"]] == [0, 1, 2]
    for report in (doc["rollup"], *doc["ranks"]):
        assert report["gate"]["passed"] and report["totals"]["kernel_time_us"]["delta"] == 0
    assert doc["rollup"]["base"]["source"] == "run snapshot"
    assert doc["rollup"]["new"]["source"] == "run"


def test_a_slower_rank_fails_the_roll_up_and_its_own_gate(runs: tuple[Path, Path, Path]) -> None:
    base, snapshot, slower = runs
    code, doc, err = _diff(str(snapshot), str(slower), "--per-rank", "--max-regression", "5%")
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith("traceview: error: regression gate failed: roll-up: kernel volta_sgemm")
    assert " | rank 1: total kernel time +" in err and "rank 0:" not in err and "rank 2:" not in err
    assert not doc["passed"] and not doc["rollup"]["gate"]["passed"]
    assert [r["gate"]["passed"] for r in doc["ranks"]] == [True, False, True]
    one = {k["name"]: k for k in doc["rollup"]["kernels"]}["volta_sgemm_128x64_nn"]
    rank1 = json.loads((slower / "run_rank1.json").read_text())["traceEvents"]
    grown = sum(e["dur"] for e in rank1 if e["name"] == "volta_sgemm_128x64_nn") * 2 / 3
    assert one["delta_us"] == pytest.approx(grown)  # the rank's growth is the run's
    code, doc, _ = _diff(str(base), str(slower), "--max-regression", "5%")
    assert code == 1 and doc["ranks"] == []  # without --per-rank: the roll-up only


def test_ranks_on_one_side_only_are_listed(runs: tuple[Path, Path, Path], tmp_path: Path) -> None:
    base, _, _ = runs
    two = generated_run(tmp_path / "two", "--ranks", "2")
    code, doc, err = _diff(str(base), str(two), "--per-rank")
    assert code == 0, err
    assert doc["ranks_only_in_base"] == [2] and doc["ranks_only_in_new"] == []
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]


def test_what_a_run_diff_refuses(runs: tuple[Path, Path, Path]) -> None:
    base, snapshot, _ = runs
    r = run_cli("diff", str(snapshot), str(base / "run_rank0.json"), "-q")
    assert r.returncode == 2 and "compare a run with a run" in r.stderr, r.stderr
    r = run_cli("diff", str(snapshot), str(base), "--pstep", "1", "-q")
    assert r.returncode == 2 and "--pstep: runs are compared" in r.stderr, r.stderr


@pytest.mark.parametrize("rank", [2**70, 2**63, -1])
def test_a_rank_beyond_int64_in_a_run_snapshot_is_one_line(
    runs: tuple[Path, Path, Path], tmp_path: Path, rank: int
) -> None:
    base, snapshot, _ = runs
    doc = json.loads(snapshot.read_text())
    doc["ranks"][2]["rank"] = rank
    edited = tmp_path / "edited.snapshot.json"
    edited.write_text(json.dumps(doc))
    r = run_cli("diff", str(edited), str(base), "-f", "json", "--per-rank", "-q", "-j", "1")
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    why = "beyond int64" if rank > 0 else "negative"
    assert f"rank {rank} is {why}; ranks are 0 to 2^63-1" in r.stderr, r.stderr

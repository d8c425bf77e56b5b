"""The library API over a run (traceview.open of a list, glob or directory of rank files)
against the CLI on the 8-rank DLRM traces: its JSON equals ``-f json``, its Arrow and pandas
forms equal ``-f csv``, the same engines and per-rank cache entries, the same errors."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.csv
import pytest
from conftest import SHARED_TRACES

import traceview

DLRM = sorted(SHARED_TRACES.glob("param__dlrm_8rank_worker*.json.gz"))
GLOB = str(SHARED_TRACES / "param__dlrm_8rank_worker*.json.gz")
# method: (CLI arguments, API keyword arguments), each the same request
CASES: dict[str, tuple[list[str], dict[str, Any]]] = {
    "ranks": (["ranks"], {}),
    "kernels": (["kernels", "--top", "5", "--sort", "total"], {"top": 5, "sort": "total"}),
    "kernels-per-rank": (["kernels", "--per-rank"], {"per_rank": True}),
    "steps": (["steps"], {}),
    "gaps": (["gaps"], {}),
}

pytestmark = pytest.mark.skipif(len(DLRM) != 8, reason="../shared/traces is absent")


def _cli(args: list[str]) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "traceview", *args, GLOB, "-q", "-j", "2"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def run() -> traceview.Run:
    return traceview.open(GLOB, jobs=2)


def _call(run: traceview.Run, case: str) -> Any:
    _, kwargs = CASES[case]
    return getattr(run, case.split("-")[0])(**kwargs)


@pytest.mark.parametrize("case", list(CASES))
def test_json_equals_the_cli(run: traceview.Run, case: str) -> None:
    cli = json.loads(_cli([*CASES[case][0], "-f", "json"]))
    assert json.loads(json.dumps(_call(run, case).to_json())) == cli


@pytest.mark.parametrize("case", list(CASES))
def test_arrow_and_pandas_equal_the_cli_csv(run: traceview.Run, case: str) -> None:
    csv_text = _cli([*CASES[case][0], "-f", "csv"])
    want = pyarrow.csv.read_csv(io.BytesIO(csv_text.encode()))
    result = _call(run, case)
    assert result.to_arrow().equals(want)
    pandas = pytest.importorskip("pandas")
    pandas.testing.assert_frame_equal(result.to_pandas(), want.to_pandas())


def test_the_snapshot_equals_the_cli_s(run: traceview.Run) -> None:
    cli = json.loads(_cli(["snapshot"]))
    assert json.loads(json.dumps(dataclasses.asdict(run.snapshot()))) == cli


def test_results_are_the_analyses_dataclasses(run: traceview.Run) -> None:
    from traceview.analyses.runs.gaps import GapRollup
    from traceview.analyses.runs.kernels import RollupReport
    from traceview.analyses.runs.ranks import RanksReport
    from traceview.analyses.runs.steps import StepRollup

    ranks = run.ranks()
    assert isinstance(ranks, RanksReport) and [r.summary.rank for r in ranks.rows] == list(range(8))
    assert isinstance(run.kernels(), RollupReport) and isinstance(run.steps(), StepRollup)
    assert isinstance(run.gaps(), GapRollup)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ranks.rows = []  # type: ignore[misc]


def test_a_list_a_glob_and_a_directory_are_the_same_run(tmp_path: Path) -> None:
    directory = tmp_path / "run"
    directory.mkdir()
    for path in DLRM:
        (directory / path.name).symlink_to(path)
    by_list = traceview.open(DLRM, jobs=2).kernels(top=0).to_json()["rollup"]
    by_dir = traceview.open(directory, jobs=2).kernels(top=0).to_json()["rollup"]
    assert by_list == by_dir
    assert by_list == traceview.open(GLOB, jobs=2).kernels(top=0).to_json()["rollup"]


def test_the_cli_s_cache_entries_serve_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """After ``traceview ranks`` (the same cache directory), no rank file is read again: the
    local engine's workers (forked, so they see this patch) find each rank's summary."""
    want = json.loads(_cli(["ranks", "-f", "json"]))
    from traceview.app import reading

    def no_read(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a rank file was read again")

    monkeypatch.setattr(reading, "read_trace", no_read)
    got = traceview.open(GLOB, jobs=2).ranks().to_json()
    assert json.loads(json.dumps(got)) == want


def test_the_dask_engine_gives_the_same_run() -> None:
    pytest.importorskip("distributed")
    local = traceview.open(DLRM, jobs=2).ranks().to_json()
    dask = traceview.open(DLRM, jobs=2, engine="dask").ranks().to_json()
    assert dask == local


@pytest.mark.parametrize(
    ("call", "cli", "message"),
    [
        (lambda: traceview.open(GLOB, engine="spark"), ["ranks", "--engine", "spark"],
         "--engine 'spark': expected one of"),
        (lambda: traceview.open(GLOB).kernels(group_by="short"),
         ["kernels", "--group-by", "short"], "grouped by kernel name only"),
        (lambda: traceview.open(GLOB, jobs=0), ["ranks", "-j", "0"], "-j 0"),
    ],
)  # fmt: skip
def test_errors_are_the_cli_s(call: Any, cli: list[str], message: str) -> None:
    with pytest.raises(traceview.TraceviewError, match=message):
        call()
    r = subprocess.run([sys.executable, "-m", "traceview", *cli, GLOB, "-q"],
                       capture_output=True, text=True, check=False)  # fmt: skip
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_open_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(traceview.TraceviewError, match="unknown option 'bogus'"):
        traceview.open(DLRM, bogus=1)
    with pytest.raises(traceview.TraceviewError, match="an empty list"):
        traceview.open([])
    with pytest.raises(traceview.TraceviewError, match="no file matches this pattern"):
        traceview.open(str(tmp_path / "nothing*.json"))


def test_the_documented_run_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pandas")
    import re

    from conftest import ROOT

    text = (ROOT / "docs" / "python.md").read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[1]
    assert "traceview.open(" in code and "dlrm" in code
    monkeypatch.chdir(ROOT)
    exec(compile(code, "docs/python.md", "exec"), {})


def test_cache_dir_may_be_a_str(tmp_path: Path) -> None:
    """As a Path: it was used as given and failed ("unsupported operand type(s) for /")."""
    from conftest import ROOT

    where = tmp_path / "cache"
    ranks = traceview.open(DLRM[:2], jobs=1, cache_dir=str(where)).ranks()
    assert [r.summary.rank for r in ranks.rows] == [0, 1]
    one = traceview.open(ROOT / "fixtures" / "demo.json.gz", cache_dir=str(where))
    assert one.kernels().count > 0
    assert len(list((where / "entries").iterdir())) == 3  # two ranks and the demo

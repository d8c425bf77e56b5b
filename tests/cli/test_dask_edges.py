"""The Dask engine's edges (issue 49): a truncated rank's warning reaches the client and the
JSON (as the local engine's does), a scheduler file that is missing, late or not one, and
--scheduler with --scheduler-file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from typer.testing import CliRunner

from traceview.cli import app


def _run(directory: Path, ranks: int = 3, truncated: int | None = None) -> Path:
    """Rank files of 40 kernels each (``distributedInfo.rank``); ``truncated``: that rank's
    file cut in the middle of its events."""
    directory.mkdir()
    for rank in range(ranks):
        kernels = [
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10 + 20 * i,
             "dur": 10, "args": {"device": 0, "stream": 7}}
            for i in range(40)
        ]  # fmt: skip
        text = json.dumps({"distributedInfo": {"rank": rank}, "traceEvents": kernels})
        if rank == truncated:
            text = text[: len(text) // 2]
        (directory / f"rank{rank}.json").write_text(text)
    return directory


def _truncation(lines: Any) -> list[str]:
    return [w for w in lines if "rank 1 (" in w and "TRUNCATED" in w]


@pytest.mark.parametrize("engine", ["local", "dask"])
def test_a_truncated_rank_s_warning_reaches_the_client_and_the_json(
    tmp_path: Path, engine: str
) -> None:
    """On an external cluster (worker processes of this test: their stderr is not the
    command's), the warning is the command's, once, and in the JSON's warnings."""
    run = _run(tmp_path / "run", truncated=1)
    args = ["ranks", str(run), "--partial", "-f", "json", "--no-cache"]
    if engine == "local":
        r = run_cli(*args)
    else:
        pytest.importorskip("distributed")
        from distributed import LocalCluster

        scheduler_file = tmp_path / "scheduler.json"
        options = dict(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0")
        with LocalCluster(**options) as cluster:  # type: ignore[arg-type]
            scheduler_file.write_text(json.dumps({"address": cluster.scheduler_address}))
            r = run_cli(*args, "--engine", "dask", "--scheduler-file", str(scheduler_file))
    assert r.returncode == 0, r.stderr
    said = _truncation(r.stderr.splitlines())
    assert len(said) == 1 and said[0].startswith("traceview: warning: rank 1 ("), r.stderr
    assert len(_truncation(json.loads(r.stdout)["warnings"])) == 1


def _invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["ranks", *args, "--engine", "dask", "--no-cache"])


def test_a_missing_scheduler_file_is_waited_for_then_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("distributed")
    from traceview.app.engines import dask

    monkeypatch.setattr(dask, "SCHEDULER_FILE_WAIT_S", 0.3)
    run = _run(tmp_path / "run", ranks=1)
    missing = tmp_path / "missing.json"
    r = _invoke(str(run), "--scheduler-file", str(missing))
    assert r.exit_code == 1, r.output
    assert f"waiting up to 0.3 s for the scheduler file {missing}" in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last == (
        f"traceview: error: --scheduler-file {missing}: no such file after 0.3 s (is the "
        "scheduler started with --scheduler-file naming it?)"
    )


@pytest.mark.parametrize(
    ("text", "why"),
    [("{not json", "not JSON"), ('{"type": "Scheduler"}', 'no "address" in it'),
     ("[1, 2]", 'no "address" in it'), ("", "not JSON")],
)  # fmt: skip
def test_a_scheduler_file_that_is_not_one_is_one_line(tmp_path: Path, text: str, why: str) -> None:
    pytest.importorskip("distributed")
    run = _run(tmp_path / "run", ranks=1)
    bad = tmp_path / "scheduler.json"
    bad.write_text(text)
    r = _invoke(str(run), "--scheduler-file", str(bad))
    assert r.exit_code == 1 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"traceview: error: --scheduler-file {bad}: not a Dask scheduler")
    assert why in r.stderr


def test_scheduler_and_scheduler_file_together_are_a_usage_error(tmp_path: Path) -> None:
    run = _run(tmp_path / "run", ranks=1)
    r = run_cli("ranks", str(run), "--engine", "dask", "--scheduler", "tcp://127.0.0.1:1",
                "--scheduler-file", str(tmp_path / "s.json"))  # fmt: skip
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "give one of --scheduler and --scheduler-file" in r.stderr

"""CSV files give the JSON's figures under the JSON's names (µs, not the results' ns): one
row per kernel, stream or rank, its columns those of the JSON object it stands for."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from test_ranks import generated_run
from typer.testing import CliRunner

from traceview.cli import app

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo.json.gz"
runner = CliRunner()


def _out(*args: str) -> str:
    r = runner.invoke(app, [*args, "-q"])
    assert r.exit_code == 0, r.output
    return r.stdout


def _csv(*args: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(_out(*args, "-f", "csv"))))


def _same(rows: list[dict[str, str]], objects: list[dict], skip: tuple[str, ...] = ()) -> None:  # type: ignore[type-arg]
    assert rows and len(rows) == len(objects)
    for row, obj in zip(rows, objects, strict=True):
        for key in skip:
            row.pop(key)
        assert list(row) == list(obj)
        for key, value in obj.items():
            if isinstance(value, float):
                assert float(row[key]) == value, key
            elif isinstance(value, int):
                assert int(row[key]) == value, key


def test_kernels_csv_is_the_json() -> None:
    doc = json.loads(_out("kernels", str(DEMO), "-f", "json", "--top", "0"))
    _same(_csv("kernels", str(DEMO), "--top", "0"), doc["kernels"], skip=("rank",))


def test_gaps_csv_is_the_json() -> None:
    doc = json.loads(_out("gaps", str(DEMO), "-f", "json", "--per-stream"))
    _same(_csv("gaps", str(DEMO), "--per-stream"), doc["streams"])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated_run(tmp_path_factory.mktemp("run"), "--ranks", "3")


def test_run_csvs_are_the_json(run_dir: Path) -> None:
    doc = json.loads(_out("kernels", str(run_dir), "-j", "1", "-f", "json", "--top", "0"))
    _same(_csv("kernels", str(run_dir), "-j", "1", "--top", "0"), doc["rollup"]["kernels"],
          skip=("position",))  # fmt: skip
    doc = json.loads(_out("gaps", str(run_dir), "-j", "1", "-f", "json"))
    rows = _csv("gaps", str(run_dir), "-j", "1")
    ranks = [
        {k: v for k, v in r.items() if k not in ("rank", "path", "idle_us")} for r in doc["ranks"]
    ]
    _same(rows[:-1], ranks, skip=("rank",))
    rollup = {k: v for k, v in doc["rollup"].items() if k.endswith("_us") or k == "gaps"}
    _same(rows[-1:], [rollup], skip=("rank",))

"""``diff --group-by category``: kernels compared per category, the gate per category."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from test_fixtures_generator import gen
from typer.testing import CliRunner

from traceview.analyses.core.categories import by_name
from traceview.cli import app

runner = CliRunner()
SLOWED = "ampere_sgemm_128x128_nt"


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("diffcat")
    base, slow = tmp / "base.json", tmp / "slow.json"
    gen.write_trace(base, steps=3, seed=1)
    doc = json.loads(base.read_text())
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e["name"] == SLOWED:
            e["dur"] = round(e["dur"] * 1.3, 3)
    slow.write_text(json.dumps(doc))
    return base, slow


def _doc(*args: Any) -> tuple[int, dict[str, Any]]:
    r = runner.invoke(app, ["diff", *map(str, args), "-q", "-f", "json", "--top", "0"])
    assert r.exit_code in (0, 1), r.output
    return r.exit_code, json.loads(r.stdout)


def _category_totals(path: Path) -> dict[str, float]:
    """Per category (name rules), the summed kernel duration in µs over the whole trace."""
    out: dict[str, float] = defaultdict(float)
    for e in json.loads(path.read_text())["traceEvents"]:
        if e.get("cat") == "kernel" and e.get("ph") == "X":
            out[by_name(e["name"])] += e["dur"]
    return out


def test_categories_compared_and_gated(traces: tuple[Path, Path]) -> None:
    base, slow = traces
    code, doc = _doc(base, slow, "--group-by", "category", "--max-regression", "5%")
    names = {k["name"] for k in doc["kernels"]}
    assert names == set(_category_totals(base)) and "gemm" in names
    gemm = next(k for k in doc["kernels"] if k["name"] == "gemm")
    assert gemm["delta_us"] > 0
    # Only the GEMM category changed; whether it fails the gate depends on its share.
    assert [k["name"] for k in doc["kernels"] if k["delta_us"]] == ["gemm"]
    failed = [f["name"] for f in doc["gate"]["failures"]]
    assert failed == (["gemm"] if gemm["regressed"] else [])
    assert code == (1 if failed else 0)


def test_category_totals_in_total_mode(tmp_path: Path) -> None:
    one = tmp_path / "one.json"
    gen.write_trace(one, steps=1, seed=2)  # fewer than 2 steps: whole-trace totals
    _, doc = _doc(one, one, "--group-by", "category")
    got = {k["name"]: k["time_before_us"] for k in doc["kernels"]}
    want = _category_totals(one)
    assert got.keys() == want.keys()
    for name, us in want.items():
        assert got[name] == pytest.approx(us, abs=0.002), name
    assert all(k["delta_us"] == 0 for k in doc["kernels"])

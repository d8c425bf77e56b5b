"""The snapshot of a run: each rank's snapshot is its one-file snapshot, the roll-up agrees
with the independent reference over every instance, and the file reads back checked."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import ranks_reference as rr
from test_ranks import DLRM, READ, generated_run, needs_dlrm

from traceview.analyses.kernels import KernelOptions
from traceview.analyses.runs.snapshot import RunSnapshot
from traceview.analyses.snapshot import build_snapshot
from traceview.app.reading import read_trace
from traceview.app.run_snapshot_file import is_run_snapshot, load_run_snapshot, to_json
from traceview.app.runs import run_snapshot
from traceview.app.snapshot_file import is_snapshot
from traceview.app.snapshot_file import to_json as one_file_json
from traceview.errors import TraceviewError
from traceview.options import RunOptions


def _check(paths: dict[int, Path], run: RunSnapshot) -> None:
    assert [r.rank for r in run.ranks] == sorted(paths)
    for r in run.ranks:
        assert r.snapshot == build_snapshot(read_trace(paths[r.rank], READ))
    want = rr.rollup(rr.load_run(paths))
    got = {k.name: k for k in run.rollup.kernels}
    assert set(got) == set(want)
    for name, k in got.items():
        e = want[name]
        assert k.count == e["count"] and k.total_us == e["total_ns"] / 1000
        assert (k.min_us, k.max_us) == (e["min_ns"] / 1000, e["max_ns"] / 1000)
        assert math.isclose(k.std_us, e["std_ns"] / 1000, abs_tol=0.001)
        for p in (50, 90, 99):
            assert abs(getattr(k, f"p{p}_us") - e[f"p{p}_ns"] / 1000) <= 0.01 * e[f"p{p}_ns"] / 1000
    assert run.rollup.totals.count == sum(e["count"] for e in want.values())
    assert run.rollup.steps == () and run.run.ranks == len(paths)


def test_generated_run_snapshot(tmp_path: Path) -> None:
    run_dir = generated_run(tmp_path / "run", "--ranks", "3", "--late-rank", "1")
    run = run_snapshot([run_dir], RunOptions(jobs=2), READ, KernelOptions())
    _check({r: run_dir / f"run_rank{r}.json" for r in range(3)}, run)
    path = tmp_path / "run.snapshot.json"
    path.write_text(to_json(run))
    assert is_run_snapshot(path) and not is_snapshot(path)
    assert load_run_snapshot(path) == run


@needs_dlrm
def test_dlrm_run_snapshot() -> None:
    run = run_snapshot(DLRM, RunOptions(), READ, KernelOptions())
    _check(dict(enumerate(DLRM)), run)


def test_a_bad_rank_snapshot_is_refused_naming_it(tmp_path: Path) -> None:
    run_dir = generated_run(tmp_path / "run", "--ranks", "2")
    text = to_json(run_snapshot([run_dir], RunOptions(jobs=1), READ, KernelOptions()))
    lines = text.splitlines()
    last = len(lines) - 3  # the last rank's line, before "]" and "}"
    assert lines[last].startswith('  {"rank":1,')
    lines[last] = lines[last].replace('"count":', '"count":-', 1)
    path = tmp_path / "bad.json"
    path.write_text("\n".join(lines))
    with pytest.raises(TraceviewError, match=r"bad\.json: not a valid run snapshot: rank 1: "):
        load_run_snapshot(path)


def test_a_one_file_snapshot_is_not_a_run_snapshot(tmp_path: Path) -> None:
    run_dir = generated_run(tmp_path / "run", "--ranks", "2")
    path = tmp_path / "one.json"
    path.write_text(one_file_json(build_snapshot(read_trace(run_dir / "run_rank0.json", READ))))
    assert not is_run_snapshot(path)

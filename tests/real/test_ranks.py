"""Several ranks: summaries, the roll-up, collectives and stragglers against the independent
reference (tests/ranks_reference.py) on the 8-rank DLRM run and on generated runs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import ranks_reference as rr
from conftest import ROOT, SHARED_TRACES

from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.analyses.runs.ranks import RanksReport, ranks_report
from traceview.app.engines.worker import RunResult
from traceview.app.reading import read_trace
from traceview.app.runs import gather
from traceview.options import ReadOptions, RunOptions

DLRM = sorted(SHARED_TRACES.glob("param__dlrm_8rank_worker*.json.gz"))
needs_dlrm = pytest.mark.skipif(len(DLRM) != 8, reason="../shared/traces has no DLRM run")
READ = ReadOptions(quiet=True)


def _gather(
    inputs: list[Path], read: ReadOptions = READ, **run: object
) -> tuple[RunResult, RanksReport]:
    result = gather(inputs, RunOptions(**run), read, KernelOptions())  # type: ignore[arg-type]
    return result, ranks_report(result.summaries, result.rollup, result.waits)


def generated_run(tmp: Path, *extra: str) -> Path:
    import importlib.util

    spec = importlib.util.spec_from_file_location("generate_run", ROOT / "fixtures/generate_run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.write_run(tmp, module.parse_args([str(tmp), *extra]))
    return tmp


def _check_against_reference(
    paths: dict[int, Path], result: RunResult, report: RanksReport
) -> None:
    run = rr.load_run(paths)
    want = rr.collectives(run)
    got = {(c.name, c.process_group, c.matched_by, c.index): c for c in report.collectives}
    assert set(got) == set(want)
    for key, c in got.items():
        w = want[key]
        assert (c.skew_ns, c.last, c.latency_ns, c.bytes, c.ranks) == (
            w["skew_ns"], w["last"], w["latency_ns"], w["bytes"], w["ranks"]
        )  # fmt: skip
        for field in ("algbw_gbps", "busbw_gbps"):
            mine, theirs = getattr(c, field), w[field]
            assert (mine is None) == (theirs is None), (key, field)
            assert mine is None or math.isclose(mine, theirs, rel_tol=1e-12), (key, field)
    waits = rr.waits(run)
    for row in report.rows:
        assert (row.waits.times_last, row.waits.wait_ns) == waits[row.summary.rank]
    rollup = result.rollup
    expected = rr.rollup(run)
    stats = rollup.stats
    assert sorted(stats.names) == sorted(expected)
    from traceview.aggregate import sketch

    pcts = sketch.quantiles(stats.sketch, len(stats.names), (50, 90, 99))
    std = stats.moments.std()
    for g, name in enumerate(stats.names):
        e = expected[name]
        m = stats.moments
        assert int(m.count[g]) == e["count"] and int(m.total[g]) == e["total_ns"]
        assert int(m.minimum[g]) == e["min_ns"] and int(m.maximum[g]) == e["max_ns"]
        assert math.isclose(std[g], e["std_ns"], rel_tol=1e-9, abs_tol=1e-6)
        for p in (50, 90, 99):
            assert abs(pcts[p][g] - e[f"p{p}_ns"]) <= 0.01 * e[f"p{p}_ns"], (name, p)
        assert int(rollup.rank_count[g]) == e["ranks"]
        assert int(rollup.low_total[g]) == e["rank_min_ns"]
        assert int(rollup.high_total[g]) == e["rank_max_ns"]


@needs_dlrm
def test_dlrm_run_matches_reference() -> None:
    result, report = _gather(DLRM)
    assert [s.rank for s in result.summaries] == list(range(8))
    _check_against_reference({i: p for i, p in enumerate(DLRM)}, result, report)
    assert len(report.collectives) == 8
    assert sum(c.last == 7 for c in report.collectives) == 5  # as the issue states
    assert report.slowest == 7
    assert report.warnings == []  # clocks aligned: ends within a few µs


@needs_dlrm
def test_per_rank_totals_equal_the_per_file_results() -> None:
    result, _ = _gather(DLRM)
    for summary, path in zip(result.summaries, DLRM, strict=True):
        alone = analyse_kernels(read_trace(path, READ), KernelOptions(top=0))
        assert summary.kernels == alone.count
        assert summary.kernel_time_ns == alone.total_ns
        assert len(summary.stats.names) == alone.distinct


def test_generated_run_finds_the_late_rank(tmp_path: Path) -> None:
    run = generated_run(tmp_path, "--ranks", "6", "--late-rank", "4", "--gzip")
    result, report = _gather([run], jobs=2)
    assert len(report.collectives) == 6  # 2 steps × 3 collectives
    assert all(c.last == 4 for c in report.collectives)
    times_last = {r.summary.rank: r.waits.times_last for r in report.rows}
    assert times_last == {0: 0, 1: 0, 2: 0, 3: 0, 4: 6, 5: 0}
    assert min(report.rows, key=lambda r: r.waits.wait_ns).summary.rank == 4
    assert report.slowest == 4
    _check_against_reference({r: run / f"run_rank{r}.json.gz" for r in range(6)}, result, report)


def test_skewed_clock_is_warned(tmp_path: Path) -> None:
    run = generated_run(tmp_path, "--ranks", "3", "--skew-rank", "1", "--skew-clock-us", "5000")
    _, report = _gather([run], jobs=1)
    assert report.clock_spread_ns is not None and report.clock_spread_ns >= 5_000_000
    assert any("clocks may not be aligned" in w for w in report.warnings)


def test_dask_equals_local(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    run = generated_run(tmp_path, "--ranks", "5", "--late-rank", "2")
    uncached = ReadOptions(quiet=True, cache=False)  # each engine works its summaries out
    local, local_report = _gather([run], uncached, jobs=2)
    dask, dask_report = _gather([run], uncached, engine="dask", jobs=2)
    assert local_report.as_json() == dask_report.as_json()
    a, b = local.rollup, dask.rollup
    assert a.stats.names == b.stats.names
    for field in ("count", "total", "minimum", "maximum", "mean", "m2"):
        assert (getattr(a.stats.moments, field) == getattr(b.stats.moments, field)).all()
    assert (a.stats.sketch.count == b.stats.sketch.count).all()


def test_a_broken_rank_is_one_error_or_skipped_with_partial(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from traceview.errors import TraceviewError

    run = generated_run(tmp_path, "--ranks", "3")
    (run / "run_rank7.json").write_text("hello, not a trace")
    with pytest.raises(TraceviewError, match=r"^rank 7: .*run_rank7\.json: .*--partial skips it$"):
        _gather([run], jobs=2)
    result = gather(
        [run], RunOptions(jobs=2), ReadOptions(quiet=True, partial=True), KernelOptions()
    )
    assert [s.rank for s in result.summaries] == [0, 1, 2]
    assert "warning: --partial: skipped rank 7" in capsys.readouterr().err
    missing = tmp_path / "run_rank8.json"
    with pytest.raises(TraceviewError, match=r"rank 8: .*no such file"):
        _gather([run / "run_rank0.json", missing])


@pytest.mark.parametrize("which", ["dlrm", "generated"])
def test_step_rollup_matches_reference(which: str, tmp_path: Path) -> None:
    from traceview.analyses.runs.steps import step_rollup

    if which == "dlrm":
        if len(DLRM) != 8:
            pytest.skip("../shared/traces has no DLRM run")
        paths = dict(enumerate(DLRM))
    else:
        run = generated_run(tmp_path, "--ranks", "5", "--steps", "3", "--late-rank", "1")
        paths = {r: run / f"run_rank{r}.json" for r in range(5)}
    result, _ = _gather(list(paths.values()))
    got = {r.step: r for r in step_rollup(result.summaries, result.rollup).rows}
    want = rr.step_spread(paths)
    assert set(got) == set(want)
    for step, w in want.items():
        g = got[step]
        assert (g.ranks, g.min_ns, g.min_rank, g.median_ns, g.max_ns, g.max_rank) == (
            w["ranks"], w["min_ns"], w["min_rank"], w["median_ns"], w["max_ns"], w["max_rank"]
        )  # fmt: skip


@needs_dlrm
def test_gap_rollup_matches_reference() -> None:
    from traceview.analyses.runs.gaps import gap_rollup

    paths = dict(enumerate(DLRM))
    result, _ = _gather(DLRM)
    report = gap_rollup(result.summaries, result.rollup)
    want = rr.gap_lengths(paths)
    every: list[int] = []
    for summary, got in report.ranks:
        lengths, wait = want[summary.rank]
        every += lengths
        assert got.gaps == len(lengths) and got.gap_total_ns == sum(lengths)
        assert got.host_wait_ns == wait
        assert summary.idle_ns == sum(lengths)  # idle = Σ device gaps, as one file says
    every.sort()
    run = report.rollup
    assert run.gaps == len(every) and run.gap_total_ns == sum(every)
    assert run.max_gap_ns == every[-1] and run.min_gap_ns == every[0]
    for p in (50, 90, 99):
        exact = rr.reference.nearest_rank(every, p)
        assert abs(getattr(run, f"p{p}_gap_ns") - exact) <= 0.01 * exact

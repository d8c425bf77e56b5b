"""A rank's summary stored in its cache entry: the numbers come back exactly, a warm run gives
what a cold one gives without reading the columns, and a summary is served only to the code
and options that would work out the same one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import grimp
import numpy as np
import pytest
from conftest import run_cli
from test_cache_fingerprint import CONTENT_NEUTRAL, PACKAGE
from test_ranks import generated_run
from typer.testing import CliRunner

from traceview.analyses.kernels import KernelOptions
from traceview.analyses.runs.rank_summary import RankSummary, summarize_rank
from traceview.app.reading import read_trace
from traceview.cache import fingerprint
from traceview.cache import rank_summaries as arrays
from traceview.cli import app
from traceview.errors import TraceviewError
from traceview.options import ReadOptions

runner = CliRunner()


def _same(a: Any, b: Any) -> bool:
    """Equal dataclasses, lists, tuples and arrays (arrays: same dtype and values)."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if hasattr(a, "__dataclass_fields__"):
        return type(a) is type(b) and all(
            _same(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__
        )
    if isinstance(a, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b) and type(a) is type(b)


def test_the_numbers_come_back_exactly(tmp_path: Path) -> None:
    run = generated_run(tmp_path, "--ranks", "2", "--late-rank", "1")
    events = read_trace(run / "run_rank1.json", ReadOptions(quiet=True, cache=False))
    summary = summarize_rank(events, 1)
    assert summary.median_step_ns is not None and summary.gaps is not None
    back = arrays.from_arrays(arrays.to_arrays(summary), 1, summary.path)
    assert _same(back, summary)
    bare = RankSummary(**{**summary.__dict__, "median_step_ns": None, "gaps": None, "steps": ()})
    assert _same(arrays.from_arrays(arrays.to_arrays(bare), 1, bare.path), bare)


def _ranks_json(*args: str) -> dict[str, Any]:
    r = runner.invoke(app, [*args, "-q", "-j", "1", "-f", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def _derived(cache: Path) -> list[Path]:
    return sorted(cache.glob("entries/*/derived-*.npz"))


def _no_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a trace (from its entry or its bytes) fails from now on (forked workers too)."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise TraceviewError("read the trace")

    monkeypatch.setattr("traceview.app.reading.read_trace", refuse)


def test_a_warm_run_reads_no_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = generated_run(tmp_path / "run", "--ranks", "3", "--late-rank", "2")
    cache = Path(os.environ["TRACEVIEW_CACHE_DIR"])
    cold = _ranks_json("ranks", str(run))
    assert len(_derived(cache)) == 3  # stored by the cold run, once each entry was written
    _no_reading(monkeypatch)
    assert _ranks_json("ranks", str(run)) == cold
    assert _ranks_json("steps", str(run))["ranks"]  # the same summaries serve steps


def test_other_options_and_refresh_are_not_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = generated_run(tmp_path / "run", "--ranks", "2")
    cache = Path(os.environ["TRACEVIEW_CACHE_DIR"])
    _ranks_json("ranks", str(run))
    cold = _ranks_json("kernels", str(run), "--no-cache", "--name", "nccl")
    assert _ranks_json("kernels", str(run), "--name", "nccl") == cold
    assert len(_derived(cache)) == 4  # a summary per (rank, kernel options)
    _ranks_json("ranks", str(run), "--refresh")  # entries replaced: summaries worked out again
    assert len(_derived(cache)) == 2
    _no_reading(monkeypatch)
    r = runner.invoke(app, ["kernels", str(run), "-q", "-j", "1", "--name", "sgemm"])
    assert r.exit_code == 1 and "read the trace" in r.output


def test_a_damaged_summary_is_worked_out_again(tmp_path: Path) -> None:
    run = generated_run(tmp_path / "run", "--ranks", "2")
    cache = Path(os.environ["TRACEVIEW_CACHE_DIR"])
    cold = _ranks_json("ranks", str(run))
    damaged = _derived(cache)[0]
    damaged.write_bytes(damaged.read_bytes()[:100])
    assert _ranks_json("ranks", str(run)) == cold
    assert len(damaged.read_bytes()) > 100  # stored anew


def test_read_problems_are_said_on_a_warm_run(tmp_path: Path) -> None:
    run = generated_run(tmp_path / "run", "--ranks", "2")
    rank = run / "run_rank1.json"
    doc = json.loads(rank.read_text())
    doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7})
    rank.write_text(json.dumps(doc))
    for _ in range(2):  # cold, then from the stored summaries (a subprocess: the workers'
        # stderr is the process's)
        r = run_cli("ranks", str(run), "-q", "-j", "1", "-f", "json")
        assert r.returncode == 0, r.stderr
        assert f"warning: rank 1 ({rank}): 1 events skipped" in r.stderr  # cold and warm alike
        r = run_cli("ranks", str(run), "-q", "-j", "1", "--strict")
        assert r.returncode == 1 and f"rank 1: {rank}: --strict: 1 events skipped" in r.stderr


def test_the_key_follows_the_options_and_the_code(monkeypatch: pytest.MonkeyPatch) -> None:
    base = arrays.summary_key(KernelOptions(), None)
    assert arrays.summary_key(KernelOptions(top=3, sort="count"), None) == base
    others = {
        arrays.summary_key(KernelOptions(name_regex="nccl"), None),
        arrays.summary_key(KernelOptions(include=("kernel", "memcpy")), None),
        arrays.summary_key(KernelOptions(steps=(1,)), None),
        arrays.summary_key(KernelOptions(), "Step"),
    }
    assert len(others) == 4 and base not in others
    monkeypatch.setattr(arrays, "code_fingerprint", lambda sources: "0" * 32)
    assert arrays.summary_key(KernelOptions(), None) != base


def test_the_fingerprint_covers_what_the_summary_imports() -> None:
    graph = grimp.build_graph("traceview")
    roots = {"traceview.analyses.runs.rank_summary", "traceview.cache.rank_summaries"}
    used = set(roots)
    for module in roots:
        used |= graph.find_upstream_modules(module)
    hashed = {
        ".".join(("traceview", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(
            ".__init__"
        )
        for p in fingerprint.source_files(PACKAGE, arrays.SUMMARY_SOURCES)
    }
    assert used - CONTENT_NEUTRAL <= hashed, sorted(used - CONTENT_NEUTRAL - hashed)

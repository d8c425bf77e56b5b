"""``traceview report`` of a run: the ranks section carries the run's ``ranks`` document and
draws it; the other sections are one rank's documents (the lowest, or ``--rank``); a rank the
run lacks and ``--rank`` with one trace are one-line usage errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from test_ranks import generated_run
from test_report import DEMO, cli_json, embedded, write_report

from tests.conftest import SHARED_TRACES, run_cli

DLRM = sorted(SHARED_TRACES.glob("param__dlrm_8rank_worker*.json.gz"))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated_run(tmp_path_factory.mktemp("run"), "--ranks", "4", "--late-rank", "2")


def dlrm_dir(tmp_path: Path) -> Path:
    """The 8-rank DLRM run as links in a directory of its own (skipped when absent)."""
    if len(DLRM) != 8:
        pytest.skip("../shared/traces has no 8-rank DLRM run")
    run = tmp_path / "dlrm"
    run.mkdir()
    for trace in DLRM:
        os.symlink(trace, run / trace.name)
    return run


def rank_file(run: Path, rank: int) -> str:
    """The file of ``rank`` as the run lists it (``ranks`` JSON)."""
    doc = cli_json("ranks", str(run), "-j", "1")
    return str(next(r["path"] for r in doc["ranks"] if r["rank"] == rank))


def assert_rank_documents(data: dict[str, Any], trace: str) -> None:
    """The sections' documents are exactly the commands' on the rank's own trace."""
    assert data["summary"] == cli_json("summary", trace)
    assert data["kernels"] == cli_json("kernels", trace, "--top", "0")
    assert data["gaps"] == cli_json("gaps", trace, "--largest", "20")
    assert data["steps"] == cli_json("steps", trace)
    assert data["ops"] == cli_json("ops", trace, "--top", "0", "--group-by", "op+shapes")


def test_a_run_page_carries_ranks_and_the_lowest_ranks_documents(
    run_dir: Path, tmp_path: Path
) -> None:
    page = write_report(run_dir, tmp_path / "r.html", "-j", "1")
    data = embedded(page, "tv-data")
    ranks = cli_json("ranks", str(run_dir), "-j", "1")
    assert data["ranks"] == ranks and ranks["slowest"] == 2
    assert_rank_documents(data, rank_file(run_dir, 0))
    assert page.index('id="ranks"') < page.index('id="breakdown"')  # the run comes first
    assert 'data-chart="ranks"' in page
    assert "run of 4 ranks, rank 0: run_rank0.json" in page


def test_the_ranks_chart_and_table_show_the_ranks_figures(run_dir: Path, tmp_path: Path) -> None:
    page = write_report(run_dir, tmp_path / "r.html", "-j", "1")
    rows = cli_json("ranks", str(run_dir), "-j", "1")["ranks"]
    chart = embedded(page, "tv-charts")["ranks"]
    kernel, wait, busy = chart["data"]
    assert kernel["x"] == wait["x"] == busy["x"] == [r["rank"] for r in rows]
    assert kernel["y"] == [r["kernel_time_us"] / 1000 for r in rows]
    assert wait["y"] == [r["wait_us"] / 1000 for r in rows]
    assert busy["y"] == [r["busy_pct"] for r in rows] and busy["yaxis"] == "y2"
    assert kernel["marker"]["line"]["width"] == [2.5 if r["slowest"] else 0 for r in rows]
    assert [a["x"] for a in chart["layout"]["annotations"]] == [2]
    section = page[page.index('id="ranks"') : page.index('id="breakdown"')]
    assert section.count("★ slowest</td>") == 1
    assert "<td>2</td>" in section.split("★ slowest</td>")[0].rsplit("<tr>", 1)[1]
    assert "rank 0&#39;s trace alone" in section or "rank 0's trace alone" in section


def test_rank_picks_the_rank_the_sections_show(run_dir: Path, tmp_path: Path) -> None:
    page = write_report(run_dir, tmp_path / "r.html", "-j", "1", "--rank", "2")
    data = embedded(page, "tv-data")
    assert_rank_documents(data, rank_file(run_dir, 2))
    assert "rank 2: the sections below are of its trace" in page


def test_a_run_page_ends_once_its_cache_entry_is_written(run_dir: Path, tmp_path: Path) -> None:
    """The shown rank's entry is written on a thread: the command waits for it, so the next
    one (here, in the same process) never forks while it writes the index."""
    from traceview import cache

    write_report(run_dir, tmp_path / "r.html", "-j", "1")
    assert cache._writing == []


def test_one_trace_has_no_ranks_section(tmp_path: Path) -> None:
    page = write_report(DEMO, tmp_path / "r.html")
    assert "ranks" not in embedded(page, "tv-data")
    assert 'id="ranks"' not in page and 'data-chart="ranks"' not in page


def test_rank_errors_are_one_line(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = run_cli("report", str(run_dir), "-o", str(out), "--rank", "9", "-q", "-j", "1")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--rank 9: no such rank in this run (ranks: 0-3)" in r.stderr and not out.exists()
    r = run_cli("report", str(DEMO), "-o", str(out), "--rank", "1", "-q")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--rank 1: for a run (several rank files)" in r.stderr and not out.exists()
    r = run_cli("report", str(run_dir), "-o", str(next(run_dir.glob("*.json"))), "--force")
    assert r.returncode == 2 and "Traceback" not in r.stderr  # never over a rank's trace


def test_dlrm_run_page(tmp_path: Path) -> None:
    run = dlrm_dir(tmp_path)
    page = write_report(run, tmp_path / "r.html", "-j", "1")
    data = embedded(page, "tv-data")
    assert data["ranks"] == cli_json("ranks", str(run), "-j", "1")
    assert data["ranks"]["slowest"] == 7 and len(data["ranks"]["ranks"]) == 8
    assert data["summary"] == cli_json("summary", str(run / DLRM[0].name))

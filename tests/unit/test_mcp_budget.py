"""traceview mcp's budget (traceview.app.agent.budget) and confinement (.paths), without the
SDK: tables cut by rank to the most rows that fit, offset paging, paths refused."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest

from traceview.app.agent import budget
from traceview.app.agent.paths import Confinement
from traceview.errors import TraceviewError


def _frame(result: Any, cuts: list[budget.Cut]) -> dict[str, Any]:
    return {"left_out": [cut.as_json() for cut in cuts], "result": result}


def _result(rows: int) -> dict[str, Any]:
    return {
        "trace": {"path": "t.json", "devices": [{"device": 0}]},
        "bins": list(range(50)),  # numbers: never cut
        "steps": [{"step": i, "name": f"ProfilerStep#{i}", "pad": "x" * 40} for i in range(rows)],
        "largest": [{"gap": i, "us": i * 1.5} for i in range(rows // 2)],
    }


def test_tokens_are_utf8_bytes_over_three_rounded_up() -> None:
    assert budget.estimate_tokens("") == 0
    assert budget.estimate_tokens("abc") == 1
    assert budget.estimate_tokens("abcd") == 2
    assert budget.estimate_tokens("é") == 1  # two bytes
    assert budget.estimate_tokens("x" * 3000) == 1000


def test_an_answer_that_fits_is_the_result_whole() -> None:
    result = _result(4)
    assert budget.fit(result, 10_000, _frame) == {"left_out": [], "result": result}


@pytest.mark.parametrize("max_tokens", [300, 700, 1500])
def test_tables_keep_the_most_rows_that_fit(max_tokens: int) -> None:
    result = _result(80)
    answer = budget.fit(result, max_tokens, _frame)
    assert budget.estimate_tokens(budget.encode(answer)) <= max_tokens
    shown = answer["result"]
    k = max(len(shown["steps"]), len(shown["largest"]))
    assert shown["steps"] == result["steps"][:k]  # by rank: the first rows
    assert shown["largest"] == result["largest"][:k]
    assert shown["bins"] == result["bins"] and shown["trace"] == result["trace"]
    # one row more in each table would not fit: the largest k
    more = {**result, "steps": result["steps"][: k + 1], "largest": result["largest"][: k + 1]}
    cuts = [budget.Cut(("steps",), 1, k + 1, 80), budget.Cut(("largest",), 1, k + 1, 40)]
    assert budget.estimate_tokens(budget.encode(_frame(more, cuts))) > max_tokens
    cut = {c["table"]: c for c in answer["left_out"]}
    assert cut["steps"] == {"table": "steps", "first": 1, "shown": k, "of": 80}
    assert "trace.devices" not in cut  # whole


def test_offset_pages_the_tables_the_budget_cut() -> None:
    result = _result(80)
    first = budget.fit(result, 700, _frame)
    k = first["left_out"][0]["shown"]
    page = budget.fit(result, 700, _frame, offset=k)
    steps = page["result"]["steps"]
    assert steps[0] == result["steps"][k]
    cut = {c["table"]: c for c in page["left_out"]}
    assert cut["steps"]["first"] == k + 1 and cut["steps"]["of"] == 80
    assert page["result"]["trace"] == result["trace"]  # a whole table is not paged
    assert budget.estimate_tokens(budget.encode(page)) <= 700


def test_an_answer_over_budget_with_every_table_empty_is_still_sent() -> None:
    result = {"header": "h" * 3000, "rows": [{"a": 1}, {"a": 2}]}
    answer = budget.fit(result, 100, _frame)
    assert answer["result"] == {"header": "h" * 3000, "rows": []}
    assert math.ceil(len(budget.encode(answer)) / 3) > 100


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path, Path]:
    inside, outside, out = tmp_path / "in", tmp_path / "outside", tmp_path / "out"
    for d in (inside, outside, out):
        d.mkdir()
    (inside / "t.json").write_text("{}")
    (outside / "secret.json").write_text("{}")
    return inside, outside, out


def test_a_file_under_a_root_is_read_resolved(roots: tuple[Path, Path, Path]) -> None:
    inside, _, out = roots
    where = Confinement.of([inside], out)
    assert where.readable("t.json") == inside.resolve() / "t.json"
    assert where.readable(str(inside / "t.json")) == inside.resolve() / "t.json"


@pytest.mark.parametrize(
    ("make", "said"),
    [
        (lambda i, o: str(o / "secret.json"), "outside the roots"),
        (lambda i, o: "../outside/secret.json", "outside the roots"),
        (lambda i, o: os.symlink(o / "secret.json", i / "link.json") or "link.json", "outside"),
        (lambda i, o: os.mkfifo(i / "fifo.json") or "fifo.json", "a FIFO, not a file"),
        (lambda i, o: (i / "d").mkdir() or "d", "a directory, not a file"),
        (lambda i, o: "missing.json", "missing.json: no such file"),
        (lambda i, o: "-", "standard input is not served"),
    ],
    ids=["absolute", "dotdot", "symlink-out", "fifo", "directory", "missing", "stdin"],
)
def test_reads_are_refused_outside_roots_and_on_non_files(
    roots: tuple[Path, Path, Path], make: Any, said: str
) -> None:
    inside, outside, _ = roots
    where = Confinement.of([inside], None)
    with pytest.raises(TraceviewError, match=said):
        where.readable(make(inside, outside))


def test_a_device_is_refused() -> None:
    with pytest.raises(TraceviewError, match="/dev/null: a character device, not a file"):
        Confinement.of([Path("/dev")], None).readable("/dev/null")


def test_writes_go_only_to_new_files_in_the_out_dir(roots: tuple[Path, Path, Path]) -> None:
    inside, outside, out = roots
    with pytest.raises(TraceviewError, match="--out-dir"):
        Confinement.of([inside], None).writable("cut.json.gz")
    where = Confinement.of([inside], out)
    assert where.writable("cut.json.gz") == out.resolve() / "cut.json.gz"
    (out / "old.json.gz").write_text("")
    os.symlink(outside / "nothing-yet", out / "dangling.json.gz")
    for name, said in [
        ("old.json.gz", "exists"),
        ("dangling.json.gz", "exists"),
        ("../in/t.json", "outside the out-dir"),
        (str(outside / "x.json.gz"), "outside the out-dir"),
        ("sub/x.json.gz", "no such directory"),
    ]:
        with pytest.raises(TraceviewError, match=said):
            where.writable(name)
    assert not (outside / "nothing-yet").exists()


def test_roots_must_be_directories(tmp_path: Path) -> None:
    with pytest.raises(TraceviewError, match=r"--root .*: not a directory"):
        Confinement.of([tmp_path / "nope"], None)

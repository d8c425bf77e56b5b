"""nsys exports at the edges (issue #34): text that is not UTF-8, NULL strings, a StringIds
table without its primary key."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from nsys_writer import kineto_to_nsys

from traceview.columns.nsys import collect_nsys
from traceview.read.nsys import Export


def _export(path: Path, ops: int = 2) -> Path:
    """An export of one kernel and ``ops`` NVTX ranges (half by text, half by textId)."""
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
    ]  # fmt: skip
    events += [
        {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i}", "pid": 1, "tid": 1, "ts": 2 * i,
         "dur": 1}
        for i in range(ops)
    ]  # fmt: skip
    kineto_to_nsys({"traceEvents": events}, path)
    return path


def _without_primary_key(db: sqlite3.Connection) -> None:
    db.executescript(
        "CREATE TABLE s2 (id INTEGER, value TEXT); INSERT INTO s2 SELECT * FROM StringIds;"
        "DROP TABLE StringIds; ALTER TABLE s2 RENAME TO StringIds;"
    )


def test_text_that_is_not_utf8_becomes_replacement_characters(tmp_path: Path) -> None:
    path = _export(tmp_path / "t.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("UPDATE StringIds SET value = CAST(X'67656D6DE9' AS TEXT) WHERE value = 'gemm'")
        db.execute("UPDATE NVTX_EVENTS SET text = CAST(X'6F70E9' AS TEXT) WHERE text IS NOT NULL")
    db.close()
    r = run_cli("kernels", str(path), "-f", "json", "--no-cache")
    assert r.returncode == 0, r.stderr
    assert [k["name"] for k in json.loads(r.stdout)["kernels"]] == ["gemm\ufffd"]
    ops = run_cli("ops", str(path), "-f", "json", "--no-cache")
    assert ops.returncode == 0, ops.stderr


def test_a_null_string_is_not_shown_as_none(tmp_path: Path) -> None:
    path = _export(tmp_path / "t.sqlite")
    with sqlite3.connect(path) as db:
        _without_primary_key(db)
        db.execute("UPDATE StringIds SET value = NULL WHERE value = 'gemm'")
    db.close()
    r = run_cli("kernels", str(path), "-f", "json", "--no-cache")
    assert r.returncode == 0, r.stderr
    (name,) = [k["name"] for k in json.loads(r.stdout)["kernels"]]
    assert name != "None" and name.startswith("<StringIds ")


def _sqlite_steps(path: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """SQLite virtual-machine steps (in thousands) that reading ``path`` with CPU rows takes:
    a measure of work that does not depend on the machine's load."""
    steps = [0]
    real = Export.__init__

    def counting(self: Export, path: Path) -> None:
        real(self, path)
        self._db.set_progress_handler(lambda: steps.__setitem__(0, steps[0] + 1) or 0, 1000)

    with monkeypatch.context() as m:
        m.setattr(Export, "__init__", counting)
        m.setenv("TRACEVIEW_NSYS_SPLIT_MIN_ROWS", str(1 << 40))  # one process: all counted
        collect_nsys(path, keep_cpu=True)
    return steps[0]


def test_nvtx_text_without_a_primary_key_is_not_looked_up_per_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = []
    for n in (1_000, 8_000):
        path = _export(tmp_path / f"t{n}.sqlite", ops=n)
        with sqlite3.connect(path) as db:
            _without_primary_key(db)
        db.close()
        steps.append(_sqlite_steps(path, monkeypatch))
    # A scan of StringIds per range is quadratic: 8x the ranges, ~64x the steps (16k ranges
    # of a 4.4 MB export took 39 s); linear is ~8x.
    assert steps[1] < 16 * steps[0], steps

"""Counts agree with their nouns (``1 launch``, ``1 more kernel``) in headers and footers, and
stderr keeps each message on one line when it is not a terminal."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ROOT, run_cli

DEMO = str(ROOT / "fixtures" / "demo.json.gz")


def _one_kernel(tmp_path: Path) -> str:
    doc = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
                            "ts": 1, "dur": 2, "args": {"device": 0, "stream": 7}}]}  # fmt: skip
    path = tmp_path / "one.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_one_of_everything_is_singular(tmp_path: Path) -> None:
    r = run_cli("kernels", _one_kernel(tmp_path), "-q", "--no-cache")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "1 event, span" in lines[0]
    assert lines[1].startswith("gpu      1 device") and lines[1].endswith(", 1 stream")
    assert "kernel   1 launch, 1 distinct, total 2.0 µs" in lines
    assert lines[-1] == "1 kernel shown"


def test_one_more_row_is_singular() -> None:
    r = run_cli("kernels", DEMO, "-q", "--top", "49")
    assert r.stdout.splitlines()[-1] == (
        "1 more kernel not shown (6 launches, 15.2 µs); use --top 0 for all"
    )
    r = run_cli("gaps", DEMO, "-q", "--gap-top", "188")
    assert "1 more transition not shown; use --gap-top 0 for all" in r.stdout.splitlines()
    r = run_cli("ops", DEMO, "-q", "--top", "28")
    assert r.stdout.splitlines()[-1] == "1 more op not shown; use --top 0 for all"


def test_many_stay_plural() -> None:
    r = run_cli("kernels", DEMO, "-q", "--top", "48")
    assert r.stdout.splitlines()[-1].startswith("2 more kernels not shown (")
    r = run_cli("kernels", DEMO, "-q", "--top", "0")
    assert r.stdout.splitlines()[-1] == "all 50 kernels shown"


def test_piped_stderr_is_not_wrapped() -> None:
    name = "no_such_kernel_" * 20  # longer than run_cli's 200 columns
    r = run_cli("kernels", DEMO, "-q", "--name", name)
    assert r.stderr == f"traceview: warning: --name '{name}' matches no kernel of this trace\n"

"""Golden outputs of every command as the CLI prints them, piped text and JSON: on the demo
trace, on the H200 training trace (with its power log), on the 8-rank DLRM run and (memory) on
the TraceLens bert-small H100 and MI300 traces. The inputs are linked into a temporary directory
and named relatively, so no machine's path shows. Run
``pytest tests/golden/test_command_goldens.py --update-goldens`` after an intended change, and
review the diff of tests/golden/expected/commands/."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, SHARED_TRACES
from typer.testing import CliRunner

from traceview.cli import app

EXPECTED = Path(__file__).parent / "expected" / "commands"
INPUTS = {
    "demo.json.gz": ROOT / "fixtures" / "demo.json.gz",
    "train.json.gz": SHARED_TRACES / "h200" / "train.json.gz",
    "power1.csv": SHARED_TRACES / "h200" / "power1.csv",
    "bert-h100.json.gz": SHARED_TRACES
    / "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "bert-mi300.json.gz": SHARED_TRACES
    / "tracelens__mi300__gaunernst_bert-small-uncased__1016001.json.gz",
    **{
        f"dlrm/rank{r}.json.gz": SHARED_TRACES / f"param__dlrm_8rank_worker{r}.json.gz"
        for r in range(8)
    },
}
POWER = ["--power", "power1.csv", "--power-tz", "UTC"]
# name: the command line after ``traceview`` (text piped; the JSON golden adds ``-f json``).
CASES = {
    "demo-summary": ["summary", "demo.json.gz"],
    "demo-kernels": ["kernels", "demo.json.gz"],
    "demo-gaps": ["gaps", "demo.json.gz"],
    "demo-steps": ["steps", "demo.json.gz"],
    "demo-ops": ["ops", "demo.json.gz"],
    "demo-unique": ["unique", "demo.json.gz"],
    "train-summary": ["summary", "train.json.gz"],
    "train-kernels-category": ["kernels", "train.json.gz", "--group-by", "category"],
    "train-ops": ["ops", "train.json.gz"],
    "train-ops-shapes": ["ops", "train.json.gz", "--group-by", "op+shapes"],
    "train-gaps": ["gaps", "train.json.gz"],
    "train-energy": ["energy", "train.json.gz", *POWER],
    "train-unique-power": ["unique", "train.json.gz", *POWER],
    "dlrm-ranks": ["ranks", "dlrm"],
    "demo-memory": ["memory", "demo.json.gz"],
    "bert-h100-memory": ["memory", "bert-h100.json.gz"],
    "bert-mi300-memory": ["memory", "bert-mi300.json.gz"],
    "demo-source": ["source", "demo.json.gz"],
    "bert-h100-source-module": ["source", "bert-h100.json.gz", "--by", "module", "--top", "12"],
}
JSON_ONLY = {"demo-snapshot": ["snapshot", "demo.json.gz"]}
# Shown on a terminal of 80 and of 120 columns as well (rich tables, hanging lines).
TERMINAL = ("demo-summary", "demo-kernels", "train-summary", "train-ops", "train-ops-shapes",
            "train-gaps", "train-energy", "train-unique-power", "dlrm-ranks")  # fmt: skip


def _run(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, columns: int | None = None
) -> str:
    """The command's stdout, run in-process from a directory holding links to its inputs;
    ``columns``: as a terminal of that width shows it (else piped)."""
    for name, source in INPUTS.items():
        if name.split("/")[0] in " ".join(args) or name in args:
            if not source.exists():
                pytest.skip("../shared/traces is absent")
            link = tmp_path / name
            link.parent.mkdir(exist_ok=True)
            link.symlink_to(source)
    monkeypatch.chdir(tmp_path)
    if columns is not None:
        from rich.console import Console

        from traceview.app import commands

        monkeypatch.setattr(commands, "stdout_is_terminal", lambda: True)
        monkeypatch.setattr(
            commands,
            "_stdout_console",
            lambda wide=False: Console(highlight=False, width=columns, color_system=None),
        )
    r = CliRunner().invoke(app, [*args, "-q", "--no-cache"], env={"COLUMNS": "120"})
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize("case", list(CASES))
def test_command_golden(
    case: str,
    fmt: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    args = CASES[case] + (["-f", "json"] if fmt == "json" else [])
    _check(
        f"{case}.{'json' if fmt == 'json' else 'txt'}", _run(args, tmp_path, monkeypatch), request
    )


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("case", TERMINAL)
def test_terminal_golden(
    case: str,
    columns: int,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """On a terminal: every line within its width, the golden as a person sees it."""
    out = _run(CASES[case], tmp_path, monkeypatch, columns)
    assert all(len(line) <= columns for line in out.splitlines()), out
    _check(f"{case}-{columns}.txt", out, request)


@pytest.mark.parametrize("case", list(JSON_ONLY))
def test_json_only_golden(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    _check(f"{case}.json", _run(JSON_ONLY[case], tmp_path, monkeypatch), request)


def _check(name: str, out: str, request: pytest.FixtureRequest) -> None:
    path = EXPECTED / name
    if request.config.getoption("--update-goldens"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(out)
        return
    assert path.exists(), f"{path.name} missing: run pytest --update-goldens"
    assert out == path.read_text(), f"{path.name} differs (pytest --update-goldens if meant)"

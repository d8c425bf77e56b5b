"""Options: bad values are usage errors before any trace is opened; the read flags are shared
by every reading command; every error a command raises is one line with its exit code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from conftest import ROOT
from typer.testing import CliRunner

from traceview.app import commands, runs
from traceview.app import source as app_source
from traceview.cli import app
from traceview.options import ReadOptions

DEMO = ROOT / "fixtures" / "demo.json.gz"
COMMANDS = typer.main.get_command(app).commands  # type: ignore[attr-defined]
# cache takes no trace; record runs a program (its trace is read with the defaults); mcp
# serves the other commands (each reads with its own flags)
READING = sorted(name for name in COMMANDS if name not in ("cache", "record", "mcp"))
runner = CliRunner()


@pytest.fixture(scope="module")
def fifo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A trace that cannot be read: the reader refuses a FIFO (exit 1, or it would block on
    opening it), so an exit 2 with the usage error shows that the check came first."""
    path = tmp_path_factory.mktemp("fifo") / "trace.json"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["kernels", "T", "--sort", "bogus"], "--sort 'bogus': expected one of count, duration,"),
        (["kernels", "T", "-s", "Total"], "-s 'Total': expected one of count, duration,"),
        (["kernels", "T", "--group-by", "x"], "--group-by 'x': expected one of name, short, cat"),
        (["kernels", "T", "-f", "xml"], "-f 'xml': expected one of table, json, csv, md"),
        (["kernels", "T", "--include", "memcpy,foo"], "--include: unknown kind 'foo'"),
        (["kernels", "T", "--name", "("], "--name '(': not a valid regular expression"),
        (["kernels", "T", "--pstep", "5-3"], "--pstep '5-3': range 5-3 runs backwards"),
        (["kernels", "T", "--top", "-1"], "--top -1: must be at least 0"),
        (["kernels", "T", "--step-regex", "("], "--step-regex '(': not a valid regular exp"),
        (["gaps", "T", "--gap-sort", "bogus"], "--gap-sort 'bogus': expected one of count,"),
        (["gaps", "T", "--busy", "kernel,foo"], "--busy: unknown kind 'foo'"),
        (["gaps", "T", "--hist-min", "0"], "--hist-min: must not be zero on a log scale"),
        (["gaps", "T", "--min-gap", "5xs"], "--min-gap '5xs': expected a number with ns, us"),
        (["gaps", "T", "--bins", "0"], "--bins 0: must be at least 1"),
        (["gaps", "T", "--format", "xml"], "--format 'xml': expected one of table, json, csv"),
        (["steps", "T", "-f", "xml"], "-f 'xml': expected one of table, json, csv, md"),
        (["summary", "T", "-f", "csv"], "-f 'csv': expected one of table, json, md"),
        (["ops", "T", "--level", "mid"], "--level 'mid': expected one of leaf, top"),
        (["diff", "T", "T", "--group-by", "x"], "--group-by 'x': expected one of name, short"),
        (["diff", "T", "T", "-f", "csv"], "-f 'csv': expected one of table, json, md"),
        (["diff", "T", "T", "--max-regression", "x"], "--max-regression 'x': expected a perc"),
        (["diff", "T", "T", "--min-share", "150%"], "--min-share 150%: must be at most 100%"),
    ],
)
def test_a_bad_value_is_a_usage_error_before_the_trace_is_opened(
    fifo: Path, args: list[str], said: str
) -> None:
    typed = [str(fifo) if a == "T" else a for a in args]
    r = subprocess.run(
        [sys.executable, "-m", "traceview", *typed, "-q", "--no-cache"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"traceview: error: {said}") and r.stderr.count("\n") == 1
    assert r.stdout == ""


def _invocation(name: str, tmp_path: Path) -> list[str]:
    """The command with every argument and required option given."""
    args = [name]
    for param in COMMANDS[name].params:
        if param.param_type_name == "argument":
            args.append(str(DEMO))
        elif param.required:
            args += [param.opts[0], str(tmp_path / "out")]
    return args


def _captured(monkeypatch: pytest.MonkeyPatch, name: str) -> list[ReadOptions]:
    """Replace commands.<name> (runs.ranks for ``ranks``, app.source.source for ``source``)
    with a recorder of the ReadOptions it is given."""
    seen: list[ReadOptions] = []

    def record(*args: object, **kwargs: object) -> None:
        seen.extend(a for a in (*args, *kwargs.values()) if isinstance(a, ReadOptions))

    module = {"ranks": runs, "source": app_source}.get(name, commands)
    monkeypatch.setattr(module, name.replace("-", "_"), record)
    return seen


@pytest.mark.parametrize("name", READING)
def test_every_reading_command_takes_every_read_flag(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _captured(monkeypatch, name)
    flags = ["--partial", "-q", "--strict", "--no-cache", "--refresh", "--verify"]
    flags += ["--cache-dir", str(tmp_path / "c"), "--step-regex", r"Step (\d+)"]
    r = runner.invoke(app, [*_invocation(name, tmp_path), *flags])
    assert r.exit_code == 0, r.output
    want = ReadOptions(True, True, True, False, True, tmp_path / "c", True, r"Step (\d+)")
    assert seen == [want]
    r = runner.invoke(app, _invocation(name, tmp_path))
    assert r.exit_code == 0, r.output
    assert seen == [want, ReadOptions()]


@pytest.mark.parametrize("name", READING)
def test_the_read_flags_are_the_same_option_everywhere(name: str) -> None:
    def shared(command: str) -> dict[str, tuple[object, ...]]:
        return {
            p.name: (tuple(p.opts), getattr(p, "help", None))
            for p in COMMANDS[command].params
            if p.name in ("partial", "quiet", "strict", "no_cache", "refresh", "cache_dir")
            or p.name in ("verify", "step_regex")
        }

    assert len(shared(name)) == 8
    assert shared(name) == shared("kernels")
    assert "read" not in {p.name for p in COMMANDS[name].params}


@pytest.mark.parametrize(
    ("raised", "code", "said"),
    [
        (PermissionError(13, "Permission denied", "/x/t.json"), 1, "/x/t.json: Permission denied"),
        (MemoryError(), 1, "out of memory"),
        (KeyboardInterrupt(), 130, None),
        (ValueError("a bug"), 1, None),
    ],
)
def test_whatever_a_command_raises_is_one_line(
    monkeypatch: pytest.MonkeyPatch, raised: BaseException, code: int, said: str | None
) -> None:
    def fail(*args: object) -> None:
        raise raised

    monkeypatch.setattr(commands, "kernels", fail)
    monkeypatch.delenv("TRACEVIEW_DEBUG", raising=False)
    r = runner.invoke(app, ["kernels", str(DEMO)])
    assert r.exit_code == code
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    if said is not None:
        assert r.stderr == f"traceview: error: {said}\n"
    elif code == 130:
        assert r.stderr == "traceview: interrupted\n"
    else:
        assert r.stderr.startswith("traceview: internal error (please report it;")
        assert r.stderr.endswith("ValueError: a bug\n")

"""The entry point imports only the module of the command it runs (start-up time on every
call), yet help, unknown commands and ``traceview.cli.app`` see every command."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer

from tests.conftest import ROOT, run_cli
from traceview.cli import COMMANDS, app

# Run main() as the console script does, then list the command modules it imported.
_PROBE = """
import atexit, sys
from traceview.cli import main
atexit.register(lambda: print(sorted(m for m in sys.modules if m.startswith("traceview.cli.")
    and m.rsplit(".", 1)[1] in __import__("traceview.cli").cli.COMMANDS), file=sys.stderr))
sys.argv = ["traceview", *sys.argv[1:]]
main()
"""


def _imported_commands(*args: str) -> list[str]:
    r = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    return [m.rsplit(".", 1)[1] for m in eval(r.stderr.strip().splitlines()[-1])]


@pytest.mark.parametrize("name", ["kernels", "cache", "trim"])
def test_a_named_command_imports_only_its_module(name: str) -> None:
    assert _imported_commands(name, "--help") == [name]


@pytest.mark.parametrize("args", [[], ["--help"], ["kernel"], ["--version"], ["-h", "gaps"]])
def test_anything_else_gets_every_command(args: list[str]) -> None:
    assert sorted(_imported_commands(*args)) == sorted(COMMANDS)


def test_the_list_and_the_suggestion_are_whole() -> None:
    listed = run_cli("--help")
    assert listed.returncode == 0
    at = {name: listed.stdout.find(f"│ {name} ") for name in COMMANDS}
    assert -1 not in at.values()
    order = [at[name] for name in COMMANDS if name != "cache"]  # typer lists groups last
    assert order == sorted(order)
    typo = run_cli("kernel", "x")
    assert typo.returncode == 2
    assert "Did you mean 'kernels'?" in typo.stderr


def test_the_app_has_every_command() -> None:
    group = typer.main.get_command(app)
    assert sorted(group.commands) == sorted(COMMANDS)  # type: ignore[attr-defined]

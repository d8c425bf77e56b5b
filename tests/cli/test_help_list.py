"""The command lists of ``traceview --help`` and ``traceview cache --help`` give each command's
first docstring paragraph as one line, not broken where the docstring wraps."""

from __future__ import annotations

import inspect
import re

import pytest
import typer
from typer.testing import CliRunner

from traceview.cli import app


@pytest.mark.parametrize("args", [[], ["cache"]])
def test_each_command_is_one_line_in_the_list(args: list[str]) -> None:
    r = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    group = typer.main.get_command(app)
    for name in args:
        group = group.commands[name]  # type: ignore[attr-defined]
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        if hasattr(command, "commands"):  # a group (cache)
            continue
        doc = inspect.getdoc(command.callback) or ""
        first = " ".join(doc.split("\n\n")[0].split())
        assert re.search(rf"│ {name} +{re.escape(first)} +│", r.stdout), (name, first)

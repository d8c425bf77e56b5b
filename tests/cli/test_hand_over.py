"""``summary`` and ``ops`` hand their read over to the analysis, which drops the runtime calls
(16 B a call) once done with them (summary: after audit's checks and the links; ops: once
linked): nothing holds them through the analyses after. (Their outputs equal an earlier
revision's on every shared trace: checked when this was made, not here.)"""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from typer.testing import CliRunner

from traceview.analyses import summary as summary_module
from traceview.analyses.ops import view
from traceview.app import commands
from traceview.cli import app
from traceview.columns.model import TraceEvents

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo.json.gz"


def _runtime_alive(
    monkeypatch: pytest.MonkeyPatch, module: ModuleType, stage: str, args: list[str]
) -> tuple[list[bool], str]:
    """Whether the read's runtime calls are alive each time ``module.stage`` starts, in a
    run of the command line with ``args`` on the demo trace; and its output."""
    seen: list[weakref.ref[Any]] = []
    alive: list[bool] = []
    read, stage_function = commands.read_trace, getattr(module, stage)

    def reading(*a: Any, **k: Any) -> TraceEvents:
        events = read(*a, **k)
        seen.append(weakref.ref(events.runtime.correlation))
        return events

    def starting(*a: Any, **k: Any) -> Any:
        gc.collect()
        alive.append(seen[-1]() is not None)
        return stage_function(*a, **k)

    monkeypatch.setattr(commands, "read_trace", reading)
    monkeypatch.setattr(module, stage, starting)
    command, *rest = args
    r = CliRunner().invoke(app, [command, str(DEMO), "-q", "--no-cache", *rest])
    assert r.exit_code == 0, r.output
    return alive, r.output


def test_summary_lets_go_of_the_runtime_calls_once_its_checks_are_done(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alive, _ = _runtime_alive(monkeypatch, summary_module, "work_out", ["summary", "-f", "json"])
    assert alive == [False]


def test_ops_lets_go_of_the_runtime_calls_once_linked(monkeypatch: pytest.MonkeyPatch) -> None:
    alive, output = _runtime_alive(monkeypatch, view, "_by_kernel", ["ops", "-f", "json"])
    assert alive == [False] and json.loads(output)["ops"]


def test_the_csv_of_every_op_keeps_them_for_its_second_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    every = CliRunner().invoke(
        app, ["ops", str(DEMO), "-q", "--no-cache", "--top", "0", "-f", "json"]
    )
    args = ["ops", "-f", "csv", "--top", "1"]
    alive, output = _runtime_alive(monkeypatch, view, "_by_kernel", args)
    assert alive == [True, True]
    assert len(output.splitlines()) == len(json.loads(every.output)["ops"]) + 1

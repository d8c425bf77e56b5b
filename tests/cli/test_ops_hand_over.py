"""``ops`` hands its read over to analyse_ops, which drops the runtime calls (16 B a call)
once the ops are linked: nothing holds them through the kernels' figures after. (Its output
equals an earlier revision's on every shared trace: checked when this was made, not here.)"""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from traceview.analyses.ops import view
from traceview.app import commands
from traceview.cli import app
from traceview.columns.model import TraceEvents

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo.json.gz"


def _runtime_alive(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> tuple[list[bool], str]:
    """Whether the read's runtime calls are alive when each kernels' pass starts."""
    seen: list[weakref.ref[Any]] = []
    alive: list[bool] = []
    read, by_kernel = commands.read_trace, view._by_kernel

    def reading(*a: Any, **k: Any) -> TraceEvents:
        events = read(*a, **k)
        seen.append(weakref.ref(events.runtime.correlation))
        return events

    def kernels(*a: Any, **k: Any) -> Any:
        gc.collect()
        alive.append(seen[-1]() is not None)
        return by_kernel(*a, **k)

    monkeypatch.setattr(commands, "read_trace", reading)
    monkeypatch.setattr(view, "_by_kernel", kernels)
    r = CliRunner().invoke(app, ["ops", str(DEMO), "-q", "--no-cache", *args])
    assert r.exit_code == 0, r.output
    return alive, r.output


def test_ops_lets_go_of_the_runtime_calls_once_linked(monkeypatch: pytest.MonkeyPatch) -> None:
    alive, output = _runtime_alive(monkeypatch, ["-f", "json"])
    assert alive == [False] and json.loads(output)["ops"]


def test_the_csv_of_every_op_keeps_them_for_its_second_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    every = CliRunner().invoke(
        app, ["ops", str(DEMO), "-q", "--no-cache", "--top", "0", "-f", "json"]
    )
    alive, output = _runtime_alive(monkeypatch, ["-f", "csv", "--top", "1"])
    assert alive == [True, True]
    assert len(output.splitlines()) == len(json.loads(every.output)["ops"]) + 1

"""Golden outputs: kernels, gaps, steps and diff as a person sees them on an 80-, a 120- and a
200-column terminal, and piped, on the demo trace and two real traces. Run
``pytest tests/test_goldens.py --update-goldens`` after an intended change, and review the diff
of tests/goldens/."""

from __future__ import annotations

import functools
import io
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import ROOT, SHARED_TRACES
from rich.console import Console

from traceview.analyses.diff import DiffOptions, Side, compare
from traceview.analyses.gaps import GapOptions, analyse_gaps
from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.analyses.snapshot import build_snapshot
from traceview.analyses.steps import step_table
from traceview.analyses.summary import summarize
from traceview.events import TraceEvents
from traceview.parallel import collect_events
from traceview.read.reader import TraceReader
from traceview.render import diff as render_diff
from traceview.render import gaps as render_gaps
from traceview.render import kernels as render_kernels
from traceview.render import steps as render_steps
from traceview.render.document import print_rich, to_plain

GOLDENS = Path(__file__).parent / "goldens"
TRACES = {
    "demo": ROOT / "fixtures" / "demo.json.gz",
    "ns_resolution": SHARED_TRACES
    / "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.json.gz",
    "resnet50": SHARED_TRACES / "kineto__resnet50_profiler_api_nw0.json.gz",
}
WIDTHS = (80, 120, 200)
Rich = Callable[[Console], None]


@functools.cache
def _events(name: str) -> TraceEvents:
    """The trace, named ``<name>`` in the output (its path differs from machine to machine)."""
    return replace(collect_events(TraceReader(TRACES[name]), keep_cpu=True), path=f"<{name}>")


def _renderings(name: str, command: str) -> tuple[Rich, Callable[[], str]]:
    events = _events(name)
    if command == "kernels":
        doc = render_kernels.document(analyse_kernels(events, KernelOptions(top=8)), False)
        return (lambda c: print_rich(doc, c)), lambda: to_plain(doc)
    if command == "gaps":
        g = analyse_gaps(events, GapOptions(top=5, largest=5))
        doc = render_gaps.document(g, False)
        return (lambda c: print_rich(doc, c)), lambda: to_plain(doc)
    if command == "steps":
        doc = render_steps.document(summarize(events), step_table(events))
        return (lambda c: print_rich(doc, c)), lambda: to_plain(doc)
    snapshot = build_snapshot(events)
    d = compare(Side("base", "trace", snapshot), Side("new", "trace", snapshot), DiffOptions(top=8))
    doc = render_diff.document(d, False)
    return (lambda c: print_rich(doc, c)), lambda: to_plain(doc)


@pytest.mark.parametrize("command", ["kernels", "gaps", "steps", "diff"])
@pytest.mark.parametrize("name", list(TRACES))
def test_golden_output(name: str, command: str, request: pytest.FixtureRequest) -> None:
    if not TRACES[name].exists():
        pytest.skip("../shared/traces is absent")
    rich, text = _renderings(name, command)
    outputs = {"piped": text()}
    for width in WIDTHS:
        console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
        rich(console)
        outputs[f"{width}"] = console.file.getvalue()  # type: ignore[attr-defined]
    update = request.config.getoption("--update-goldens")
    for where, out in outputs.items():
        path = GOLDENS / f"{name}-{command}-{where}.txt"
        if update:
            path.parent.mkdir(exist_ok=True)
            path.write_text(out)
            continue
        assert path.exists(), f"{path.name} missing: run pytest --update-goldens"
        assert out == path.read_text(), f"{path.name} differs (pytest --update-goldens if meant)"
        if where != "piped":
            assert all(len(line) <= int(where) for line in out.splitlines()), where

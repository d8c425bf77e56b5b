"""Golden outputs: kernels, gaps, steps and diff as a person sees them on an 80-, a 120- and a
200-column terminal, and piped, on the demo trace and two real traces. Run
``pytest tests/golden/test_goldens.py --update-goldens`` after an intended change, and
review the diff of tests/golden/expected/."""

from __future__ import annotations

import functools
import io
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import ROOT, SHARED_TRACES, load_generator
from rich.console import Console

from traceview.analyses.core.steps import step_table
from traceview.analyses.core.trace import summarize
from traceview.analyses.diff import DiffOptions, DiffReport, Side, compare
from traceview.analyses.gaps import GapOptions, analyse_gaps
from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.analyses.snapshot import build_snapshot
from traceview.columns.model import TraceEvents
from traceview.columns.parallel import collect_events
from traceview.read.reader import TraceReader
from traceview.render import diff as render_diff
from traceview.render import gaps as render_gaps
from traceview.render import kernels as render_kernels
from traceview.render import steps as render_steps
from traceview.render.document import print_rich, to_plain

GOLDENS = Path(__file__).parent / "expected"
TRACES = {
    "demo": ROOT / "fixtures" / "demo.json.gz",
    "ns_resolution": SHARED_TRACES
    / "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.json.gz",
    "resnet50": SHARED_TRACES / "kineto__resnet50_profiler_api_nw0.json.gz",
}
# Diffs with changes on both sides: (base, new) traces; "demo2" is the README's second run
# (fixtures/generate.py --seed 2), generated when first needed.
PAIRS = {
    "demo-vs-seed2": ("demo", "demo2"),
    "bert-h100-vs-mi300": ("bert_h100", "bert_mi300"),
}
TRACES.update(
    bert_h100=SHARED_TRACES / "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz",
    bert_mi300=SHARED_TRACES / "tracelens__mi300__gaunernst_bert-small-uncased__1016001.json.gz",
)
WIDTHS = (80, 120, 200)
# The demo's steps and streams tables cut short, so that the line saying what they left out is
# seen at every width (the real traces' tables are shown whole, as with the CLI's defaults).
STEP_TOP = {"demo": 4}
STREAM_TOP = {"demo": 5}
Rich = Callable[[Console], None]


@functools.cache
def _events(name: str) -> TraceEvents:
    """The trace, named ``<name>`` in the output (its path differs from machine to machine)."""
    return replace(collect_events(TraceReader(_path(name)), keep_cpu=True), path=f"<{name}>")


@functools.cache
def _path(name: str) -> Path:
    if name != "demo2":
        return TRACES[name]
    path = Path(_GENERATED.name) / "demo2.json.gz"
    load_generator().write_trace(path, seed=2)
    return path


_GENERATED = tempfile.TemporaryDirectory(prefix="traceview-goldens-")  # removed at exit


def _renderings(name: str, command: str) -> tuple[Rich, Callable[[], str]]:
    events = _events(name)
    if command == "kernels":
        doc = render_kernels.document(analyse_kernels(events, KernelOptions(top=8)), False)
        return (lambda c: print_rich(doc, c)), lambda: to_plain(doc)
    if command == "gaps":
        g = analyse_gaps(events, GapOptions(top=5, largest=5, stream_top=STREAM_TOP.get(name, 100)))
        doc = render_gaps.document(g, False)
        return (lambda c: print_rich(doc, c)), lambda: to_plain(doc)
    if command == "steps":
        top = STEP_TOP.get(name, 100)
        doc = render_steps.document(summarize(events), step_table(events), top)
        return (lambda c: print_rich(doc, c)), lambda: to_plain(doc)
    snapshot = build_snapshot(events)
    d = compare(Side("base", "trace", snapshot), Side("new", "trace", snapshot), DiffOptions(top=8))
    return _diff_renderings(d)


def _diff_renderings(d: DiffReport) -> tuple[Rich, Callable[[], str]]:
    doc = render_diff.document(d, False)
    return (lambda c: print_rich(doc, c)), lambda: to_plain(doc)


@pytest.mark.parametrize("command", ["kernels", "gaps", "steps", "diff"])
@pytest.mark.parametrize("name", [n for n in TRACES if not n.startswith("bert")])
def test_golden_output(name: str, command: str, request: pytest.FixtureRequest) -> None:
    if not TRACES[name].exists():
        pytest.skip("../shared/traces is absent")
    _check(f"{name}-{command}", *_renderings(name, command), request)


@pytest.mark.parametrize("pair", list(PAIRS))
def test_golden_diff_with_changes(pair: str, request: pytest.FixtureRequest) -> None:
    """Kernels that changed, new and vanished ones, and a gate that fails: the Gate column
    and the failures as a person sees them."""
    base, new = PAIRS[pair]
    if not all(name == "demo2" or TRACES[name].exists() for name in (base, new)):
        pytest.skip("../shared/traces is absent")
    sides = [Side(f"<{n}>", "trace", build_snapshot(_events(n))) for n in (base, new)]
    d = compare(*sides, DiffOptions(top=8, max_regression_pct=5))
    _check(f"{pair}-diff", *_diff_renderings(d), request)


def _check(stem: str, rich: Rich, text: Callable[[], str], request: pytest.FixtureRequest) -> None:
    """The output piped and at each width equals its golden (or becomes it on update)."""
    outputs = {"piped": text()}
    for width in WIDTHS:
        console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
        rich(console)
        outputs[f"{width}"] = console.file.getvalue()  # type: ignore[attr-defined]
    update = request.config.getoption("--update-goldens")
    for where, out in outputs.items():
        path = GOLDENS / f"{stem}-{where}.txt"
        if update:
            path.parent.mkdir(exist_ok=True)
            path.write_text(out)
            continue
        assert path.exists(), f"{path.name} missing: run pytest --update-goldens"
        assert out == path.read_text(), f"{path.name} differs (pytest --update-goldens if meant)"
        if where != "piped":
            assert all(len(line) <= int(where) for line in out.splitlines()), where

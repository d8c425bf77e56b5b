"""Reading in two processes gives exactly what reading serially gives."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, load_generator

from traceview.analyses.gaps import GapOptions, analyse_gaps
from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.analyses.steps import step_table
from traceview.events import TraceEvents, collect_events
from traceview.read.reader import TraceReader
from traceview.render.kernels import as_json

generate = load_generator()


def read(path: Path, parallel: bool, monkeypatch: pytest.MonkeyPatch) -> TraceEvents:
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1" if parallel else str(1 << 60))
    return collect_events(TraceReader(path, block_size=64 << 10), keep_cpu=True)


def summary(events: TraceEvents) -> tuple:
    kernels = as_json(analyse_kernels(events, KernelOptions(top=0)))
    gaps = analyse_gaps(events, GapOptions(top=0)).as_json()
    steps = [row.as_dict() for row in step_table(events)]
    return json.dumps(kernels, sort_keys=True), json.dumps(gaps, sort_keys=True), steps


@pytest.mark.parametrize("layout", ["kineto", "lines"])
@pytest.mark.parametrize("ts_mode", ["int", "ns"])
@pytest.mark.parametrize("hostile", [False, True])
def test_parallel_equals_serial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str, ts_mode: str, hostile: bool
) -> None:
    path = tmp_path / "t.json"
    generate.write_trace(
        path, steps=8, seed=3, layout=layout, ts_mode=ts_mode, hostile_names=hostile
    )
    serial = read(path, False, monkeypatch)
    parallel = read(path, True, monkeypatch)
    assert parallel.read.events == serial.read.events
    if not hostile:  # hostile names may make a part fall back to serial reading: also fine
        assert parallel.read.chunks > serial.read.chunks  # it really read in two parts
    assert summary(parallel) == summary(serial)


def test_a_bad_split_falls_back_to_serial(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "nested.json"
    shutil.copy(ROOT / "fixtures" / "edge" / "nested_args_arrays.json", path)
    assert summary(read(path, True, monkeypatch)) == summary(read(path, False, monkeypatch))


def test_compact_files_without_newlines_are_read_serially(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "compact.json"
    generate.write_trace(path, steps=3, seed=1, layout="compact")
    assert TraceReader(path).plan_split(1) is None
    assert summary(read(path, True, monkeypatch)) == summary(read(path, False, monkeypatch))

"""``summary`` reads the python frames but leaves the fwdbwd flows out (schema.FLOWS, which
only ``source`` reads): on shared traces with frames, flows or both, serially and in two
processes, the frames are those of a read that keeps the flows, the flows are Dropped of the
same count, and the summary is the same."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_TRACES

from traceview.analyses.summary import overview
from traceview.app.commands import _unused
from traceview.app.reading import read_trace
from traceview.columns import schema
from traceview.columns.model import TraceEvents
from traceview.options import ReadOptions

WITH_FRAMES_OR_FLOWS = [
    "tracelens__mi300__resnet_act_checkpoint",  # both
    "tracelens__b200__eager_trace",  # frames
    "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102",  # flows
    "h200/train",  # flows
]


def _read(path: Path, unused: frozenset[str]) -> TraceEvents:
    options = ReadOptions(quiet=True, cache=False)
    return read_trace(
        path, options, keep_cpu=True, remember=False, memory=True, frames=True, unused=unused
    )


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("name", WITH_FRAMES_OR_FLOWS)
def test_summary_reads_no_flows_and_says_the_same(
    name: str, parallel: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = SHARED_TRACES / f"{name}.json.gz"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    if parallel:  # plain text, which is read in two processes
        with gzip.open(path) as f, (tmp_path / "t.json").open("wb") as out:
            shutil.copyfileobj(f, out)
        path = tmp_path / "t.json"
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1" if parallel else str(1 << 60))
    monkeypatch.setenv("TRACEVIEW_ANALYSES", "serial")
    full, lean = _read(path, _unused()), _read(path, _unused(flows=True))
    assert (lean.read.resume_at is not None) == parallel
    assert len(full.frames.ts) + len(full.flows.flow) > 0
    for column in schema.FLOW_COLUMNS:
        got = getattr(lean.flows, column.name)
        assert isinstance(got, schema.Dropped) and len(got) == len(full.flows.flow)
    for column in schema.FRAME_COLUMNS:
        want, got = getattr(full.frames, column.name), getattr(lean.frames, column.name)
        assert np.array_equal(got, want), column.name
    assert lean.threads == full.threads and list(lean.names) == list(full.names)
    assert json.dumps(overview(lean).as_json()) == json.dumps(overview(full).as_json())

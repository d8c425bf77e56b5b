"""``summary`` reads the python frames but leaves the fwdbwd flows out (schema.FLOWS, which
only ``source`` reads) and keeps only the frames the host-stall hint can name (at least
STALL_FRAME_MIN_NS long): on shared traces with frames, flows or both, serially and in two
processes, the frames are the long ones of a read that keeps them all, the flows are Dropped
of the same count, and the summary is the same."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED_TRACES

from traceview.analyses.core.stall import STALL_FRAME_MIN_NS
from traceview.analyses.summary import overview
from traceview.app.commands import _unused
from traceview.app.reading import read_trace
from traceview.columns import parallel as two_parts
from traceview.columns import schema
from traceview.columns.model import TraceEvents
from traceview.options import ReadOptions
from traceview.read.reader import TraceReader

WITH_FRAMES_OR_FLOWS = [
    "tracelens__mi300__resnet_act_checkpoint",  # both
    "tracelens__b200__eager_trace",  # frames
    "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102",  # flows
    "h200/train",  # flows
]
EAGER = "tracelens__b200__eager_trace"


def _read(path: Path, unused: frozenset[str], frames_from_ns: int = 0) -> TraceEvents:
    options = ReadOptions(quiet=True, cache=False)
    return read_trace(
        path,
        options,
        keep_cpu=True,
        remember=False,
        memory=True,
        frames=True,
        unused=unused,
        frames_from_ns=frames_from_ns,
    )


def _plain(name: str, tmp_path: Path) -> Path:
    """The shared trace as plain text (read in two processes), skipped when absent."""
    path = SHARED_TRACES / f"{name}.json.gz"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    with gzip.open(path) as f, (tmp_path / "t.json").open("wb") as out:
        shutil.copyfileobj(f, out)
    return tmp_path / "t.json"


def _long(events: TraceEvents) -> np.ndarray:
    return np.flatnonzero(events.frames.end - events.frames.ts >= STALL_FRAME_MIN_NS)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("name", WITH_FRAMES_OR_FLOWS)
def test_summary_reads_no_flows_and_says_the_same(
    name: str, parallel: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = SHARED_TRACES / f"{name}.json.gz"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    if parallel:  # plain text, which is read in two processes
        path = _plain(name, tmp_path)
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1" if parallel else str(1 << 60))
    monkeypatch.setenv("TRACEVIEW_ANALYSES", "serial")
    full = _read(path, frozenset())
    lean = _read(path, _unused(flows=True), STALL_FRAME_MIN_NS)
    assert (lean.read.resume_at is not None) == parallel
    assert len(full.frames.ts) + len(full.flows.flow) > 0
    for column in schema.FLOW_COLUMNS:
        got = getattr(lean.flows, column.name)
        assert isinstance(got, schema.Dropped) and len(got) == len(full.flows.flow)
    long = _long(full)
    if name == EAGER:  # most of its frames are short: the lean read leaves them out
        assert 0 < len(long) < len(full.frames.ts) // 10
    for column in schema.FRAME_COLUMNS:
        want, got = getattr(full.frames, column.name), getattr(lean.frames, column.name)
        if f"frames.{column.name}" in schema.FRAME_PARENTS:  # source alone reads them
            assert isinstance(got, schema.Dropped) and len(got) == len(long)
        else:
            assert np.array_equal(got, want[long]), column.name
    assert lean.threads == full.threads and list(lean.names) == list(full.names)
    assert json.dumps(overview(lean).as_json()) == json.dumps(overview(full).as_json())


@pytest.mark.parametrize("early_floor, read_floor", [(0, STALL_FRAME_MIN_NS), (1, 0)])
def test_an_early_worker_serves_a_read_that_keeps_no_more_frames(
    early_floor: int, read_floor: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An early worker keeping every frame is adopted by summary's read, which leaves the
    short ones of its part out itself; one keeping fewer frames than a read wants is stopped
    and the read splits anew. Either way the frames are those a serial read keeps."""
    path = _plain(EAGER, tmp_path)
    serial = _read(path, frozenset(), read_floor)
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1")
    forks = []
    monkeypatch.setattr(two_parts, "_Forked", _counting(two_parts._Forked, forks))
    two_parts.start_early(path, True, True, frames_from_ns=early_floor)
    assert len(forks) == 1
    reader = TraceReader(path)
    events = two_parts.collect_events(reader, True, True, frames_from_ns=read_floor)
    assert events.read.resume_at is not None  # read in two parts
    assert len(forks) == (1 if early_floor <= read_floor else 2)  # adopted, or forked anew
    assert _frames(events) == _frames(serial) and len(serial.frames.ts) > 0


def _frames(events: TraceEvents) -> list[tuple[object, ...]]:
    """The frames with their thread and name ids resolved (a read in two parts interns in
    another order)."""
    f = events.frames
    columns = (f.thread.tolist(), f.name.tolist(), f.ts.tolist(), f.end.tolist())
    return [
        (events.threads[thread], events.names[name], *rest)
        for thread, name, *rest in zip(*columns, f.python_id.tolist(), strict=True)
    ]


def _counting(cls: type, made: list[object]) -> type:
    class Counted(cls):  # type: ignore[misc, valid-type]
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    return Counted

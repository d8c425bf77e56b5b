"""Collectives matched by the trace's process-group metadata, their sizes and nccl-tests
bandwidths, against the independent reference (tests/ranks_reference.py) on generated runs with
the metadata on the kernels, on the launching CPU ops, or split between them, and on the real
NCCL trace of ../shared/traces."""

from __future__ import annotations

import gzip
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import ranks_reference as rr
from conftest import SHARED_TRACES
from test_ranks import _check_against_reference, _gather, generated_run

from traceview.analyses.runs.comm_meta import kernel_meta
from traceview.columns.model import TraceEvents
from traceview.columns.parallel import collect_events
from traceview.columns.schema import COMM_COLUMNS, KERNEL, CommColumns
from traceview.read.reader import TraceReader

NCCL = SHARED_TRACES / "hta__nccl_parser_config__nccl_data.json.gz"
needs_nccl = pytest.mark.skipif(not NCCL.is_file(), reason="../shared/traces is absent")


@pytest.mark.parametrize("where", ["kernel", "op", "split"])
@pytest.mark.parametrize("seq", [False, True])
def test_metadata_matches_and_sizes_equal_the_reference(
    tmp_path: Path, where: str, seq: bool
) -> None:
    extra = ["--seq"] if seq else []
    run = generated_run(tmp_path, "--ranks", "4", "--late-rank", "2", "--comm-args", where, *extra)
    result, report = _gather([run], jobs=2)
    _check_against_reference({r: run / f"run_rank{r}.json" for r in range(4)}, result, report)
    assert len(report.collectives) == 6
    assert {c.matched_by for c in report.collectives} == {"seq" if seq else "order"}
    assert all(c.last == 2 and c.bytes and c.process_group == "0" for c in report.collectives)
    assert report.slowest == 2


def test_subgroups_count_their_own_ranks(tmp_path: Path) -> None:
    run = generated_run(
        tmp_path, "--ranks", "4", "--late-rank", "3", "--comm-args", "split", "--seq",
        "--subgroup", "2",
    )  # fmt: skip
    result, report = _gather([run], jobs=2)
    _check_against_reference({r: run / f"run_rank{r}.json" for r in range(4)}, result, report)
    groups = defaultdict(set)
    for c in report.collectives:
        groups[c.process_group].add(c.ranks)
    assert groups == {"0": {4}, "sub0": {2}, "sub2": {2}}
    gathers = [c for c in report.collectives if c.process_group == "sub2"]
    assert gathers and all(c.last == 3 for c in gathers)


def test_bandwidth_per_kind_sums_the_collectives(tmp_path: Path) -> None:
    run = generated_run(tmp_path, "--ranks", "3", "--comm-args", "kernel", "--seq")
    _, report = _gather([run], jobs=1)
    want = rr.collectives(rr.load_run({r: run / f"run_rank{r}.json" for r in range(3)}))
    kinds = {"allreduce": "allreduce", "_allgather_base": "allgather"}
    for b in report.bandwidth:
        mine = [w for k, w in want.items() if kinds[k[0]] == b.kind]
        assert b.collectives == len(mine)
        assert b.bytes == sum(w["bytes"] for w in mine)
        time = sum(w["latency_ns"] for w in mine)
        assert b.time_ns == time
        assert math.isclose(b.algbw_gbps, b.bytes / time, rel_tol=1e-12)
        bus = sum(w["busbw_gbps"] * w["latency_ns"] for w in mine) / time
        assert math.isclose(b.busbw_gbps, bus, rel_tol=1e-9)
    assert {b.kind for b in report.bandwidth} == {"allreduce", "allgather"}


def _kernels_own(events: TraceEvents) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    rows = np.flatnonzero(events.gpu.kind == KERNEL)
    return rows, kernel_meta(events, rows).__dict__


@needs_nccl
def test_the_launching_op_gives_what_the_kernel_says() -> None:
    """On the real NCCL trace every kernel and its record_param_comms op carry the same
    metadata: without the kernels' rows, the ops found by the launch give each kernel its own."""
    from dataclasses import replace

    events = collect_events(TraceReader(NCCL), keep_cpu=True)
    _, own = _kernels_own(events)
    table = events.comms
    ops = table.gpu_row < 0
    stripped = CommColumns(*(getattr(table, c.name)[ops] for c in COMM_COLUMNS))
    _, linked = _kernels_own(replace(events, comms=stripped))
    said = own["key"] >= 0
    assert said.sum() == 21
    for field, values in own.items():
        assert (linked[field][said] == values[said]).all(), field
    assert (linked["key"][~said] == -1).all()


@needs_nccl
def test_a_real_two_rank_run_matches_by_process_group(tmp_path: Path) -> None:
    text = gzip.decompress(NCCL.read_bytes())
    assert text.count(b'"rank": 0') >= 1
    for rank in (0, 1):
        (tmp_path / f"rank{rank}.json").write_bytes(
            text.replace(b'"rank": 0', b'"rank": %d' % rank, 1)
        )
    result, report = _gather([tmp_path], jobs=2)
    paths = {r: tmp_path / f"rank{r}.json" for r in (0, 1)}
    _check_against_reference(paths, result, report)
    assert len(report.collectives) == 21
    assert {c.matched_by for c in report.collectives} == {"order"}
    assert {c.name for c in report.collectives} == {"allreduce", "broadcast"}
    assert all(c.skew_ns == 0 and c.bytes is not None for c in report.collectives)
    assert {b.kind for b in report.bandwidth} == {"allreduce", "broadcast"}

"""summary's op calls on a thread beside the links' pass (analyses.summary ``_Fed``): the same
result as in line, and an error raised where the caller asks for the result, never lost."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from traceview.analyses import summary
from traceview.analyses.core import opcalls
from traceview.columns.cpu_rows import OP, ArrayRows, CpuRows, rows
from traceview.columns.model import TraceEvents


def _events(n: int) -> TraceEvents:
    ts = np.arange(n, dtype=np.int64) * 10
    table = rows(
        thread=(np.arange(n) % 2).astype(np.int32),
        name=(np.arange(n) % 3).astype(np.int32),
        ts=ts,
        end=ts + np.arange(n) % 25,
        correlation=np.full(n, OP, dtype=np.int64),
    )
    cpu = CpuRows((ArrayRows(table),))
    return cast(TraceEvents, SimpleNamespace(names=["a", "b", "c"], shapes=[], cpu=cpu))


def test_the_fed_op_calls_are_those_of_a_pass() -> None:
    events = _events(5000)
    fed = summary._Fed(opcalls.OpCallsByBlock(events))
    for block in events.cpu.blocks(300):
        fed.put(block)
    got, want = fed.result(), opcalls.op_calls(events)
    for field in ("name", "shape", "calls", "cpu_ns", "self_ns"):
        assert getattr(got, field).tolist() == getattr(want, field).tolist(), field


def test_an_error_on_the_thread_is_raised_by_result_and_blocks_no_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(self: opcalls.OpCallsByBlock, block: np.ndarray) -> None:
        raise ValueError("broken")

    monkeypatch.setattr(opcalls.OpCallsByBlock, "add", broken)
    events = _events(4000)
    fed = summary._Fed(opcalls.OpCallsByBlock(events))
    for block in events.cpu.blocks(100):  # many more than the queue holds
        fed.put(block)
    with pytest.raises(ValueError, match="broken"):
        fed.result()

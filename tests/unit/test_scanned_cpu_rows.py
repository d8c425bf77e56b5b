"""The CPU ops, python frames and fwdbwd flows the compiled scanner converts (rust/src/cpu.rs)
are the rows the Python path makes of them: the same columns, interning order and counts for
odd but valid events (escaped names, null args, shapes of every kind, ids of every type), and
the chunks it refuses read as the Python path reads them."""

from __future__ import annotations

import numpy as np
import pytest
from reader_paths import COMPILED, both_chunk_reads, differences

from traceview.columns import cpu_rows
from traceview.columns.collect import scan_rule
from traceview.columns.schema import CPU_COLUMNS, FLOW_COLUMNS, FRAME_COLUMNS

core = pytest.importorskip("traceview._core")
pytestmark = pytest.mark.skipif(not COMPILED, reason="the compiled core is not installed")


def _same(declared: list[tuple[str, str]], table: tuple) -> bool:
    return [(n, np.dtype(d)) for n, d in declared] == [(c.name, c.dtype) for c in table]


def test_the_scanner_cpu_columns_are_the_schema() -> None:
    assert _same(core.OP_COLUMNS, CPU_COLUMNS)
    assert _same(core.FRAME_COLUMNS, FRAME_COLUMNS)
    assert _same(core.FLOW_COLUMNS, FLOW_COLUMNS)
    assert dict(core.CPU_MARKS) == {
        "OP": cpu_rows.OP,
        "ANNOTATION": cpu_rows.ANNOTATION,
        "FRAME": cpu_rows.FRAME,
    }


def _event(**fields: str) -> str:
    return "{" + ", ".join(f'"{k}": {v}' for k, v in fields.items()) + "}"


def _op(cat: str, name: str, ts: str, dur: str, args: str = "null", tid: str = "2") -> str:
    return _event(ph='"X"', cat=cat, name=name, pid="1", tid=tid, ts=ts, dur=dur, args=args)


KERNEL = _event(
    ph='"X"', cat='"kernel"', name='"k"', pid="0", tid="7", ts="20", dur="2",
    args='{"correlation": 5, "device": 0, "stream": 7}',
)  # fmt: skip
RUNTIME = _event(
    ph='"X"', cat='"cuda_runtime"', name='"cudaLaunchKernel"', pid="1", tid="2", ts="19",
    dur="1", args='{"correlation": 5}',
)  # fmt: skip
OPS = [
    _op('"cpu_op"', '"aten::mm"', "8", "3", '{"Input Dims": [[2, 3], []], "Input type": '
        '["float", ""], "Concrete Inputs": ["", "1"], "Input Strides": [[3, 1], []]}'),
    _op('"cpu_op"', '"aten::mm"', "9", "1", '{"Input Dims": [[2, 3], []], "Input type": '
        '["float", ""], "Concrete Inputs": ["", "1"]}'),
    _op('"User_Annotation"', '"a\\"b \\u00e9"', "9.5", "0.25"),
    _op('"operator"', '"conv"', "10", "2", '{"Input dims": [[1]], "Input type": ["int"]}', '"t"'),
    _op('"cpu_op"', '"both"', "11", "1", '{"Input dims": [[9]], "Input Dims": null}'),
    _op('"cpu_op"', '"\\u0050rofilerStep#3"', "1", "50"),
    _op('"cpu_op"', '"ProfilerStep#4"', "51", "50"),
    _op('"cpu_op"', '"types"', "12", "1", '{"Input type": ["int"], "Concrete Inputs": [1]}'),
    _op('"cpu_op"', '""', "13", "0", "{}"),
]  # fmt: skip
FRAMES = [
    _op('"python_function"', '"nn.Module: LlamaForCausalLM_0"', "2", "90",
        '{"Python id": 1, "Python parent id": null}'),
    _op('"python_function"', '"m.py(3): f"', "3", "1",
        '{"Python id": 2, "Python parent id": 1, "Python thread": 0}'),
    _op('"python_function"', '"w.py(9): execute_model"', "4", "5", '{"Python id": -0}'),
    _op('"python_function"', '"g\\u0028"', "5", "1",
        '{"Python id": 9223372036854775808, "Python parent id": 1.5}'),
    _op('"python_function"', '"h"', "6", "1", '{"Python id": "7", "Python parent id": true}'),
]  # fmt: skip
FLOWS = [
    _event(ph='"s"', cat='"fwdbwd"', name='"fwdbwd"', id="5", pid="1", tid="2", ts="8"),
    _event(ph='"f"', cat='"fwdbwd"', name='"fwdbwd"', id="5", pid="1", tid="9", ts="30", bp='"e"'),
    _event(ph='"f"', cat='"fwdbwd"', id="-1", pid="1", tid="9", ts="31", dur="null"),
    _event(ph='"t"', cat='"fwdbwd"', id="6", ts="32"),
    _event(ph='"s"', cat='"ac2g"', id="7", pid="0", tid="7", ts="20"),
]  # fmt: skip
MEMORY = _event(
    ph='"i"', cat='"cpu_instant_event"', name='"[memory]"', pid="1", tid="3", ts="15",
    args='{"Device Type": 1, "Device Id": 0, "Bytes": 512, "Addr": 1}',
)  # fmt: skip
CHUNK = ",\n".join([*FRAMES[:2], *OPS[:4], MEMORY, KERNEL, RUNTIME, *FLOWS, *OPS[4:], *FRAMES[2:]])


def _scanned(chunk: str, exact: bool, keep_frames: bool) -> dict:
    return core.scan_chunk(chunk.encode(), exact, True, scan_rule(True), keep_frames)


@pytest.mark.parametrize("exact", [False, True], ids=["plain", "exact"])
@pytest.mark.parametrize("keep", ["cpu", "frames"])
def test_odd_rows_are_the_python_paths(exact: bool, keep: str) -> None:
    keep_frames = keep == "frames"
    result = _scanned(CHUNK, exact, keep_frames)
    assert "refused" not in result  # the scanner's rows are what is compared
    assert len(result["op_ts"]) // 8 == 9  # the 7 ops that are no steps, 2 step frames
    assert len(result["frame_ts"]) // 8 == (5 if keep_frames else 0)
    assert len(result["flow_ts"]) // 8 == (3 if keep_frames else 0)
    compiled, python = both_chunk_reads(CHUNK.encode(), exact, True, keep_frames)
    assert not isinstance(compiled, str)
    assert not differences(compiled, python)
    assert len(compiled["steps"]) == 2 and compiled["memory"]["ts"][2]


REFUSED = [
    _op('"cpu_op"', '"no dur"', "8", "null"),
    _op('"cpu_op"', '"text ts"', '"8"', "1"),
    _op('"cpu_op"', '"big"', "1712195495505582.5", "1"),
    _op('"cpu_op"', '"grid"', "8", "1", '{"grid": [1, 2]}'),
    _op('"cpu_op"', '"corr"', "8", "1", '{"correlation": 1.5}'),
    _op('"cpu_op"', '"twice"', "8", "1", '{"Input Dims": [1], "Input Dims": [2]}'),
    _op('"cpu_op"', "null", "8", "1"),
    _op('"python_function"', '"f"', "8", "1", '{"Python id": 1e400}'),
    _op('"python_function"', '"x: execute_model"', "8", "null"),
    _event(ph='"f"', cat='"fwdbwd"', id="1", pid="1", tid="2", ts='"8"'),
    _event(ph='"f"', cat='"fwdbw\\u0064"', id="1", pid="1", tid="2", ts="8"),
]


@pytest.mark.parametrize("event", REFUSED)
def test_events_it_cannot_take_read_as_the_python_path_reads_them(event: str) -> None:
    chunk = ",\n".join([KERNEL, event, OPS[0]])
    for exact in (False, True):
        for keep_frames in (False, True):
            compiled, python = both_chunk_reads(chunk.encode(), exact, True, keep_frames)
            assert not differences(compiled, python), (exact, keep_frames)

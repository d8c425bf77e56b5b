"""The compiled core (traceview._core, rust/): its columns are schema.py's, it is called only
from traceview.read, and the Python reader stays real: chosen by TRACEVIEW_READER=python, used
when the extension is missing and for every chunk the scanner refuses."""

from __future__ import annotations

import ast
import json
import os
import random
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, run_cli

import traceview
from traceview.columns.parallel import collect_events
from traceview.columns.schema import GPU_COLUMNS, RUNTIME_COLUMNS
from traceview.errors import TraceviewError
from traceview.read import compiled
from traceview.read.reader import TraceReader

core = pytest.importorskip("traceview._core")
DEMO = ROOT / "fixtures" / "demo.json.gz"
KERNEL = (
    b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2, '
    b'"args": {"correlation": 5, "device": 0, "stream": 7, "grid": [1, 2, 3]}}'
)
OP = b'{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 8, "dur": 3}'


def _same(declared: list[tuple[str, str]], table: tuple) -> bool:
    return [(n, np.dtype(d)) for n, d in declared] == [(c.name, c.dtype) for c in table]


def test_the_scanner_columns_are_the_schema() -> None:
    assert _same(core.GPU_COLUMNS, GPU_COLUMNS)
    assert _same(core.RUNTIME_COLUMNS[: len(RUNTIME_COLUMNS)], RUNTIME_COLUMNS)


def test_only_traceview_read_calls_the_core() -> None:
    callers = []
    for path in sorted((ROOT / "traceview").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            if "traceview._core" in names:
                callers.append(path.relative_to(ROOT / "traceview").parts[0])
    assert callers and set(callers) == {"read"}


def test_a_chunk_splits_into_rows_and_others() -> None:
    result = core.scan_chunk(OP + b",\n" + KERNEL, False, False)
    assert result["events"] == 2
    assert np.frombuffer(result["gpu_ts"], "<i8").tolist() == [10_500]
    assert result["others"] == b"[" + OP + b"]"
    with_cpu = core.scan_chunk(OP + b",\n" + KERNEL, False, True)  # the op is a CPU row
    assert with_cpu["others"] == b"[]" and with_cpu["op_names"] == b'["aten::mm"]'
    events = compiled.decode_scanned(
        OP + b",\n" + KERNEL, 0, len(OP) + 2 + len(KERNEL), False, Counter(), shapes=False
    )
    assert isinstance(events, compiled.Scanned) and events.total == 2 and len(events) == 1
    assert events.scanned.gpu_names == ["k"] and events.scanned.launches == [
        ((1, 2, 3), None, None, None, None)
    ]


def test_a_refused_chunk_takes_the_python_path() -> None:
    chunk = KERNEL.replace(b'"ts": 10.5', b'"ts": 1.05e1')  # not the batch conversion's
    assert core.scan_chunk(chunk, False, False)["refused"].startswith("times")
    events = compiled.decode_scanned(chunk, 0, len(chunk), False, Counter())
    assert type(events) is list and len(events) == 1


def test_a_collective_s_metadata_comes_back_decoded() -> None:
    """A chunk holding a collective's metadata is scanned: the rows carrying fields its
    decoder reads as any value come back decoded beside the columns."""
    assert core.COMM_CHECKED == compiled.COMM_CHECKED
    kernel = KERNEL.replace(b'"grid"', b'"Collective name": "allreduce", "grid"')
    op = OP.replace(b'"dur": 3}', b'"dur": 3, "args": {"Collective name": "allreduce"}}')
    chunk = OP + b", " + kernel + b", " + op
    events = compiled.decode_scanned(chunk, 0, len(chunk), False, Counter(), shapes=True)
    assert isinstance(events, compiled.Scanned) and len(events) == 0
    rows = events.scanned
    assert rows.comm_rows.tolist() == [0, -2]  # the kernel, the second CPU op row
    assert [e.args.collective for e in rows.comm_events] == ["allreduce", "allreduce"]


def test_hostile_bytes_never_raise() -> None:
    rng = random.Random(43)
    text = (OP + b",\n" + KERNEL) * 3
    for _ in range(3000):
        data = bytearray(text)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        cut = rng.randrange(1, len(data) + 1)
        result = core.scan_chunk(bytes(data[:cut]), rng.random() < 0.5, True)
        assert "refused" in result or result["events"] >= 1
    deep = b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert core.scan_chunk(deep, False, False)["refused"] == "nested too deeply"


def test_a_range_of_bytes_is_scanned_as_its_copy() -> None:
    text = b"[" + OP + b",\n" + KERNEL + b"]"
    want = core.scan_chunk(text[1:-1], False, True)
    assert core.scan_chunk(text, False, True, start=1, end=len(text) - 1) == want
    with memoryview(bytearray(text)) as view:
        assert core.scan_chunk(view, False, True, start=1, end=len(text) - 1) == want
    for start, end in ((5, 2), (0, len(text) + 1)):
        with pytest.raises(ValueError, match="not a range"):
            core.scan_chunk(text, False, True, start=start, end=end)


def test_text_read_again_that_changed_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain file's chunks are read again from the text kept (reader._fill_bytes): text
    that is not the same the second time is a file changed while it was read."""
    monkeypatch.delenv(compiled.READER_ENV, raising=False)
    path = tmp_path / "t.json"
    events = [{**json.loads(KERNEL), "ts": i} for i in range(4000)]
    path.write_text(json.dumps({"traceEvents": events}, indent=1))
    size = path.stat().st_size
    reader = TraceReader(path, block_size=64 << 10)
    batches = reader.batches()
    next(batches)
    with path.open("r+b") as f:  # the next event's ``{``, already read, now differs
        data = f.read()
        f.seek(data.index(b"{", reader._last_event_end))
        f.write(b"[")
    assert path.stat().st_size == size
    with pytest.raises(TraceviewError, match="the file changed while it was read"):
        for _ in batches:
            pass


def test_reader_chosen_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(compiled.READER_ENV, raising=False)
    assert compiled.reader_name() == "compiled (Rust)"
    monkeypatch.setenv(compiled.READER_ENV, "python")
    assert compiled.reader_name().startswith("python")
    events = compiled.decode_scanned(KERNEL, 0, len(KERNEL), False, Counter())
    assert type(events) is list


def test_without_the_extension_the_python_reader_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    with_core = collect_events(TraceReader(DEMO), keep_cpu=True)
    monkeypatch.delenv(compiled.READER_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "traceview._core", None)  # import fails: not installed
    monkeypatch.delattr(traceview, "_core")
    assert compiled.reader_name() == "python (the compiled core is not installed)"
    without = collect_events(TraceReader(DEMO), keep_cpu=True)
    assert np.array_equal(with_core.gpu.ts, without.gpu.ts)
    assert list(with_core.names) == list(without.names)


def test_version_says_which_reader_runs() -> None:
    assert "(reader: compiled (Rust))" in run_cli("--version").stdout
    env = {**os.environ, compiled.READER_ENV: "python"}
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "traceview", "--version"], env=env, capture_output=True, text=True
    )
    assert out.stdout.strip().endswith(f"(reader: python ({compiled.READER_ENV}=python))")


def test_the_stub_names_what_the_module_has() -> None:
    stub = ast.parse((Path(compiled.__file__).parent.parent / "_core.pyi").read_text())
    declared = {
        t.id
        for node in stub.body
        for t in ([node.target] if isinstance(node, ast.AnnAssign) else [])
        if isinstance(t, ast.Name)
    } | {node.name for node in stub.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
    assert declared == {n for n in dir(core) if not n.startswith("_")}

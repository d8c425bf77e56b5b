"""The compiled reader against the Python reader (``TRACEVIEW_READER=python``), on every trace
file in ../shared/traces (every folder) and fixtures/.

Why an equal read means equal output: the readers differ only up to the TraceEvents a read
gives (traceview.columns.parallel.collect_events); everything after it (the cache, the
analyses, the rendering) is the same code, fed the same values. So if, under every way a
command reads (without CPU rows; with them; with them and the python frames, as ``source``,
``audit``, ``memory`` and ``report`` read), both readers give a TraceEvents equal in every
field (every column group, byte for byte; names, streams, threads, launches, shapes and
collective keys in their interning order; steps, span, quality counters in their order, read
statistics, header), every command's output is equal too. The snapshot compares every field
of TraceEvents and fails on a field it does not know, so a new field cannot escape it.
test_reader_commands.py checks the argument on the commands themselves, byte for byte.

Not compared here: the Nsight Systems export (nsys/), which its own reader (read/nsys.py)
reads, with no compiled path. h200/big.json.gz (519 MB) runs under the slow marker.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, SHARED_TRACES
from reader_paths import COMPILED, both_reads, differences, python_reader, read_once

import traceview.read.compiled as compiled_module

pytestmark = pytest.mark.skipif(not COMPILED, reason="the compiled core is not installed")

MODES = {"gpu": (False, False), "cpu": (True, False), "frames": (True, True)}
_NOT_TRACES = {".md", ".py", ".pyc"}  # READMEs, the fixtures' generators


def _param(path: Path, base: Path) -> object:
    name = str(path.relative_to(base))
    marks: list[pytest.MarkDecorator] = []
    if ".sqlite" in path.name:
        marks.append(
            pytest.mark.skip(
                reason="an Nsight Systems export: read/nsys.py reads it, no compiled path"
            )
        )
    if path.name == "big.json.gz":
        marks.append(pytest.mark.slow)
    return pytest.param(path, id=name, marks=marks)


def _files(base: Path) -> list[object]:
    if not base.is_dir():
        return []
    found = (
        p
        for p in sorted(base.rglob("*"))
        if p.is_file()
        and p.suffix not in _NOT_TRACES
        # not __pycache__ nor hidden files: every xdist worker must collect the same tests
        and not any(part.startswith((".", "__")) for part in p.relative_to(base).parts)
    )
    return [_param(p, base) for p in found]


def every_file() -> list[object]:
    """Every file of ../shared/traces (its power logs and timings too: both readers must reject
    them alike) and of fixtures/ but READMEs and generators."""
    return _files(SHARED_TRACES) + _files(ROOT / "fixtures")


@pytest.mark.parametrize("path", every_file())
def test_reads_agree(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under each read mode, --partial (a truncated trace gives what its events say), and for
    the damaged fixtures without it too (the errors)."""
    strict = path.parent.name == "edge"
    # A big gzip trace: both readers split it in two processes, as the Python reader does (the
    # compiled one reads it on threads, the serial read: test_threaded_paths.py).
    monkeypatch.setenv("TRACEVIEW_SPLIT", "fork")
    for mode, (keep_cpu, frames) in MODES.items():
        for partial in (True, False) if strict else (True,):
            compiled, python = both_reads(path, keep_cpu, partial=partial, frames=frames)
            assert not differences(compiled, python), (mode, partial, differences(compiled, python))


# The two-process read (columns.parallel) of the h200 traces: each part through the scanner.
_SPLIT = [
    "h200/train.json.gz",
    "h200/decode.json.gz",
    "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.json.gz",
]


@pytest.mark.parametrize("name", _SPLIT, ids=lambda n: n.split("__")[-1])
def test_split_reads_agree(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = SHARED_TRACES / name
    if not path.exists():
        pytest.skip(f"{path} is absent")
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", str(4 << 20))
    monkeypatch.setenv("TRACEVIEW_SPLIT", "fork")  # not on threads (test_threaded_paths.py)
    compiled, python = both_reads(path, keep_cpu=True)
    assert not isinstance(compiled, str)
    assert compiled["read"][1]["resume_at"] is not None  # it was read in two parts
    assert not differences(compiled, python)


def test_the_compiled_path_converts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparisons above are not of one reader with itself: the compiled read of an h200
    trace converts chunks in the scanner, the Python read calls it never."""
    path = SHARED_TRACES / "h200" / "train.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    core = compiled_module.scanner()
    assert core is not None
    results: list[bool] = []
    scan = core.scan_chunk

    def counted(*args: object) -> object:
        result = scan(*args)
        results.append("refused" not in result)
        return result

    monkeypatch.setattr(core, "scan_chunk", counted)
    both_reads(path, keep_cpu=True)
    converted = sum(results)
    assert converted and converted == len(results)  # all by the scanner, none by Python
    with python_reader():
        assert compiled_module.scanner() is None


def _switching_trace(path: Path) -> None:
    """µs integers first (plain mode), then epoch-scale fractions: the read turns exact
    midway (NeedsExactTimes), which the scanner must follow."""
    events = []
    for i in range(20_000):
        events.append(
            f'{{"ph": "X", "cat": "kernel", "name": "k{i % 7}", "pid": 0, "tid": 7, "ts": '
            f'{1000 + i}, "dur": 3, "args": {{"correlation": {i}, "device": 0, "stream": 7}}}}'
        )
        events.append(
            f'{{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 2, "ts": {1000 + i}.5, '
            f'"dur": 1.25, "args": {{"Input Dims": [[1, 2]]}}}}'
        )
    for i in range(20_000):
        events.append(
            f'{{"ph": "X", "cat": "kernel", "name": "late{i % 5}", "pid": 0, "tid": 7, "ts": '
            f'1712195495505582.{i % 1000:03d}, "dur": 0.0015, "args": {{"correlation": {i}}}}}'
        )
        events.append(
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, '
            f'"ts": 1712195495505581.{i % 1000:03d}, "dur": 2.5005, '
            f'"args": {{"correlation": {i}}}}}'
        )
    path.write_text('{"traceEvents": [\n  ' + ",\n  ".join(events) + "\n]}")


@pytest.mark.parametrize(
    "split", ["", "fork", "threads"], ids=["serial", "two-processes", "threads"]
)
def test_exact_midway_and_split_reads_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, split: str
) -> None:
    path = tmp_path / "switch.json"
    _switching_trace(path)
    if split:  # two processes (columns.parallel) or threads (read.threaded), through the scanner
        monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", str(1 << 20))
        monkeypatch.setenv("TRACEVIEW_SPLIT", split)
    for keep_cpu, frames in ((False, False), (True, False), (True, True)):
        compiled, python = both_reads(path, keep_cpu, frames=frames)
        if split == "threads":  # the serial read's (the Python reader splits in processes)
            monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", str(1 << 60))
            with python_reader():
                python = read_once(path, keep_cpu, frames=frames)
            monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", str(1 << 20))
        assert not isinstance(compiled, str) and compiled["read"][1]["exact_times"]
        assert not differences(compiled, python)


# Traces with python frames (with_stack), fwdbwd flows and CPU ops with shapes.
_STACKS = [
    "tracelens__b200__eager_trace.json.gz",
    "tracelens__mi300__resnet_act_checkpoint.json.gz",
    "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "tracelens__mi300__gaunernst_bert-small-uncased__1016001.json.gz",
    "h200/train.json.gz",
    "h200/eager.json.gz",
]


@pytest.mark.parametrize("name", _STACKS, ids=lambda n: n.split("__")[-1].removesuffix(".json.gz"))
def test_scanned_cpu_rows_are_the_python_paths(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU ops, frames and flows the scanner converts (counted, so the comparison is not
    of chunks it refused) equal the Python reader's, row by row and in interning order."""
    path = SHARED_TRACES / name
    if not path.exists():
        pytest.skip(f"{name} is absent")
    core = compiled_module.scanner()
    taken: Counter[str] = Counter()

    class Counting:
        def __getattr__(self, key: str) -> Any:
            return getattr(core, key)

        def scan_chunk(self, *args: Any) -> dict[str, Any]:
            result: dict[str, Any] = core.scan_chunk(*args)
            for rows in ("op", "frame", "flow"):
                taken[rows] += len(result.get(f"{rows}_ts", b"")) // 8
            return result

    monkeypatch.setattr(compiled_module, "scanner", Counting)
    scanned = read_once(path, True, frames=True)
    monkeypatch.undo()
    with python_reader():
        python = read_once(path, True, frames=True)
    assert not differences(scanned, python)
    assert not isinstance(scanned, str)
    assert sum(taken.values()) > len(scanned["cpu"]) // 36 // 4  # mostly scanned, not refused
    assert taken["frame"] + taken["flow"] > 0

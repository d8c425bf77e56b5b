"""The compiled reader against the Python reader (``TRACEVIEW_READER=python``): equal columns,
interning order, read statistics and warnings on every trace in ../shared/traces (the h200
folder too, but for big.json.gz) and fixtures/, and byte-identical command output on a
representative subset."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, SHARED_TRACES
from reader_paths import COMPILED, both_reads, differences, python_reader, read_once
from typer.testing import CliRunner

from traceview.cli import app
from traceview.read import compiled

pytestmark = pytest.mark.skipif(not COMPILED, reason="the compiled core is not installed")


def _traces() -> list[Path]:
    found = sorted(SHARED_TRACES.glob("*.json.gz")) if SHARED_TRACES.is_dir() else []
    found += [
        p for p in sorted((SHARED_TRACES / "h200").glob("*.json.gz")) if p.name != "big.json.gz"
    ]
    found += sorted((ROOT / "fixtures").rglob("*.json*"))
    return found


def _id(path: Path) -> str:
    return path.name.removesuffix(".gz").removesuffix(".json")


@pytest.mark.parametrize("keep", ["gpu", "cpu", "frames"])
@pytest.mark.parametrize("path", _traces(), ids=_id)
def test_reads_agree(path: Path, keep: str) -> None:
    keep_cpu, keep_frames = keep != "gpu", keep == "frames"
    compiled, python = both_reads(path, keep_cpu, partial=True, keep_frames=keep_frames)
    assert not differences(compiled, python)
    if path.parent.name == "edge":  # truncated, damaged: the errors without --partial too
        strict_compiled, strict_python = both_reads(path, keep_cpu, keep_frames=keep_frames)
        assert not differences(strict_compiled, strict_python)


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
    core = compiled.scanner()
    taken: Counter[str] = Counter()

    class Counting:
        def __getattr__(self, key: str) -> Any:
            return getattr(core, key)

        def scan_chunk(self, *args: Any) -> dict[str, Any]:
            result: dict[str, Any] = core.scan_chunk(*args)
            for rows in ("op", "frame", "flow"):
                taken[rows] += len(result.get(f"{rows}_ts", b"")) // 8
            return result

    monkeypatch.setattr(compiled, "scanner", Counting)
    scanned = read_once(path, True, keep_frames=True)
    monkeypatch.undo()
    with python_reader():
        python = read_once(path, True, keep_frames=True)
    assert not differences(scanned, python)
    assert not isinstance(scanned, str)
    assert sum(taken.values()) > len(scanned["cpu"]) // 36 // 4  # mostly scanned, not refused
    assert taken["frame"] + taken["flow"] > 0


# A trace of each layout: kineto 2.x with ns timestamps and collectives, 2021 categories,
# AMD, MTIA, vLLM, H200 eager, the demo, hostile names, NaN tokens, truncation.
_SUBSET = [
    "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.json.gz",
    "kineto__resnet50_profiler_api_nw0.json.gz",
    "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "hta__mtia_inference_trace__mtia_inference_rank_0.json.gz",
    "tracelens__inference__vllm_decode_full__graph_execution.json.gz",
    "h200/eager.json.gz",
]
_FIXTURES = ["demo.json.gz", "edge/hostile_strings.json", "edge/nan_tokens.json"]
_COMMANDS = ["kernels", "gaps", "steps", "summary", "ops", "memory", "unique"]
_TEXT = {"kernels", "gaps", "summary"}  # in text too (the JSON says the same)


def _subset() -> list[Path]:
    paths = [SHARED_TRACES / name for name in _SUBSET if (SHARED_TRACES / name).exists()]
    return paths + [ROOT / "fixtures" / name for name in _FIXTURES]


def _run(args: list[str]) -> tuple[int, str]:
    r = CliRunner().invoke(app, args)
    return r.exit_code, r.output


@pytest.mark.parametrize("path", _subset(), ids=_id)
def test_commands_agree(path: Path) -> None:
    runs = []
    for command in _COMMANDS:
        for fmt in ("json", "text") if command in _TEXT else ("json",):
            runs.append([command, str(path), "--no-cache", "--partial", "-f", fmt])
    compiled = [_run(args) for args in runs]
    with python_reader():
        python = [_run(args) for args in runs]
    for args, a, b in zip(runs, compiled, python, strict=True):
        assert a == b, args


def test_trim_agrees(tmp_path: Path) -> None:
    path = ROOT / "fixtures" / "demo.json.gz"
    args = ["trim", str(path), "--pstep", "6", "--quiet"]
    code, _ = _run([*args, "-o", str(tmp_path / "compiled.json")])
    with python_reader():
        code_python, _ = _run([*args, "-o", str(tmp_path / "python.json")])
    assert code == code_python == 0
    compiled = (tmp_path / "compiled.json").read_bytes()
    assert compiled == (tmp_path / "python.json").read_bytes()


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


@pytest.mark.parametrize("split", [False, True], ids=["serial", "two-processes"])
def test_exact_midway_and_split_reads_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, split: bool
) -> None:
    path = tmp_path / "switch.json"
    _switching_trace(path)
    if split:  # the two-process read (columns.parallel), each part through the scanner
        monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", str(1 << 20))
    for keep_cpu, keep_frames in ((False, False), (True, False), (True, True)):
        compiled, python = both_reads(path, keep_cpu, keep_frames=keep_frames)
        assert not isinstance(compiled, str) and compiled["stats"][3]  # exact in the end
        assert not differences(compiled, python)

"""Every command's output through the compiled reader and through the Python reader
(``TRACEVIEW_READER=python``), byte for byte: stdout and stderr, the exit code and every file
written (-o), on a trace of each kind (h200 training, decoding and CUDA graphs, a DLRM rank,
vLLM, SGLang, one recorded with stacks and memory events, the demo), with ``--no-cache`` (the
reader runs for each command), in this process (no start-up per run).

test_reader_paths.py compares the reads themselves on every trace, which is the argument for
every command's output being equal; this checks it on the commands, the last step included.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import ROOT, SHARED_TRACES
from reader_paths import COMPILED, python_reader
from typer.testing import CliRunner

from traceview.cli import app

pytestmark = pytest.mark.skipif(not COMPILED, reason="the compiled core is not installed")

H200 = SHARED_TRACES / "h200"
_SUBSET = [
    H200 / "train.json.gz",
    H200 / "decode.json.gz",
    H200 / "graphs.json.gz",
    SHARED_TRACES / "param__dlrm_8rank_worker0.json.gz",
    SHARED_TRACES / "tracelens__inference__vllm_decode_full__graph_execution.json.gz",
    SHARED_TRACES / "tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz",
    SHARED_TRACES / "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz",  # stacks
    ROOT / "fixtures" / "demo.json.gz",
]
# Each command as the user runs it, output on stdout ("{out}": a file or folder it writes).
_COMMANDS = [
    ["kernels", "-f", "json"],
    ["kernels"],
    ["kernels", "-f", "csv", "--top", "0"],
    ["gaps", "-f", "json"],
    ["gaps"],
    ["summary", "-f", "json"],
    ["summary"],
    ["steps", "-f", "json"],
    ["ops", "-f", "json"],
    ["memory", "-f", "json"],
    ["unique", "-f", "json"],
    ["audit", "-f", "json"],
    ["source", "-f", "json"],
    ["snapshot"],
    ["diff", "{trace}", "-f", "json"],
    ["export", "-o", "{out}"],
    ["report", "-o", "{out}.html", "--quiet"],
    ["trim", "--pstep", "{step}", "-o", "{out}.json", "--quiet"],
]

Outcome = tuple[int, str, dict[str, bytes]]


def _id(path: Path) -> str:
    return path.name.removesuffix(".gz").removesuffix(".json")


def _run(args: list[str], out: Path) -> Outcome:
    """Exit code, output (stdout and stderr) and the files written under ``out``'s folder (then
    removed, so that the other reader writes the same names)."""
    result = CliRunner().invoke(app, args, env={"COLUMNS": "160"})
    written = {}
    for f in sorted(out.parent.rglob("*")):
        if f.is_file():
            written[str(f.relative_to(out.parent))] = f.read_bytes()
    shutil.rmtree(out.parent)
    out.parent.mkdir()
    return result.exit_code, result.output, written


def _both(args: list[str], out: Path) -> tuple[Outcome, Outcome]:
    compiled = _run(args, out)
    with python_reader():
        python = _run(args, out)
    return compiled, python


def _step(path: Path) -> str:
    """A ProfilerStep of the trace (the middle one), for trim --pstep; "1" when it has none."""
    done = CliRunner().invoke(app, ["steps", str(path), "-f", "json", "--no-cache", "--quiet"])
    steps = json.loads(done.stdout)["steps"] if done.exit_code == 0 else []
    return str(steps[len(steps) // 2]["step"]) if steps else "1"


@pytest.mark.parametrize("path", [p for p in _SUBSET if p.exists()], ids=_id)
def test_commands_agree(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "result"
    out.parent.mkdir()
    step = _step(path)
    fill: Callable[[str], str] = lambda a: a.format(trace=path, out=out, step=step)  # noqa: E731
    ran = 0
    for command in _COMMANDS:
        args = [command[0], str(path), *map(fill, command[1:]), "--no-cache"]
        compiled, python = _both(args, out)
        assert compiled == python, args
        ran += compiled[0] == 0
    assert ran >= len(_COMMANDS) - 3  # most commands succeed on each trace (not all errors)


def test_ranks_agree(tmp_path: Path) -> None:
    ranks = sorted(SHARED_TRACES.glob("param__dlrm_8rank_worker*.json.gz"))
    if len(ranks) < 2:
        pytest.skip("the DLRM rank traces are absent")
    out = tmp_path / "out" / "result"
    out.parent.mkdir()
    for args in (["ranks", *map(str, ranks), "-f", "json"], ["snapshot", *map(str, ranks)]):
        compiled, python = _both([*args, "--no-cache"], out)
        assert compiled == python and compiled[0] == 0, args


def test_diff_and_energy_agree(tmp_path: Path) -> None:
    if not (H200 / "power1.csv").exists():
        pytest.skip("../shared/traces/h200 is absent")
    out = tmp_path / "out" / "result"
    out.parent.mkdir()
    eager, compiled2 = str(H200 / "eager.json.gz"), str(H200 / "compiled2.json.gz")
    runs = [
        ["diff", eager, compiled2, "-f", "json"],
        ["diff", eager, compiled2, "--explain"],
        ["energy", str(H200 / "train.json.gz"), "--power", str(H200 / "power1.csv"),
         "--power-tz", "UTC", "-f", "json"],
    ]  # fmt: skip
    for args in runs:
        compiled, python = _both([*args, "--no-cache"], out)
        assert compiled == python and compiled[0] == 0, args


def test_a_split_read_exports_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A big file is read on threads by the compiled reader (gzip) and in two processes by
    the Python one, which intern names, threads and streams in different orders: export
    sorts them, and cuts the CPU rows into the same row groups (seen on h200/big.json.gz)."""
    path = H200 / "train.json.gz"
    if not path.exists():
        pytest.skip("../shared/traces/h200 is absent")
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", str(1 << 20))  # both split it
    out = tmp_path / "out" / "result"
    out.parent.mkdir()
    for args in (["export", str(path), "-o", str(out)], ["kernels", str(path), "-f", "json"]):
        compiled, python = _both([*args, "--no-cache", "--quiet"], out)
        assert compiled == python and compiled[0] == 0, args

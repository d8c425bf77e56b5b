"""Every command of the README's ``sh`` blocks runs as written: the traceview commands, and the
``python fixtures/generate.py`` lines that make their inputs, from a copy of the repository root
(the files a reader brings, such as an nsys export or the output of a profiled run, are made
here first)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from nsys_writer import kineto_to_nsys, load_kineto

DEMO = ROOT / "fixtures" / "demo.json.gz"
_FENCE = re.compile(r"^```(?:sh|shell|bash|console)\n(.*?)^```", re.M | re.S)
_RUN = ("traceview ", "python fixtures/generate.py ", "python fixtures/generate_run.py ")


def readme_commands(text: str) -> list[str]:
    """The commands to run from the README's shell blocks, continuation lines joined."""
    commands = []
    for block in _FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith(_RUN):
                commands.append(line)
    return commands


COMMANDS = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory laid out as the README assumes: the repository's fixtures, a profiled run
    (``run.json.gz``, which the CI example's bench.py writes), its committed baseline and an
    nsys export; ``traceview`` and ``python`` on PATH."""
    work = tmp_path_factory.mktemp("readme")
    (work / "fixtures").symlink_to(ROOT / "fixtures")
    shutil.copy(DEMO, work / "run.json.gz")
    kineto_to_nsys(load_kineto(DEMO), work / "report1.sqlite")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    shim = bin_dir / "traceview"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m traceview "$@"\n')
    shim.chmod(0o755)
    _write_power_log(DEMO, work / "power.csv")
    (work / "ci").mkdir()
    _run(f"traceview snapshot {DEMO} -o ci/baseline.json -q", work)
    return work


def _write_power_log(trace: Path, out: Path) -> None:
    """An nvidia-smi log (UTC, every 40 ms, GPUs 0-1) covering the run's window."""
    from datetime import UTC, datetime

    from traceview.columns.parallel import collect_events
    from traceview.read.reader import TraceReader

    gpu = collect_events(TraceReader(trace)).gpu
    start, end = int(gpu.ts.min()) // 10**6 - 100, int((gpu.ts + gpu.dur).max()) // 10**6 + 100
    lines = ["timestamp, index, power.draw.instant [W]"]
    for ms in range(start, end, 40):
        stamp = f"{datetime.fromtimestamp(ms // 1000, UTC):%Y/%m/%d %H:%M:%S}.{ms % 1000:03d}"
        lines += [f"{stamp}, {g}, {150 + ms % 7}.00 W" for g in (0, 1)]
    out.write_text("\n".join(lines) + "\n")


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{cwd / 'bin'}:/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "120",
        "TRACEVIEW_CACHE_DIR": str(cwd / "cache"),  # never the user's
    }
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_readme_has_the_examples_it_promises() -> None:
    joined = "\n".join(COMMANDS)
    for wanted in ("traceview diff baseline.json new-run.json.gz", "generate.py", "--gap-sort avg"):
        assert wanted in joined


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_runs_as_written(command: str, workdir: Path) -> None:
    r = _run(command, workdir)
    failed = f"{command}\nexit {r.returncode}\n{r.stderr}"
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, failed
    if r.returncode == 1 and "--max-regression" in command:  # the gate may fail: it works
        assert r.stderr.startswith("traceview: error: regression gate failed:"), failed
    else:
        assert r.returncode == 0, failed

"""SIGTERM ends a command as Ctrl-C does: its temp files removed, one line, exit 143 (one
mechanism, ``cli.errors.terminate_as_interrupt``, for every command that writes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, SHARED_TRACES

BIG = SHARED_TRACES / "h200" / "big.json.gz"

# A command's output written through the one writer, slowly: SIGTERM comes mid-write.
SLOW_WRITER = """
import sys, time
from pathlib import Path
from traceview.cli.errors import terminate_as_interrupt
from traceview.render.output import write_file

def chunks():
    yield b"x" * 4096
    Path("ready").touch()
    time.sleep(60)
    yield b"never"

terminate_as_interrupt()
try:
    write_file(Path("out.json"), chunks(), force=False)
except KeyboardInterrupt as e:
    sys.exit(type(e).__name__)
"""


# trim, its output's chunks each followed by a pause: SIGTERM comes mid-write (the whole
# write takes ~30 ms on its own, too short to be caught reliably).
TRIM_SLOWLY = """
import sys, time
import traceview.app.trim_copy as trim_copy
from traceview.cli import main

write_file = trim_copy.write_file

def slowly(chunks):
    for chunk in chunks:
        yield chunk
        time.sleep(60)

def write_slowly(path, chunks, *args, **kwargs):
    return write_file(path, slowly(chunks), *args, **kwargs)

trim_copy.write_file = write_slowly
sys.argv = ["traceview", *sys.argv[1:]]
main()
"""


def _wait_for(condition: object, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.05)


def _temp_files(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


def test_sigterm_mid_write_leaves_no_temp_file(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-c", SLOW_WRITER], cwd=tmp_path, env=env,
                         stderr=subprocess.PIPE, text=True)  # fmt: skip
    _wait_for(lambda: (tmp_path / "ready").exists() or p.poll() is not None)
    assert _temp_files(tmp_path), "the writer writes to a temp file first"
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=30)
    assert err.strip() == "Terminated", err  # raised as a KeyboardInterrupt
    assert _temp_files(tmp_path) == [] and not (tmp_path / "out.json").exists()


@pytest.mark.skipif(not BIG.exists(), reason="../shared/traces/h200/big.json.gz is absent")
def test_sigterm_during_trim_removes_its_temp_file(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}
    command = [sys.executable, "-c", TRIM_SLOWLY, "trim", str(BIG), "--pstep", "50"]
    p = subprocess.Popen([*command, "-o", str(tmp_path / "out.json"), "--no-cache"], env=env,
                         stderr=subprocess.PIPE, text=True)  # fmt: skip
    _wait_for(lambda: bool(_temp_files(tmp_path)) or p.poll() is not None)
    assert p.poll() is None, "trim ended before it wrote"
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert err.strip().splitlines()[-1] == "traceview: terminated", err
    assert list(tmp_path.iterdir()) == []

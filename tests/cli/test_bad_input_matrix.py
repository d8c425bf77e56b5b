"""Every command that reads a trace, against every kind of bad input (in-process: exit 1, one
line naming the problem, nothing on stdout), and each command once as a subprocess on the demo
trace, the way a user runs it."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import reference as ref
from conftest import ROOT, run_cli
from typer.testing import CliRunner

from traceview.cache.store import EXPORT_FILES
from traceview.cli import app

DEMO = ROOT / "fixtures" / "demo.json.gz"
KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
          "args": {"device": 0, "stream": 7, "correlation": 1}}  # fmt: skip
TEXT = json.dumps({"traceEvents": [KERNEL] * 3}, indent=1).encode()

# kind -> (the file's bytes; None: no file, "dir": a directory), a fragment of the error line
BAD: dict[str, tuple[bytes | str | None, str]] = {
    "missing": (None, "no such file"),
    "directory": (
        "dir",
        "directory",
    ),  # "is a directory"; to a command taking runs, one without trace files
    "empty": (b"", "empty file"),
    "garbage text": (b"hello, this is not a trace\n", "not JSON"),
    "binary": (bytes(range(256)) * 8, "not JSON"),
    "object without traceEvents": (b'{"a": 1, "b": [1, 2]}', 'without "traceEvents"'),
    "execution trace": (b'{"schema": "1.0.1", "pid": 7, "nodes": []}', "Execution Trace"),
    "rocprofiler json": (b'{"rocprofiler-sdk-tool": [{"agents": []}]}', "rocprofiler"),
    "events a number": (b'{"traceEvents": 5}', "not a list"),
    "events an object": (b'{"traceEvents": {"a": 1}}', "not a list"),
    "truncated plain": (TEXT[: len(TEXT) * 2 // 3], "truncated"),
    "truncated gzip": (gzip.compress(TEXT)[:-12], "truncated"),
    "corrupt gzip": (gzip.compress(TEXT)[:20] + b"\x00garbage" * 20, "corrupt gzip"),
    "gzip trailing garbage": (gzip.compress(TEXT) + b"garbage!", "after the end of the gzip"),
    "trailing garbage": (TEXT + b"\nxyz", "followed by other data"),
}
# Each command that reads a trace, with {trace} where the bad input goes ({good}: a valid one).
COMMANDS: dict[str, list[str]] = {
    "kernels": ["kernels", "{trace}"],
    "gaps": ["gaps", "{trace}"],
    "steps": ["steps", "{trace}"],
    "summary": ["summary", "{trace}"],
    "ops": ["ops", "{trace}"],
    "memory": ["memory", "{trace}"],
    "source": ["source", "{trace}"],
    "snapshot": ["snapshot", "{trace}", "-o", "{out}/snap.json"],
    "export": ["export", "{trace}", "-o", "{out}/tables"],
    "trim": ["trim", "{trace}", "-o", "{out}/small.json.gz"],
    "diff base": ["diff", "{trace}", "{good}"],
    "diff new": ["diff", "{good}", "{trace}"],
}
# The commands that take a run, and what they say of an empty directory: an empty run (1); to
# diff, a run against one trace (a usage error).
_EMPTY_RUN = (1, "a directory without trace files")
_MIXED = (2, "compare a run with a run")
RUN_COMMANDS = {"kernels": _EMPTY_RUN, "gaps": _EMPTY_RUN, "steps": _EMPTY_RUN,
                "snapshot": _EMPTY_RUN, "memory": _EMPTY_RUN, "diff base": _MIXED,
                "diff new": _MIXED}  # fmt: skip
runner = CliRunner()


def _bad_file(tmp_path: Path, kind: str) -> Path:
    data, _ = BAD[kind]
    path = tmp_path / (kind.replace(" ", "_") + ".json")
    if data == "dir":
        path.mkdir()
    elif isinstance(data, bytes):
        path.write_bytes(data)
    return path


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_input_is_one_line_exit_1(tmp_path: Path, command: str, kind: str) -> None:
    good = tmp_path / "good.json"
    good.write_bytes(TEXT)
    out = tmp_path / "out"
    out.mkdir()
    trace = _bad_file(tmp_path, kind)
    fill = {"trace": str(trace), "good": str(good), "out": str(out)}
    r = runner.invoke(app, [a.format(**fill) for a in COMMANDS[command]] + ["-q"])
    lines = r.stderr.strip().splitlines()
    exit_code, fragment = 1, BAD[kind][1]
    if kind == "directory" and command in RUN_COMMANDS:  # a directory is a run (#15)
        exit_code, fragment = RUN_COMMANDS[command]
    assert r.exit_code == exit_code, (r.stdout, r.stderr)
    assert len(lines) == 1 and lines[0].startswith("traceview: error: "), r.stderr
    assert fragment in lines[0], lines[0]
    assert r.stdout == ""
    assert list(out.iterdir()) == []  # no snapshot, no half-written tables left behind


def _demo_kernels() -> int:
    return len(ref.gpu_events(ref.load_trace(DEMO)[1], ("kernel",)))


@pytest.mark.parametrize("command", ["kernels", "gaps", "steps", "summary", "ops", "memory"])
def test_each_report_command_as_a_subprocess(command: str) -> None:
    r = run_cli(command, str(DEMO), "-f", "json", "-q")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["trace"]["path"] == str(DEMO)
    assert doc["trace"]["events_read"] == len(ref.load_trace(DEMO)[1])
    if command == "kernels":
        assert doc["totals"]["count"] == _demo_kernels()


def test_snapshot_export_diff_and_cache_as_subprocesses(tmp_path: Path) -> None:
    snap = tmp_path / "demo.snapshot.json"
    r = run_cli("snapshot", str(DEMO), "-o", str(snap))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and f"Wrote {snap}" in r.stderr
    snap.unlink()
    r = run_cli("snapshot", str(DEMO), "-o", str(snap), "-q")
    assert r.returncode == 0 and r.stdout == r.stderr == "" and snap.is_file(), r.stderr
    assert json.loads(snap.read_text())["trace"]["path"] == str(DEMO)

    tables = tmp_path / "tables"
    r = run_cli("export", str(DEMO), "-o", str(tables), "-q")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tables.iterdir()) == sorted(EXPORT_FILES)

    r = run_cli("diff", str(snap), str(DEMO), "-f", "json", "-q")
    assert r.returncode == 0, r.stderr
    totals = json.loads(r.stdout)["totals"]  # the same trace on both sides: no change
    assert totals["kernel_time_us"]["delta"] == 0 and totals["kernel_count"]["delta"] == 0
    assert totals["kernel_time_us"]["after"] > 0

    r = run_cli("cache", "info")
    assert r.returncode == 0, r.stderr
    assert "entries" in r.stdout

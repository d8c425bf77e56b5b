"""Traces from pipes (issue #13): stdin (``-``), /dev/stdin, ``<(zcat ...)`` and a named pipe,
plain or gzip, give the JSON a file gives; read once, not cached, said on stderr."""

from __future__ import annotations

import gzip
import json
import os
import shlex
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

DEMO = ROOT / "fixtures" / "demo.json.gz"
COMMANDS = ("kernels", "gaps", "steps", "summary", "ops", "snapshot", "memory")
PIPE_NOTE = "is a pipe: read once as it comes, not cached"


def _env(cache: Path) -> dict[str, str]:
    return {"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
            "TRACEVIEW_CACHE_DIR": str(cache)}  # fmt: skip


def _run(
    args: list[str], cache: Path, stdin: Any = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "traceview", *args]
    return subprocess.run(
        command, stdin=stdin, capture_output=True, text=True, env=_env(cache), timeout=120
    )


def _json_args(command: str) -> list[str]:
    return [] if command == "snapshot" else ["-f", "json"]


def _document(output: str) -> Any:
    """The JSON output without the input's path (the only thing a pipe changes)."""
    document = json.loads(output)
    document.get("trace", {}).pop("path", None)
    return document


@pytest.fixture(scope="module")
def from_file(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each command's JSON on the demo trace read as a file."""
    cache = tmp_path_factory.mktemp("cache")
    documents = {}
    for command in COMMANDS:
        run = _run([command, str(DEMO), *_json_args(command)], cache)
        assert run.returncode == 0, run.stderr
        documents[command] = _document(run.stdout)
    return documents


@pytest.mark.parametrize("command", COMMANDS)
def test_stdin_from_a_pipe_gives_the_files_json(
    command: str, from_file: dict[str, Any], tmp_path: Path
) -> None:
    """gzip bytes written into stdin by a thread (a real pipe, read as it comes)."""
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "traceview", command, "-", *_json_args(command)],
        stdin=read_end, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=_env(tmp_path / "cache"),
    )  # fmt: skip
    os.close(read_end)
    pipe = os.fdopen(write_end, "wb")
    writer = threading.Thread(target=_write_slowly, args=(pipe, DEMO.read_bytes()))
    writer.start()
    out, err = proc.communicate(timeout=120)
    writer.join()
    assert proc.returncode == 0, err
    assert _document(out) == from_file[command]  # size_bytes too: the gzip bytes read
    assert err.decode() == f"traceview: note: - {PIPE_NOTE}\n"
    assert not any((tmp_path / "cache").rglob("meta.json"))  # nothing cached


def _write_slowly(pipe: Any, data: bytes) -> None:
    """Write in pieces with pauses, so the reader sees short reads and waits."""
    for start in range(0, len(data), 100_000):
        pipe.write(data[start : start + 100_000])
        pipe.flush()
        time.sleep(0.01)
    pipe.close()


def test_plain_text_redirected_into_stdin(from_file: dict[str, Any], tmp_path: Path) -> None:
    plain = tmp_path / "demo.json"
    plain.write_bytes(gzip.decompress(DEMO.read_bytes()))
    with plain.open("rb") as stdin:
        run = _run(["kernels", "-", "-f", "json"], tmp_path, stdin=stdin)
    assert run.returncode == 0, run.stderr
    document = _document(run.stdout)
    assert document["trace"].pop("size_bytes") == plain.stat().st_size
    expected = dict(from_file["kernels"], trace=dict(from_file["kernels"]["trace"]))
    expected["trace"].pop("size_bytes")
    assert document == expected


@pytest.mark.parametrize("command", ["kernels", "gaps"])
def test_process_substitution_and_dev_stdin(
    command: str, from_file: dict[str, Any], tmp_path: Path
) -> None:
    """``traceview kernels <(zcat t.gz)`` and ``/dev/stdin`` in bash, plain text."""
    traceview = f"{shlex.quote(sys.executable)} -m traceview"
    demo = shlex.quote(str(DEMO))
    for line in (
        f"{traceview} {command} <(zcat {demo}) -f json",
        f"zcat {demo} | {traceview} {command} /dev/stdin -f json",
    ):
        run = subprocess.run(["bash", "-c", line], capture_output=True, text=True,
                             env=_env(tmp_path), timeout=120)  # fmt: skip
        assert run.returncode == 0, run.stderr
        document = _document(run.stdout)
        document["trace"].pop("size_bytes")
        expected = json.loads(json.dumps(from_file[command]))
        expected["trace"].pop("size_bytes")
        assert document == expected, line
        assert PIPE_NOTE in run.stderr


def test_a_named_pipe_waits_for_its_writer(from_file: dict[str, Any], tmp_path: Path) -> None:
    """A FIFO without a writer yet: a note on stderr (not a silent hang), then the data a
    thread writes is read as from the file."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [sys.executable, "-m", "traceview", "kernels", str(fifo), "-f", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tmp_path), text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        assert proc.stderr.readline() == f"traceview: note: {fifo} {PIPE_NOTE}\n"
        assert proc.stderr.readline().startswith(f"traceview: waiting for data on {fifo}")

        def write() -> None:
            with fifo.open("wb") as f:
                _write_slowly(f, DEMO.read_bytes())

        writer = threading.Thread(target=write)
        writer.start()
        out, err = proc.communicate(timeout=120)
        writer.join()
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    assert _document(out) == from_file["kernels"]


def test_diff_reads_one_side_from_stdin(tmp_path: Path) -> None:
    both = _run(["diff", str(DEMO), str(DEMO), "-f", "json"], tmp_path)
    with DEMO.open("rb") as stdin:
        piped = _run(["diff", "-", str(DEMO), "-f", "json"], tmp_path, stdin=stdin)
    assert piped.returncode == 0, piped.stderr
    assert _without_paths(json.loads(piped.stdout)) == _without_paths(json.loads(both.stdout))
    with DEMO.open("rb") as stdin:
        twice = _run(["diff", "-", "-"], tmp_path, stdin=stdin)
    assert twice.returncode == 2
    assert twice.stderr == "traceview: error: diff: only one side can be read from stdin (-)\n"


def test_diff_takes_a_snapshot_from_a_pipe(tmp_path: Path) -> None:
    snapshot = _run(["snapshot", str(DEMO)], tmp_path)
    piped = subprocess.run(
        [sys.executable, "-m", "traceview", "diff", "-", str(DEMO), "-f", "json"],
        input=snapshot.stdout, capture_output=True, text=True, env=_env(tmp_path), timeout=120,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert json.loads(piped.stdout)["base"]["source"] == "snapshot"


def _without_paths(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_paths(v) for k, v in value.items() if k != "path"}
    if isinstance(value, list):
        return [_without_paths(v) for v in value]
    return value


def test_export_from_a_pipe_equals_the_files(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    assert _run(["export", str(DEMO), "-o", str(tmp_path / "file")], tmp_path).returncode == 0
    with DEMO.open("rb") as stdin:
        run = _run(["export", "-", "-o", str(tmp_path / "pipe")], tmp_path, stdin=stdin)
    assert run.returncode == 0, run.stderr
    for name in ("gpu.parquet", "runtime.parquet", "cpu.parquet", "names.parquet"):
        file_table = pq.read_table(tmp_path / "file" / name)
        assert pq.read_table(tmp_path / "pipe" / name).equals(file_table), name


@pytest.mark.parametrize("compress", [False, True])
def test_an_sqlite_export_from_a_pipe_is_one_line(compress: bool, tmp_path: Path) -> None:
    database = tmp_path / "report.sqlite"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE TARGET_INFO_GPU (id INTEGER)")
    connection.close()
    data = database.read_bytes()
    run = subprocess.run(
        [sys.executable, "-m", "traceview", "kernels", "-"],
        input=gzip.compress(data) if compress else data, capture_output=True,
        env=_env(tmp_path), timeout=120,
    )  # fmt: skip
    assert run.returncode == 1
    assert run.stderr.decode().splitlines()[-1] == (
        "traceview: error: -: an SQLite database (an Nsight Systems export?) cannot be read "
        "from a pipe: SQLite reads a file in place; save it to a file and pass its path"
    )


def test_an_empty_pipe_and_ignored_options_are_said(tmp_path: Path) -> None:
    run = _run(["kernels", "-"], tmp_path, stdin=subprocess.PIPE)  # closed at once: empty
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == "traceview: error: -: empty input, not a trace"
    with DEMO.open("rb") as stdin:
        run = _run(["kernels", "-", "--verify", "--refresh", "--top", "1"], tmp_path, stdin=stdin)
    assert run.returncode == 0, run.stderr
    assert run.stderr == f"traceview: note: - {PIPE_NOTE}; --verify and --refresh ignored\n"
    with DEMO.open("rb") as stdin:
        quiet = _run(["kernels", "-", "--quiet", "--top", "1"], tmp_path, stdin=stdin)
    assert quiet.stderr == ""

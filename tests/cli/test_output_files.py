"""Where reports go: -o never writes the input, devices are written through, files get the
user's permissions, failures leave nothing behind, stdout errors are one line."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_cli
from typer.testing import CliRunner

from traceview.cache import store
from traceview.cli import app

TRACE = {
    "traceEvents": [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 10, "dur": 5, "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7,
         "ts": 20, "dur": 30, "args": {"device": 0, "stream": 7, "correlation": 7}},
    ]
}  # fmt: skip
WRITERS = {
    "kernels": ["kernels", "{trace}", "-q", "-o", "{out}"],
    "gaps": ["gaps", "{trace}", "-q", "--gap-output", "{out}"],
    "snapshot": ["snapshot", "{trace}", "-q", "-o", "{out}"],
    "export": ["export", "{trace}", "-q", "-o", "{out}"],
    "steps": ["steps", "{trace}", "-q", "-o", "{out}"],
    "summary": ["summary", "{trace}", "-q", "-o", "{out}"],
    "diff": ["diff", "{trace}", "{trace}", "-q", "-o", "{out}"],
    "ops": ["ops", "{trace}", "-q", "-o", "{out}"],
    "trim": ["trim", "{trace}", "-q", "-o", "{out}"],
}
# The commands whose -o holds their output in the chosen format, instead of stdout.
SAVERS = {"steps": "table json csv md", "summary": "table json md", "diff": "table json md",
          "ops": "table json csv md"}  # fmt: skip
runner = CliRunner()


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(TRACE))
    return path


def args(command: str, trace: Path, out: Path | str) -> list[str]:
    return [a.format(trace=trace, out=out) for a in WRITERS[command]]


def one_error_line(r: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code, r.stderr
    assert len(lines) == 1 and lines[0].startswith("traceview: error: "), r.stderr
    assert fragment in lines[0] and "Traceback" not in r.stderr


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("link", ["same", "hard", "symlink"])
@pytest.mark.parametrize("command", sorted(WRITERS))
def test_the_input_is_never_written(trace: Path, tmp_path: Path, command: str, link: str) -> None:
    out = trace if link == "same" else tmp_path / f"{link}.json"
    if link == "hard":
        os.link(trace, out)
    elif link == "symlink":
        out.symlink_to(trace)
    before = digest(trace)
    r = run_cli(*args(command, trace, out), "--force")
    one_error_line(r, 2, "is the input trace")
    assert digest(trace) == before and trace.stat().st_ino == out.stat().st_ino


@pytest.mark.parametrize(
    ("command", "fmt"), [(c, f) for c, formats in SAVERS.items() for f in formats.split()]
)
def test_o_writes_what_stdout_would_show(
    trace: Path, tmp_path: Path, command: str, fmt: str
) -> None:
    """-o FILE holds what stdout shows when piped (table: plain text), and stdout is empty."""
    shown = runner.invoke(app, [*args(command, trace, "-")[:-2], "-f", fmt])
    assert shown.exit_code == 0, shown.output
    out = tmp_path / f"out.{fmt}"
    saved = runner.invoke(app, [*args(command, trace, out), "-f", fmt])
    assert saved.exit_code == 0, saved.output
    assert saved.stdout == "" and out.read_text() == shown.stdout
    again = runner.invoke(app, [*args(command, trace, out), "-f", fmt])
    assert again.exit_code == 2 and "exists" in again.stderr  # before any reading
    assert runner.invoke(app, [*args(command, trace, out), "-f", fmt, "--force"]).exit_code == 0


def test_export_into_a_directory_holding_the_trace_as_a_table(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    trace = tmp_path / "out" / "meta.json"
    trace.write_text(json.dumps(TRACE))
    before = digest(trace)
    r = run_cli("export", str(trace), "-q", "-o", str(tmp_path / "out"), "--force")
    one_error_line(r, 2, "is the input trace")
    assert digest(trace) == before


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
@pytest.mark.parametrize("command", ["kernels", "snapshot"])
def test_output_at_a_directory(trace: Path, tmp_path: Path, command: str, force: list[str]) -> None:
    (tmp_path / "dir").mkdir()
    r = run_cli(*args(command, trace, tmp_path / "dir"), *force)
    one_error_line(r, 2, "is a directory")


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
def test_export_to_a_file(trace: Path, tmp_path: Path, force: list[str]) -> None:
    (tmp_path / "file").write_text("mine")
    r = run_cli(*args("export", trace, tmp_path / "file"), *force)
    one_error_line(r, 2, "not a directory")
    assert (tmp_path / "file").read_text() == "mine"


def test_output_to_a_character_device(trace: Path) -> None:
    r = run_cli(*args("kernels", trace, os.devnull))
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


@pytest.mark.parametrize(
    ("command", "fragment"), [("snapshot", '"traceview-snapshot"'), ("kernels", "    P99  ")]
)
def test_output_through_a_symlink_to_stdout(
    trace: Path, tmp_path: Path, command: str, fragment: str
) -> None:
    link = tmp_path / "out"
    link.symlink_to("/proc/self/fd/1")
    r = run_cli(*args(command, trace, link))
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == "/proc/self/fd/1"
    assert fragment in r.stdout


def test_output_to_dev_stdout_redirected_to_a_file(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    r = _shell(f'> "{out}"', "kernels", str(trace), "-q", "-f", "json", "-o", "/dev/stdout")
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert text.startswith("{") and text.index('"schema_version"') < text.index("    P99  ")


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_output_files_follow_the_umask(trace: Path, tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        for command in ("kernels", "snapshot"):
            out = tmp_path / f"{command}.out"
            r = runner.invoke(app, args(command, trace, out))
            assert r.exit_code == 0, r.output
            assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask
    finally:
        os.umask(old)


def test_overwriting_keeps_the_file_mode(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.txt"
    out.write_text("old")
    out.chmod(0o640)
    assert runner.invoke(app, [*args("kernels", trace, out), "--force"]).exit_code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and "old" not in out.read_text()


def _no_space(*args: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("command", ["kernels", "snapshot"])
def test_a_failed_write_leaves_no_temp_file(
    trace: Path, tmp_path: Path, command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    monkeypatch.setattr(os, "replace", _no_space)  # the last step of an atomic write
    r = runner.invoke(app, [*args(command, trace, out_dir / "report"), "--no-cache"])
    assert r.exit_code == 1 and "No space left on device" in r.output, r.output
    assert list(out_dir.iterdir()) == []


def _fail_on_second_table(monkeypatch: pytest.MonkeyPatch) -> None:
    write = store._write

    def failing(path: Path, table: object, row_group_size: int | None = None) -> int:
        if path.name == "runtime.parquet":  # the second table: gpu.parquet is written
            path.write_bytes(b"partial")
            _no_space()
        return write(path, table, row_group_size)

    monkeypatch.setattr(store, "_write", failing)


def test_a_failed_export_removes_only_what_it_created(
    trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    _fail_on_second_table(monkeypatch)
    for out in (mine, tmp_path / "new" / "tables"):
        r = runner.invoke(app, [*args("export", trace, out), "--force"])
        assert r.exit_code == 1 and "No space left on device" in r.output, r.output
    assert [p.name for p in mine.iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "trace.json"]


def _shell(redirect: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """traceview with its stdout redirected by the shell (``>/dev/full``, ``>&-``)."""
    return subprocess.run(
        ["/bin/sh", "-c", f'"$@" {redirect}', "sh", sys.executable, "-m", "traceview", *argv],
        stdout=subprocess.DEVNULL if redirect == ">&-" else None,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
        timeout=120,
    )


@pytest.mark.parametrize("redirect", [">/dev/full", ">&-"])
@pytest.mark.parametrize("argv", [["kernels", "-f", "json"], ["steps"], ["snapshot"]])
def test_stdout_that_cannot_be_written(trace: Path, redirect: str, argv: list[str]) -> None:
    r = _shell(redirect, argv[0], str(trace), "-q", *argv[1:])
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1, r.stderr
    assert len(lines) == 1 and lines[0].startswith("traceview: error: cannot write to stdout")
    assert "Traceback" not in r.stderr


_FULL_DISK = """d=$1; shift
mount -t tmpfs -o size=64k tmpfs "$d" || exit 99
head -c 60000 /dev/zero > "$d/filler" 2>/dev/null
"$@" > /dev/null
echo "rc=$?"
ls -A "$d"
"""


def _on_a_full_disk(directory: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """traceview writing into ``directory``, a 64 KB tmpfs filled to 4 KB of space (mounted in
    a user namespace, so only this process sees it)."""
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", _FULL_DISK, "sh", str(directory), sys.executable, "-m",
         "traceview", *argv],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
    )  # fmt: skip


def _can_mount() -> bool:
    try:
        return subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


@pytest.mark.skipif(not _can_mount(), reason="no unshare -rm to mount a small tmpfs")
@pytest.mark.parametrize("command", ["kernels", "gaps", "snapshot", "export"])
def test_a_full_disk_leaves_nothing_behind(trace: Path, tmp_path: Path, command: str) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    big = tmp_path / "big.json"  # a report larger than the 4 KB left
    events = [TRACE["traceEvents"][0]] + [  # one after another: a device gap between each two
        {**TRACE["traceEvents"][1], "name": f"kernel_{i:04d}_" + "x" * 60, "ts": 20 + 40 * i}
        for i in range(200)
    ]
    big.write_text(json.dumps({"traceEvents": events}))
    r = _on_a_full_disk(disk, *args(command, big, disk / "out"), "--no-cache")
    assert r.stdout.split() == ["rc=1", "filler"], (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "No space left on device" in lines[0], r.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["ranks", "{run}", "-o", "{victim}"],
        ["steps", "{run}", "-o", "{victim}"],
        ["snapshot", "{run}", "-o", "{victim}"],
        ["diff", "{run}", "{other}", "-o", "{victim}"],
    ],
)
def test_a_run_output_is_never_one_of_its_rank_files(tmp_path: Path, argv: list[str]) -> None:
    """A rank file inside a directory given as a run is an input too: refused before any
    reading, --force or not."""
    run, other = tmp_path / "run", tmp_path / "other"
    for directory in (run, other):
        directory.mkdir()
        for rank in (0, 1):
            (directory / f"rank{rank}.json").write_text(json.dumps(TRACE))
    victim = other / "rank1.json" if argv[0] == "diff" else run / "rank1.json"
    before = digest(victim)
    fill = {"run": run, "other": other, "victim": victim}
    r = run_cli(*[a.format(**fill) for a in argv], "--force", "-q")
    one_error_line(r, 2, "is the input trace")
    assert digest(victim) == before


def test_export_writes_from_the_canonical_events_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """By the time the tables are written, the read's own columns that canonical renumbers
    are gone: not held twice (26 MB at 7.8 GB)."""
    import gc
    import weakref

    from traceview.app.reading import read_trace

    read_names: list[weakref.ref[object]] = []
    alive: list[bool] = []
    real_read, real_export = read_trace, store.export_tables

    def read(*args: Any, **kwargs: Any) -> Any:
        events = real_read(*args, **kwargs)
        read_names.append(weakref.ref(events.gpu.name))
        return events

    def export(events: Any, directory: Path) -> list[str]:
        gc.collect()
        alive.append(read_names[0]() is not None)
        return real_export(events, directory)

    monkeypatch.setattr("traceview.app.commands.read_trace", read)
    monkeypatch.setattr(store, "export_tables", export)
    demo = ROOT / "fixtures" / "demo.json.gz"
    r = CliRunner().invoke(
        app, ["export", str(demo), "-q", "--no-cache", "-o", str(tmp_path / "o")]
    )
    assert r.exit_code == 0, r.output
    assert alive == [False]


def test_export_lets_go_of_each_large_table_once_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU rows, the runtime calls and the flows are written first, each let go of once
    written: none is held by the time the CPU rows are (78, 39 and 44 MiB at 7.8 GB)."""
    import gc
    import weakref

    from traceview.columns import model

    made: list[weakref.ref[object]] = []
    alive: list[list[bool]] = []
    real_canonical, real_write_cpu = model.canonical, store._write_cpu

    def canonical(events: Any) -> Any:
        out = real_canonical(events)
        made.extend(weakref.ref(c) for c in (out.gpu.ts, out.runtime.ts, out.flows.ts))
        return out

    def write_cpu(path: Path, cpu: Any) -> int:
        gc.collect()
        alive.append([ref() is not None for ref in made])
        return real_write_cpu(path, cpu)

    monkeypatch.setattr(model, "canonical", canonical)
    monkeypatch.setattr(store, "_write_cpu", write_cpu)
    demo = ROOT / "fixtures" / "demo.json.gz"
    r = CliRunner().invoke(
        app, ["export", str(demo), "-q", "--no-cache", "-o", str(tmp_path / "o")]
    )
    assert r.exit_code == 0, r.output
    assert alive == [[False, False, False]]


@pytest.mark.parametrize(
    ("argv", "where"),
    [
        (["ops", "-f", "json"], "commands"),
        (["ops", "--level", "top", "-f", "json"], "commands"),
        (["audit", "-f", "json"], "commands"),
        (["snapshot"], "commands"),
        (["diff", "{trace}", "-f", "json"], "commands"),
        (["energy", "--power", "{log}", "--power-tz", "UTC", "-f", "json"], "commands"),
        (["source", "-f", "json"], "source"),
    ],
)
def test_a_command_that_never_reads_the_launch_configurations_leaves_them_out(
    argv: list[str], where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``unique`` alone reads the GPU rows' launch configurations (4 B a row: 8.5 MiB of a
    read at 7.8 GB): every other command's read leaves them out, and its output is the
    same (the suite's real traces run each one; a Dropped column read fails loudly)."""
    from traceview.app.reading import read_trace
    from traceview.columns.schema import GPU_LAUNCH

    demo = ROOT / "fixtures" / "demo.json.gz"
    log = tmp_path / "power.csv"
    log.write_text("timestamp, index, power.draw [W]\n2024/05/01 10:00:00.000, 0, 100 W\n")
    unused: list[frozenset[str]] = []

    def read(*args: Any, **kwargs: Any) -> Any:
        unused.append(kwargs.get("unused", frozenset()))
        return read_trace(*args, **kwargs)

    monkeypatch.setattr(f"traceview.app.{where}.read_trace", read)
    fill = {"trace": str(demo), "log": str(log)}
    CliRunner().invoke(
        app, [argv[0], str(demo), *[a.format(**fill) for a in argv[1:]], "-q", "--no-cache"]
    )
    assert unused and all(GPU_LAUNCH in u for u in unused), unused

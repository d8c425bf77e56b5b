"""The edges of issue #34: sums beyond int64, run directories, ranks beyond int64, the cache
index and last_trace, messages."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_cli


def _rank_file(path: Path, rank: Any | None, durs: tuple[int, ...] = (1000,)) -> Path:
    """A trace with kernels of ``durs`` µs on device 0 (``distributedInfo.rank`` if given)."""
    kernels = [
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10 + i,
         "dur": dur, "args": {"device": 0, "stream": 7}}
        for i, dur in enumerate(durs)
    ]  # fmt: skip
    doc: dict[str, Any] = {} if rank is None else {"distributedInfo": {"rank": rank}}
    doc["traceEvents"] = kernels
    path.write_text(json.dumps(doc))
    return path


def _one_line(r: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code, r.stderr
    assert len(lines) == 1 and lines[0].startswith("traceview: error: "), r.stderr
    assert fragment in lines[0], r.stderr


# ------------------------------------------------------------------------- sums beyond int64


def test_kernel_totals_beyond_int64_are_refused_not_wrapped(tmp_path: Path) -> None:
    trace = _rank_file(tmp_path / "t.json", None, (2**61 // 1000,) * 8)
    for command in ("kernels", "snapshot"):
        _one_line(run_cli(command, str(trace), "--no-cache"), 1, "more than int64 ns hold")
    fine = _rank_file(tmp_path / "f.json", None, (2**61 // 1000,) * 3)
    r = run_cli("kernels", str(fine), "--no-cache", "-f", "json")
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)["kernels"]
    assert row["total_us"] == 3 * (2**61 // 1000)


def _cpu_ops_file(path: Path, ops: int) -> Path:
    """A trace of ``ops`` concurrent CPU ops of 2^61 ns (one thread each) in one step, each
    launching one 100 µs kernel."""
    big = 2**61 // 1000
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": 0, "dur": big + 2000},
    ]  # fmt: skip
    for i in range(ops):
        events += [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1 + i, "ts": 1,
             "dur": big, "args": {"External id": i + 1}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
             "tid": 1 + i, "ts": 2 + i, "dur": 5, "args": {"correlation": 100 + i}},
            {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10 + 200 * i,
             "dur": 100, "args": {"device": 0, "stream": 7, "correlation": 100 + i}},
        ]  # fmt: skip
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _numbers(value: Any) -> list[float]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return [value] if ok else []


def test_cpu_op_sums_beyond_int64_are_refused_not_wrapped(tmp_path: Path) -> None:
    """8 CPU ops of 2^61 ns: their CPU time wrapped to −7.616 µs in ops and summary; every
    command that sums them refuses with one line, the others print no negative figure."""
    trace = _cpu_ops_file(tmp_path / "t.json", 8)
    for command in ("ops", "summary"):
        _one_line(run_cli(command, str(trace), "-f", "json"), 1, "more than int64 ns hold")
    html = tmp_path / "r.html"
    _one_line(run_cli("report", str(trace), "-o", str(html)), 1, "more than int64 ns hold")
    for command in ("kernels", "gaps", "steps", "unique", "memory"):
        r = run_cli(command, str(trace), "-f", "json")
        assert r.returncode == 0, r.stderr
        assert min(_numbers(json.loads(r.stdout))) >= 0, command
    snap = tmp_path / "s.json"
    assert run_cli("snapshot", str(trace), "-o", str(snap)).returncode == 0
    assert min(_numbers(json.loads(snap.read_text()))) >= 0


def test_cpu_op_sums_within_int64_are_exact(tmp_path: Path) -> None:
    trace = _cpu_ops_file(tmp_path / "t.json", 3)  # 3 × 2^61 ns < 2^63
    r = run_cli("ops", str(trace), "--no-cache", "-f", "json")
    assert r.returncode == 0, r.stderr
    (row,) = [o for o in json.loads(r.stdout)["ops"] if o["name"] == "aten::mm"]
    assert row["cpu_time_us"] == 3 * (2**61 // 1000)


# --------------------------------------------------------------------------- run directories


@pytest.mark.parametrize("odd", ["dangling", "fifo", "directory", "dev-zero"])
def test_every_run_entry_is_accounted_for(tmp_path: Path, odd: str) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for rank in range(3):
        _rank_file(run / f"rank{rank}.json", rank)
    entry = run / "rank3.json"
    if odd == "dangling":
        entry.symlink_to(tmp_path / "gone.json")
    elif odd == "fifo":
        os.mkfifo(entry)
    elif odd == "directory":
        entry.mkdir()
    else:
        entry.symlink_to("/dev/zero")
    why = {"dangling": "a dangling symlink", "fifo": "a FIFO", "directory": "a directory",
           "dev-zero": "a device"}[odd]  # fmt: skip
    r = run_cli("ranks", str(run), "--no-cache")
    _one_line(r, 1, f"{entry} ({why})")


@pytest.mark.parametrize("where", ["header", "name"])
def test_ranks_beyond_int64_are_one_line(tmp_path: Path, where: str) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _rank_file(run / "rank0.json", 0)
    if where == "header":
        _rank_file(run / "b.json", 2**70)
    else:
        _rank_file(run / f"rank{2**70}.json", None)
    _one_line(run_cli("ranks", str(run), "--no-cache"), 1, f"rank {2**70} is beyond int64")


# ------------------------------------------------------------------ the cache index, last_trace


def test_the_cache_index_never_follows_a_symlink(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    trace = _rank_file(tmp_path / "t.json", None)
    assert run_cli("kernels", str(trace), "--cache-dir", str(cache)).returncode == 0
    index = cache / "index" / "cache.db"
    assert index.is_file()
    users = tmp_path / "users.db"
    with sqlite3.connect(users) as db:
        db.execute("create table mine (x)")
    db.close()
    before = users.read_bytes()
    for name in os.listdir(cache / "index"):
        os.unlink(cache / "index" / name)
    index.symlink_to(users)
    os.utime(trace, (1, 1))  # a new identity: the index is looked up and written
    r = run_cli("kernels", str(trace), "--cache-dir", str(cache))
    assert r.returncode == 0, r.stderr
    assert users.read_bytes() == before and index.is_symlink()
    clear = run_cli("cache", "clear", "--cache-dir", str(cache))
    assert users.read_bytes() == before and index.is_symlink(), clear.stderr


def test_no_cache_writes_no_last_trace(tmp_path: Path) -> None:
    state = Path(os.environ["TRACEVIEW_CACHE_DIR"])
    trace = _rank_file(tmp_path / "t.json", None)
    assert run_cli("kernels", str(trace), "--no-cache").returncode == 0
    assert not (state / "last_trace").exists()


def test_cache_dir_keeps_last_trace(tmp_path: Path) -> None:
    state = Path(os.environ["TRACEVIEW_CACHE_DIR"])
    cache = tmp_path / "cache"
    trace = _rank_file(tmp_path / "t.json", None)
    assert run_cli("kernels", str(trace), "--cache-dir", str(cache)).returncode == 0
    assert not (state / "last_trace").exists()
    assert (cache / "last_trace").read_text() == str(trace.resolve())
    r = run_cli("gaps", "--cache-dir", str(cache))
    assert r.returncode == 0, r.stderr
    assert f"using the last trace analysed: {trace.resolve()}" in r.stderr


def test_a_30_digit_hist_max_is_one_line(tmp_path: Path) -> None:
    trace = _rank_file(tmp_path / "t.json", None)
    r = run_cli("gaps", str(trace), "--hist-max", "1" * 30, "--no-cache")
    _one_line(r, 2, "longer than the 292 years int64 ns can hold")


# ------------------------------------------------------------------------- pipes and FIFOs


def _run_snapshot(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    for rank in range(2):
        _rank_file(run / f"rank{rank}.json", rank)
    snap = tmp_path / "snap.json"
    assert run_cli("snapshot", str(run), "-o", str(snap), "--no-cache").returncode == 0
    return snap


def _diff(*args: str, stdin: bytes | None = None) -> subprocess.Popen[bytes]:
    env = {"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "traceview", "diff", *args, "--no-cache", "-f", "json"],
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def _write_once(fifo: Path, data: bytes, reader: subprocess.Popen[bytes]) -> None:
    """Open ``fifo`` for writing once the reader has it open (while it runs), write, close."""
    import time

    deadline = time.monotonic() + 30
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError:  # ENXIO: no reader yet
            if reader.poll() is not None or time.monotonic() > deadline:
                return  # it ended (or never opened the FIFO): its exit code tells
            time.sleep(0.05)
    os.set_blocking(fd, True)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


@pytest.mark.parametrize("writer_first", [True, False])
def test_a_run_snapshot_from_a_fifo_is_read_once(tmp_path: Path, writer_first: bool) -> None:
    """Sniffing the kind opens the FIFO once and hands what it read to the loader (a second
    open would find nothing, or wait for a writer forever); one with no writer yet is waited
    on with a note, never silently."""
    snap = _run_snapshot(tmp_path)
    fifo = tmp_path / "snap.fifo"
    os.mkfifo(fifo)
    p = _diff(str(fifo), str(snap))
    if not writer_first:  # the note comes before any writer
        assert p.stderr is not None
        assert "waiting for data on" in p.stderr.readline().decode()
    _write_once(fifo, snap.read_bytes(), p)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    report = json.loads(out)
    assert report["rollup"]["base"]["source"] == "run snapshot"  # not read as a trace


def test_a_run_snapshot_from_stdin(tmp_path: Path) -> None:
    snap = _run_snapshot(tmp_path)
    p = _diff("-", str(snap), stdin=b"")
    out, err = p.communicate(snap.read_bytes(), timeout=60)
    assert p.returncode == 0, err
    assert json.loads(out)["rollup"]["base"]["source"] == "run snapshot"


# ------------------------------------------------------------------------------ crashes


def test_a_step_without_gpu_work_in_a_narrow_table(tmp_path: Path) -> None:
    """Its row had one cell too many ("-" × 6 for 5 device columns): the text table (stdout
    not a terminal) failed with "cannot write to stdout: zip() argument 2 is longer"."""
    events = [
        {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1,
         "ts": 1000 * i, "dur": 900}
        for i in range(2)
    ] + [{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
          "args": {"device": 0, "stream": 7}}]  # fmt: skip
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    env = {"COLUMNS": "60", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "traceview", "steps", str(trace), "--no-cache"],
                       capture_output=True, text=True, env=env, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (row,) = [line for line in r.stdout.splitlines() if line.startswith("ProfilerStep#1")]
    assert (
        row.split()
        == ["ProfilerStep#1", "-", "1.0", "ms", "900.0", "µs", "900.0", "µs", "0", "0.0", "µs"]
        + ["-"] * 5
    )


def test_dask_on_a_run_without_shared_collectives(tmp_path: Path) -> None:
    pytest.importorskip("distributed")
    run = tmp_path / "run"
    run.mkdir()
    for rank in range(2):
        _rank_file(run / f"rank{rank}.json", rank)
    local = run_cli("ranks", str(run), "-f", "json", "--no-cache")
    dask = run_cli("ranks", str(run), "-f", "json", "--no-cache", "--engine", "dask", "-j", "2")
    assert dask.returncode == 0, dask.stderr
    assert json.loads(dask.stdout) == json.loads(local.stdout)


@pytest.mark.parametrize("name", ["TRACEVIEW_PARALLEL_MIN_BYTES", "TRACEVIEW_NSYS_SPLIT_MIN_ROWS"])
def test_a_bad_number_in_the_environment_is_one_line(tmp_path: Path, name: str) -> None:
    trace = _rank_file(tmp_path / "t.json", None)
    if name == "TRACEVIEW_NSYS_SPLIT_MIN_ROWS":
        from nsys_writer import kineto_to_nsys

        kineto_to_nsys(json.loads(trace.read_text()), tmp_path / "t.sqlite")
        trace = tmp_path / "t.sqlite"
    env = {**os.environ, name: "abc", "PYTHONPATH": str(Path(__file__).parents[2])}
    r = subprocess.run([sys.executable, "-m", "traceview", "kernels", str(trace), "--no-cache"],
                       capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    _one_line(r, 2, f"{name}='abc': expected a whole number")


@pytest.mark.parametrize("kind", ["snapshot", "run snapshot"])
def test_a_deeply_nested_snapshot_is_one_line(tmp_path: Path, kind: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / "deep.json"
    if kind == "snapshot":
        path.write_text(f'{{"kind": "traceview-snapshot", "schema_version": 2, "x": {deep}}}')
    else:
        path.write_text(
            f'{{"kind": "traceview-run-snapshot", "schema_version": 1, "x": {deep}, "ranks": []}}'
        )
    r = run_cli("diff", str(path), str(path), "--no-cache")
    _one_line(r, 1, "nested too deeply")


def test_an_ascii_stdout_gets_escapes_and_stand_ins(tmp_path: Path) -> None:
    trace = _rank_file(tmp_path / "t.json", None)
    doc = json.loads(trace.read_text())
    doc["traceEvents"][0]["name"] = "gemm_\u00e9_\U0001f600"
    trace.write_text(json.dumps(doc))
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "PYTHONPATH": str(Path(__file__).parents[2])}

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        command = [sys.executable, "-m", "traceview", *args, str(trace), "--no-cache"]
        return subprocess.run(command, capture_output=True, env=env, timeout=120)

    as_json = run("kernels", "-f", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert as_json.stdout.isascii()
    assert json.loads(as_json.stdout)["kernels"][0]["name"] == "gemm_\u00e9_\U0001f600"
    snapshot = run("snapshot")
    assert snapshot.returncode == 0 and snapshot.stdout.isascii(), snapshot.stderr
    assert json.loads(snapshot.stdout)["kernels"][0]["name"] == "gemm_\u00e9_\U0001f600"
    table = run("kernels")
    assert table.returncode == 0, table.stderr
    assert table.stdout.isascii() and b"1.0 ms" in table.stdout.replace(b"1.00 ms", b"1.0 ms")
    assert b"gemm_\\xe9_\\U0001f600" in table.stdout


# ------------------------------------------------------------------------------ messages


def test_the_partial_warning_names_the_rank_and_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _rank_file(run / "rank0.json", 0, (5,) * 200)
    text = _rank_file(run / "rank1.json", 1, (5,) * 200).read_text()
    (run / "rank1.json").write_text(text[: len(text) // 2])
    r = run_cli("ranks", str(run), "--partial", "--no-cache")
    assert r.returncode == 0, r.stderr
    assert f"warning: rank 1 ({run / 'rank1.json'}): TRUNCATED trace" in r.stderr


def test_an_unreadable_trace_does_not_blame_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from traceview import cache
    from traceview.cache import key

    trace = _rank_file(tmp_path / "t.json", None)

    def unreadable(path: Path) -> str:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(key, "trace_hash", unreadable)
    settings = cache.CacheSettings(directory=tmp_path / "cache", verify=True)  # hashed first
    assert cache.open_slot(trace, settings, keep_cpu=False) is None
    assert "cache" not in capsys.readouterr().err


# ------------------------------------------------------------------------------ quadratic cost


def test_a_cold_run_checks_the_cache_size_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not after each rank's entry (a listing and stat of every entry each time made a cold
    run of 2,000 ranks take 200 s against 12 s without the cache); once, after the run."""
    from typer.testing import CliRunner

    from traceview.cache import manage
    from traceview.cli import app

    run = tmp_path / "run"
    run.mkdir()
    for rank in range(12):
        _rank_file(run / f"rank{rank}.json", rank)
    listed = tmp_path / "listed"
    real = manage.entries

    def counted(root: Path, with_paths: bool = True) -> list[manage.Entry]:
        with listed.open("a") as f:
            f.write("x")
        return real(root, with_paths)

    monkeypatch.setattr(manage, "entries", counted)
    monkeypatch.setenv("TRACEVIEW_CACHE_MAX_SIZE", "0")
    cache = tmp_path / "cache"
    r = CliRunner().invoke(app, ["ranks", str(run), "-j", "2", "--cache-dir", str(cache)])
    assert r.exit_code == 0, r.output
    assert listed.read_text() == "x"  # one check, in the main process
    assert not list((cache / "entries").iterdir())  # and it kept the limit (0: nothing)


def test_dask_workers_check_the_cache_size_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dask's workers evicted after every entry they wrote (12 checks for 12 ranks); now
    once per machine, after the run. The workers are threads of this process here, so the
    count is seen."""
    pytest.importorskip("distributed")
    from distributed import LocalCluster
    from typer.testing import CliRunner

    from traceview import cache
    from traceview.cache import manage
    from traceview.cli import app

    run = tmp_path / "run"
    run.mkdir()
    for rank in range(12):
        _rank_file(run / f"rank{rank}.json", rank)
    calls: list[str] = []
    real = manage.evict

    def counted(root: Path, limit: int, keep: str | None = None) -> manage.Removal:
        calls.append(str(root))
        return real(root, limit, keep)

    monkeypatch.setattr(manage, "evict", counted)
    monkeypatch.setattr(cache, "_evict_each_write", True)  # restored: workers share it here
    monkeypatch.setenv("TRACEVIEW_CACHE_MAX_SIZE", "0")
    where = tmp_path / "cache"
    options = dict(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0")
    with LocalCluster(**options) as cluster:  # type: ignore[arg-type]
        r = CliRunner().invoke(
            app,
            ["ranks", str(run), "--engine", "dask", "--scheduler", cluster.scheduler_address,
             "--cache-dir", str(where)],
        )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert len(calls) == 1, calls  # one machine: one check
    assert not list((where / "entries").iterdir())  # and it kept the limit (0: nothing)


def test_a_run_whose_kernel_times_add_up_beyond_int64_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for rank in range(4):  # each rank fits int64 (3 × 2^61 ns); the run does not
        _rank_file(run / f"rank{rank}.json", rank, (2**61 // 1000,) * 3)
    r = run_cli("kernels", str(run), "--no-cache")
    _one_line(r, 1, "more than int64 ns hold")

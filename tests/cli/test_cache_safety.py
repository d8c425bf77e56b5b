"""The cache deletes only what it created, survives a damaged index and a read-only directory,
cleans up after killed runs, and never calls a pruned entry damaged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from typer.testing import CliRunner

from traceview.cache import manage, root, store
from traceview.cli import app
from traceview.errors import UsageError

runner = CliRunner()


def _cache() -> Path:
    return Path(os.environ["TRACEVIEW_CACHE_DIR"])


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "traceview", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", **(env or {})},
        timeout=120,
    )


def _one_error(r: subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code, r.stderr
    assert len(lines) == 1 and lines[0].startswith("traceview: error: "), r.stderr
    assert fragment in lines[0] and "Traceback" not in r.stderr


def _kernels(trace: Path, *extra: str) -> tuple[str, str]:
    r = runner.invoke(app, ["kernels", str(trace), "-f", "json", "-q", *extra])
    assert r.exit_code == 0, r.output
    return r.stdout, r.stderr


def _files(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


def test_prune_needs_a_unit(demo: Path) -> None:
    _kernels(demo)
    r = _run("cache", "prune", "--max-size", "5")
    _one_error(r, 2, "expected a number with a unit")
    assert len(manage.entries(_cache())) == 1
    assert manage.parse_size("0") == 0 and manage.parse_size("5B") == 5
    assert manage.parse_size("1.5kb") == 1500


def test_a_new_cache_is_marked(demo: Path) -> None:
    _kernels(demo)
    assert root.has_marker(_cache())
    assert (_cache() / "CACHEDIR.TAG").read_text().startswith(root.SIGNATURE)


@pytest.mark.parametrize("command", [["clear"], ["prune", "--max-size", "0"], ["info"]])
def test_a_directory_that_is_not_a_cache_is_refused(tmp_path: Path, command: list[str]) -> None:
    other = tmp_path / "data"
    for name in ("entries/results", "tmp/build", "notes"):
        (other / name).mkdir(parents=True)
        (other / name / "file.txt").write_text("mine")
    before = _files(other)
    r = _run("cache", *command, "--cache-dir", str(other))
    _one_error(r, 2, "not a traceview cache")
    assert _files(other) == before


def test_entries_and_tmp_of_unknown_names_are_not_an_old_cache(tmp_path: Path) -> None:
    other = tmp_path / "data"
    (other / "entries" / "photos").mkdir(parents=True)
    (other / "tmp" / "old-build").mkdir(parents=True)
    r = _run("cache", "clear", "--cache-dir", str(other))
    _one_error(r, 2, "not a traceview cache")
    assert _files(other) == ["entries", "entries/photos", "tmp", "tmp/old-build"]


def test_reading_commands_do_not_use_a_foreign_directory(demo: Path, tmp_path: Path) -> None:
    other = tmp_path / "data"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    cold, _ = _kernels(demo, "--no-cache")
    out, err = _kernels(demo, "--cache-dir", str(other))
    assert out == cold and "not a traceview cache" in err and "reading without" in err
    assert _files(other) == ["keep.txt"]


def test_root_and_home_are_refused(tmp_path: Path) -> None:
    for path in (Path("/"), Path.home(), Path.home().parent):
        with pytest.raises(UsageError, match="refusing to use"):
            root.check(path)
    home = tmp_path / "home"
    home.mkdir()
    r = _run("cache", "clear", "--cache-dir", str(home), env={"HOME": str(home)})
    _one_error(r, 2, "refusing to use")


def test_an_old_cache_without_marker_is_recognised(demo: Path) -> None:
    cold, _ = _kernels(demo)
    (_cache() / "CACHEDIR.TAG").unlink()
    runner.invoke(app, ["cache", "info"])
    assert root.has_marker(_cache())
    (_cache() / "CACHEDIR.TAG").unlink()
    out, err = _kernels(demo)
    assert out == cold and err == "" and root.has_marker(_cache())


def test_clear_removes_only_what_it_can_name(demo: Path) -> None:
    _kernels(demo)
    (_cache() / "entries" / "not-an-entry").mkdir()
    (_cache() / "tmp" / "somebody-elses").mkdir(parents=True)
    (_cache() / "notes.txt").write_text("mine")
    r = runner.invoke(app, ["cache", "clear"])
    assert r.exit_code == 0 and "Removed 1 entry (" in r.stderr, r.output
    assert (_cache() / "entries" / "not-an-entry").is_dir()
    assert (_cache() / "tmp" / "somebody-elses").is_dir()
    assert (_cache() / "notes.txt").read_text() == "mine"
    assert manage.entries(_cache()) == []


def _damage_index() -> None:
    (db,) = (_cache() / "index").glob("cache.db")
    db.write_bytes(b"this is not a database" * 1000)


def test_a_damaged_index_is_rebuilt(demo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cold, _ = _kernels(demo)
    _damage_index()
    out, err = _kernels(demo)
    assert out == cold and err == ""  # no "cache unusable"
    from traceview.cache import key

    monkeypatch.setattr(key, "trace_hash", _no_hash)  # the index answers again
    assert _kernels(demo) == (cold, "")


def _no_hash(path: Path) -> str:
    raise AssertionError(f"{path} hashed: the index was not rebuilt")


def test_clear_with_a_damaged_index(demo: Path) -> None:
    _kernels(demo)
    _damage_index()
    r = _run("cache", "clear")
    assert r.returncode == 0 and r.stderr.startswith("Removed 1 entry ("), r.stderr
    assert manage.entries(_cache()) == []


def _stale_tmp_dir() -> Path:
    """A temp dir as a killed ``--refresh`` leaves it: named with the pid of a dead process."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    leftover = _cache() / "tmp" / f"{'a' * 32}.{int(dead.stdout)}.{'b' * 32}"
    leftover.mkdir(parents=True)
    (leftover / "gpu.parquet").write_bytes(b"x" * 5000)
    return leftover


@pytest.mark.parametrize("command", [["prune"], ["clear"]])
def test_leftovers_of_killed_runs_are_counted_and_removed(demo: Path, command: list[str]) -> None:
    _kernels(demo)
    leftover = _stale_tmp_dir()
    live = _cache() / "tmp" / root.new_tmp_name("c" * 32)  # this process: still writing
    live.mkdir()
    (_cache() / "tmp" / "not-ours").mkdir()
    info = runner.invoke(app, ["cache", "info"])
    assert "leftovers  1 temp dirs of interrupted runs, 5.0 KB" in info.stdout, info.output
    r = runner.invoke(app, ["cache", *command])
    assert r.exit_code == 0 and "1 temp dir from" in r.stderr, r.output
    assert not leftover.exists() and live.is_dir() and (_cache() / "tmp" / "not-ours").is_dir()


def test_an_entry_pruned_during_a_warm_run_is_a_miss(
    demo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold, _ = _kernels(demo)
    read_entry = store.read_entry

    def pruned_meanwhile(directory: Path, meta: dict, *wanted: bool) -> object:
        assert runner.invoke(app, ["cache", "prune", "--max-size", "0"]).exit_code == 0
        return read_entry(directory, meta, *wanted)

    monkeypatch.setattr(store, "read_entry", pruned_meanwhile)
    out, err = _kernels(demo)
    assert out == cold and err == ""  # no "damaged or outdated"


def _can_mount_read_only() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    return probe.returncode == 0


def _read_only(*argv: str) -> subprocess.CompletedProcess[str]:
    """traceview with the cache directory bind-mounted read-only (a user namespace)."""
    cache = str(_cache())
    script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, "sh", cache, sys.executable, "-m", "traceview",
         *argv],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"},
    )  # fmt: skip


@pytest.mark.skipif(not _can_mount_read_only(), reason="no unshare -rm for a read-only mount")
def test_a_read_only_cache(demo: Path) -> None:
    cold, _ = _kernels(demo)
    (entry,) = manage.entries(_cache())
    hit = _read_only("kernels", str(demo), "-f", "json", "-q")
    assert hit.returncode == 0 and hit.stdout == cold and hit.stderr == "", hit.stderr
    for command in (["prune", "--max-size", "0"], ["clear"]):
        r = _read_only("cache", *command)
        _one_error(r, 1, "Removed 0 entries (0 B)")
        assert "Read-only file system" in r.stderr
    assert [e.key for e in manage.entries(_cache())] == [entry.key]


def test_an_edited_meta_json_is_damage(demo: Path) -> None:
    import orjson

    cold, _ = _kernels(demo)
    (entry,) = manage.entries(_cache())
    meta = orjson.loads((entry.directory / store.META).read_bytes())
    meta["read"]["events"] += 1000
    meta["span_ns"] = [meta["span_ns"][0], meta["span_ns"][1] * 2]
    (entry.directory / store.META).write_bytes(orjson.dumps(meta, option=orjson.OPT_INDENT_2))
    out, err = _kernels(demo)
    assert out == cold
    assert "damaged or outdated (meta.json: its content changed); rebuilding it" in err


def test_verify_rehashes_a_trace_edited_in_place(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
        '"ts": 20, "dur": 30, "args": {"device": 0, "stream": 7}}]}'
    )
    before = trace.stat()
    assert '"total_us": 30.0' in _kernels(trace)[0]
    with trace.open("r+b") as f:  # same size, same inode, mtime put back
        data = f.read()
        f.seek(0)
        f.write(data.replace(b'"dur": 30', b'"dur": 40'))
    os.utime(trace, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert '"total_us": 30.0' in _kernels(trace)[0]  # the documented limit of the index
    assert '"total_us": 40.0' in _kernels(trace, "--verify")[0]
    assert '"total_us": 40.0' in _kernels(trace)[0]  # --verify also corrected the index


def test_cpu_rows_survive_a_prune_during_the_analysis(demo: Path) -> None:
    from traceview import cache

    r = runner.invoke(app, ["gaps", str(demo), "-f", "json", "-q"])
    assert r.exit_code == 0, r.output
    slot = cache.open_slot(demo, cache.CacheSettings(), keep_cpu=True)
    assert slot is not None and slot.events is not None and len(slot.events.cpu) > 0
    assert runner.invoke(app, ["cache", "prune", "--max-size", "0"]).exit_code == 0
    assert manage.entries(_cache()) == []  # the analysis reads the CPU rows only now
    assert sum(len(block) for block in slot.events.cpu.blocks()) == len(slot.events.cpu)


def test_a_size_limit_without_unit_in_the_environment(demo: Path) -> None:
    r = _run("kernels", str(demo), "-q", env={"TRACEVIEW_CACHE_MAX_SIZE": "5"})
    assert r.returncode == 0
    assert "TRACEVIEW_CACHE_MAX_SIZE '5': expected a number with a unit" in r.stderr
    assert manage.entries(_cache()) == []

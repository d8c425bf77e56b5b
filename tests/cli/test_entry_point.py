"""The entry point imports only the module of the command it runs (start-up time on every
call), yet help, unknown commands and ``traceview.cli.app`` see every command."""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from tests.conftest import ROOT, run_cli
from traceview.cli import COMMANDS, app

# Run main() as the console script does, then list the modules it imported.
_PROBE = """
import atexit, sys
from traceview.cli import main
atexit.register(lambda: print("MODULES", sorted(sys.modules), file=sys.stderr))
sys.argv = ["traceview", *sys.argv[1:]]
main()
"""


# The same, and the modules of the process that writes a cache entry (a forked one), listed
# as the entry is written.
_PROBE_WRITES = (
    """
import os, sys
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as main() does: numpy starts no thread
import traceview.cache as cache
publish = cache.publish
def listing(*args, **kwargs):
    publish(*args, **kwargs)
    print("MODULES", sorted(sys.modules), file=sys.stderr)
cache.publish = listing
"""
    + _PROBE
)


def _listed(*args: str, env: dict[str, str] | None = None, probe: str = _PROBE) -> list[list[str]]:
    """Each list of modules the probe printed, in order."""
    r = subprocess.run(
        [sys.executable, "-c", probe, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    listed = [line for line in r.stderr.splitlines() if line.startswith("MODULES ")]
    assert listed, r.stderr  # the probe itself failed
    return [list(ast.literal_eval(line.removeprefix("MODULES "))) for line in listed]


def _imported(*args: str, env: dict[str, str] | None = None) -> list[str]:
    return _listed(*args, env=env)[-1]


def _imported_commands(*args: str) -> list[str]:
    prefix = "traceview.cli."
    modules = [m.removeprefix(prefix) for m in _imported(*args) if m.startswith(prefix)]
    return [m for m in modules if m in COMMANDS]


@pytest.mark.parametrize("name", ["kernels", "cache", "trim"])
def test_a_named_command_imports_only_its_module(name: str) -> None:
    assert _imported_commands(name, "--help") == [name]


@pytest.mark.parametrize("args", [[], ["--help"], ["kernel"], ["--version", "-h"], ["-h", "gaps"]])
def test_anything_else_gets_every_command(args: list[str]) -> None:
    assert sorted(_imported_commands(*args)) == sorted(COMMANDS)


def test_version_alone_imports_no_command() -> None:
    """``traceview --version`` prints its line before typer is imported, the line the option
    prints (``--version -h`` goes through typer: the option is eager)."""
    modules = _imported("--version")
    assert "typer" not in modules
    assert not [m for m in modules if m.removeprefix("traceview.cli.") in COMMANDS]
    alone, through_typer = run_cli("--version"), run_cli("--version", "-h")
    assert (alone.returncode, alone.stderr) == (0, "")
    assert alone.stdout == through_typer.stdout
    assert alone.stdout.startswith("traceview ") and "(reader: " in alone.stdout
    for unbuffered in ("", "1"):  # a reader that went away: at the print, or at exit
        assert _closed_pipe("--version", unbuffered) == _closed_pipe("--version", "-h", unbuffered)


def _closed_pipe(*args: str) -> tuple[int, str]:
    """Exit code and stderr of ``traceview *args[:-1]`` writing to a pipe nobody reads
    (``args[-1]``: PYTHONUNBUFFERED)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": args[-1]}
    try:
        r = subprocess.run(
            [sys.executable, "-m", "traceview", *args[:-1]],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=120,
        )
    finally:
        os.close(write_end)
    return r.returncode, r.stderr


# What a command reading a small trace must not import: each only where it is used (the
# cache's store, the report's page, the MCP server, --engine dask, a split read, nsys
# exports, -f csv, rich's tables on a terminal), none of them for `-q -f json`.
_HEAVY = (
    "pyarrow",
    "diskcache",
    "pandas",
    "plotly",
    "dask",
    "distributed",
    "mcp",
    "rich",
    "multiprocessing",
    "sqlite3",
    "csv",
    "tempfile",
    "tomllib",  # a --peaks file
    "numpy.ma",  # np.unique, np.median import it
    "traceview.cache.store",
    "traceview.render.html",
    "traceview.app.engines.dask",
    "traceview.cli.agent",
)


@pytest.mark.parametrize("name", ["kernels", "gaps", "summary", "steps"])
def test_a_small_read_imports_nothing_heavy(name: str) -> None:
    demo = str(ROOT / "fixtures" / "demo.json.gz")
    modules = _imported(name, demo, "--no-cache", "-q", "-f", "json")
    assert f"traceview.cli.{name}" in modules and "traceview.app.reading" in modules  # it read
    pulled = [m for m in modules if any(m == h or m.startswith(h + ".") for h in _HEAVY)]
    if name != "kernels":  # gaps, summary and steps keep CPU rows: spilled to a temporary file
        pulled = [m for m in pulled if m != "tempfile"]
    assert pulled == []


def test_the_list_and_the_suggestion_are_whole() -> None:
    listed = run_cli("--help")
    assert listed.returncode == 0
    at = {name: listed.stdout.find(f"│ {name} ") for name in COMMANDS}
    assert -1 not in at.values()
    order = [at[name] for name in COMMANDS if name != "cache"]  # typer lists groups last
    assert order == sorted(order)
    typo = run_cli("kernel", "x")
    assert typo.returncode == 2
    assert "Did you mean 'kernels'?" in typo.stderr


def test_the_app_has_every_command() -> None:
    group = typer.main.get_command(app)
    assert sorted(group.commands) == sorted(COMMANDS)  # type: ignore[attr-defined]


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed")
def test_no_command_imports_pandas(tmp_path: Path) -> None:
    """pyarrow would import it (0.3 s) to check its inputs: on a cache fill and a warm run."""
    env = {"TRACEVIEW_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    demo = str(ROOT / "fixtures" / "demo.json.gz")
    for run in ("fill", "warm"):
        listed = _listed("summary", demo, "-q", "-f", "json", env=env, probe=_PROBE_WRITES)
        assert len(listed) == (2 if run == "fill" else 1)  # the writer's, then the command's
        assert "traceview.cli.summary" in listed[-1]
        # the entry's writer; a warm run's entry is read by a child (cache.entry_child)
        assert any("pyarrow" in modules for modules in listed) == (run == "fill")
        assert not any("pandas" in modules for modules in listed)
    assert list((tmp_path / "cache" / "entries").iterdir())  # the cache was written


def test_a_cache_writer_imports_no_numpy_ma_nor_pyarrow_fs(tmp_path: Path) -> None:
    """pyarrow imports numpy.ma (~13 ms of a fill's wait) on its first conversion of a numpy
    array: the writer hands it the arrays' memory instead. pyarrow.parquet imports pyarrow.fs
    and ssl (~10 ms): the writer uses pyarrow's writer class without it."""
    env = {"TRACEVIEW_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    demo = str(ROOT / "fixtures" / "demo.json.gz")
    for name in ("kernels", "gaps"):  # gaps: the CPU rows' table too
        writer, command = _listed(name, demo, "-q", "-f", "json", env=env, probe=_PROBE_WRITES)
        assert "pyarrow" in writer  # it wrote the entry
        assert "numpy.ma" not in writer
        assert "pyarrow.fs" not in writer and "pyarrow.parquet" not in writer
        assert "numpy.ma" not in command
    assert len(list((tmp_path / "cache" / "entries").iterdir())) == 1  # gaps completed it


def test_the_library_still_has_pandas() -> None:
    """The guard is the command line's: importing traceview.cli does not install it."""
    assert not any(type(f).__name__ == "NoPandas" for f in sys.meta_path)

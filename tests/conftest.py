"""Shared test helpers: where the real traces are, and how to run the CLI."""

from __future__ import annotations

import functools
import gzip
import importlib.util
import os
import subprocess
import sys
from collections.abc import Callable, Hashable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from traceview.columns.model import TraceEvents

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = ROOT.parent / "shared" / "traces"
NOT_CHROME = {"hta__execution_trace__benchmark_simple_add_et.json.gz"}

# No test depends on the machine's load: hypothesis's per-example deadline (200 ms) failed a
# fast property test under a loaded fresh-clone run (one example 270 ms, 0.35 ms again).
settings.register_profile("traceview", deadline=None)
settings.load_profile("traceview")


# A hung test is stopped, with its stacks where CI's log shows them (see tests/hangs.py).
from hangs import (  # noqa: E402  (pytest finds hooks by their names in this module)
    pytest_configure,
    pytest_runtest_makereport,
    pytest_runtest_protocol,
)

__all__ = ["pytest_configure", "pytest_runtest_makereport", "pytest_runtest_protocol"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="rewrite tests/golden/expected/ from the current output instead of comparing with it",
    )


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """A private plain-JSON copy of the demo trace (tests rename it and append whitespace)."""
    path = tmp_path / "demo.json"
    path.write_bytes(gzip.decompress((ROOT / "fixtures" / "demo.json.gz").read_bytes()))
    return path


@pytest.fixture(autouse=True)
def _private_cache_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tests never touch the user's ~/.cache/traceview."""
    monkeypatch.setenv("TRACEVIEW_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


def real_traces() -> list[Path]:
    """The Chrome traces in ../shared/traces (empty when the folder is absent)."""
    if not SHARED_TRACES.is_dir():
        return []
    return [p for p in sorted(SHARED_TRACES.glob("*.json.gz")) if p.name not in NOT_CHROME]


def trace_params() -> list[object]:
    """Parameters for real-trace tests; one skipped placeholder when there are none."""
    traces = real_traces()
    if not traces:
        return [pytest.param(None, marks=pytest.mark.skip(reason="../shared/traces is absent"))]
    return [pytest.param(p, id=p.name.removesuffix(".json.gz")) for p in traces]


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``traceview`` as a subprocess, the way a user does."""
    return subprocess.run(
        [sys.executable, "-m", "traceview", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={
            "COLUMNS": "200",
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(ROOT),
            "TRACEVIEW_CACHE_DIR": os.environ.get("TRACEVIEW_CACHE_DIR", ""),
        },
        timeout=120,
    )


def load_generator() -> ModuleType:
    """Import fixtures/generate.py by path (it is not part of the package)."""
    name = "traceview_fixtures_generate"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "fixtures" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class RealTrace:
    """One real trace, shared by every test of the session: parsed by the slow reference
    (``raw``) and read by traceview (``events``) each once, on first use, and derived
    results kept by ``derived``; all freed when the session moves to the next trace."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._derived: dict[Hashable, Any] = {}

    @functools.cached_property
    def loaded(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        import reference

        return reference.load_trace(self.path)

    @property
    def raw(self) -> list[dict[str, Any]]:
        """The events as the reference parses them (stdlib json, numbers as Decimal)."""
        return self.loaded[1]

    @functools.cached_property
    def events(self) -> TraceEvents:
        """traceview's columns, CPU rows included."""
        from traceview.columns.parallel import collect_events
        from traceview.read.reader import TraceReader

        return collect_events(TraceReader(self.path), keep_cpu=True)

    @functools.cached_property
    def gpu_events(self) -> TraceEvents:
        """What a read without CPU rows gives (columns.model.without_cpu, tested equal)."""
        from traceview.columns.model import without_cpu

        return without_cpu(self.events)

    def derived(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """``make()``, once per trace and key."""
        if key not in self._derived:
            self._derived[key] = make()
        return self._derived[key]


@pytest.fixture(scope="session", params=trace_params())
def real_trace(request: pytest.FixtureRequest) -> RealTrace:
    """Each real trace in turn, for the whole session: pytest runs every test that uses one
    trace before the next, so only one is held in memory and each is parsed once."""
    return RealTrace(request.param)

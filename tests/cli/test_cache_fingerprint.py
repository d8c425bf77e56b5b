"""A cache entry is valid only for the ingest code that wrote it (traceview.cache.fingerprint)."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path
from typing import Any

import grimp
import pytest
from conftest import ROOT
from typer.testing import CliRunner

import traceview
from traceview.app import reading
from traceview.cache import fingerprint, manage, store
from traceview.cli import app

PACKAGE = Path(traceview.__file__).resolve().parent
runner = CliRunner()
# Imported by the ingest code but unable to change what an entry holds: the version (checked
# on its own), error messages, memory release, wording, the key and the fingerprint itself.
CONTENT_NEUTRAL = {
    "traceview",
    "traceview.errors",
    "traceview.forked",  # Ctrl-C in forked workers: no figure depends on it
    "traceview.parsing",  # env_count: when a read splits in two processes, not what it reads
    "traceview.humanize",
    "traceview.cache.key",
    "traceview.cache.fingerprint",
}


def _kernels_json(trace: Path) -> str:
    r = runner.invoke(app, ["kernels", str(trace), "-f", "json", "-q"])
    assert r.exit_code == 0, r.output
    return r.stdout


def test_other_ingest_code_misses_the_old_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "demo.json"
    trace.write_bytes(gzip.decompress((ROOT / "fixtures" / "demo.json.gz").read_bytes()))
    cold = _kernels_json(trace)
    (entry,) = manage.entries(Path(os.environ["TRACEVIEW_CACHE_DIR"]))
    assert store.read_meta(entry.directory)["ingest_code"] == fingerprint.ingest_fingerprint()

    reads: list[object] = []
    real_ingest = reading._ingest

    def counted_ingest(*args: Any, **kwargs: Any) -> Any:
        reads.append(args)
        return real_ingest(*args, **kwargs)

    monkeypatch.setattr(reading, "_ingest", counted_ingest)
    assert _kernels_json(trace) == cold
    assert reads == []  # same code: a hit

    monkeypatch.setattr(store, "ingest_fingerprint", lambda: "0" * 32)
    r = runner.invoke(app, ["kernels", str(trace), "-f", "json", "-q"])
    assert r.exit_code == 0, r.output
    assert r.stdout == cold
    assert len(reads) == 1  # other code: the trace is read again
    assert "ingest_code" in r.stderr
    (entry,) = manage.entries(Path(os.environ["TRACEVIEW_CACHE_DIR"]))
    assert store.read_meta(entry.directory)["ingest_code"] == "0" * 32  # rebuilt for it


def test_fingerprint_follows_every_ingest_source(tmp_path: Path) -> None:
    copy = tmp_path / "traceview"
    for path in fingerprint.source_files(PACKAGE):
        target = copy / path.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    original = fingerprint.fingerprint(copy)
    assert original == fingerprint.fingerprint(PACKAGE)
    for path in fingerprint.source_files(copy):
        text = path.read_bytes()
        path.write_bytes(text + b"\n")
        assert fingerprint.fingerprint(copy) != original, path
        path.write_bytes(text)
    (copy / "render").mkdir()
    (copy / "render" / "units.py").write_text("# wording is not ingest code\n")
    assert fingerprint.fingerprint(copy) == original


def test_fingerprint_covers_what_the_ingest_code_imports() -> None:
    """Every module the reading, column, cache-store and fact code imports (even lazily) is
    hashed, unless it cannot change an entry's content."""
    graph = grimp.build_graph("traceview")
    roots = ("traceview.cache.store", "traceview.columns.parallel", "traceview.columns.nsys")
    ingest = {*roots, "traceview.analyses.core.quality"}
    for module in ingest.copy():
        ingest |= graph.find_upstream_modules(module)
    hashed = {
        ".".join(("traceview", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(
            ".__init__"
        )
        for p in fingerprint.source_files(PACKAGE)
    }
    assert ingest - CONTENT_NEUTRAL <= hashed, sorted(ingest - CONTENT_NEUTRAL - hashed)

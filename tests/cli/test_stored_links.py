"""Op links and op calls kept in the cache entry for the report (analyses.stored_links): given
back equal to the last bit, dtypes included; a warm report that reads them writes the page a
report that works them out writes; a file kept for other events or damaged is a miss."""

from __future__ import annotations

import os
from dataclasses import fields
from pathlib import Path

import pytest
from conftest import RealTrace
from typer.testing import CliRunner

from tests.conftest import ROOT
from traceview.analyses.core.devices import name_rank
from traceview.analyses.core.opcalls import OpCalls, op_calls
from traceview.analyses.core.oplinks import OpLinks, link_ops
from traceview.cache.op_links import from_arrays, to_arrays
from traceview.cli import app

DEMO = ROOT / "fixtures" / "demo.json.gz"
runner = CliRunner()


def _same(a: OpLinks | OpCalls, b: OpLinks | OpCalls) -> None:
    """Every array equal, dtype included (the links' CPU ops are not kept)."""
    for f in fields(a):
        if f.name == "ops":
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if x is None or y is None:
            assert x is None and y is None, f.name
            continue
        assert x.dtype == y.dtype and x.tolist() == y.tolist(), f.name


def test_kept_links_and_calls_come_back_as_worked_out(real_trace: RealTrace) -> None:
    events = real_trace.events
    links = link_ops(events, name_rank(events.names), with_top=False, with_end=True)  # work_out's
    calls: OpCalls = op_calls(events)
    kept = {k: v.copy() for k, v in to_arrays(events, links, calls).items()}
    back_links, back_calls = from_arrays(events, kept)
    _same(links, back_links)
    _same(calls, back_calls)


def test_kept_for_other_events_is_refused() -> None:
    from traceview.app.commands import ReadOptions, read_trace

    events = read_trace(DEMO, ReadOptions(quiet=True), keep_cpu=True, remember=False)
    links = link_ops(events, name_rank(events.names), with_top=False, with_end=True)  # work_out's
    kept = to_arrays(events, links, op_calls(events))
    kept["sizes"] = kept["sizes"] + 1
    with pytest.raises(ValueError):
        from_arrays(events, kept)


def _report(out: Path) -> bytes:
    r = runner.invoke(app, ["report", str(DEMO), "-o", str(out), "-q", "--force"])
    assert r.exit_code == 0, r.output
    return out.read_bytes()


def _kept_files() -> list[Path]:
    return sorted(Path(os.environ["TRACEVIEW_CACHE_DIR"]).glob("entries/*/derived-*.npz"))


def _never(*args: object, **kwargs: object) -> None:
    raise AssertionError("worked out again")


def test_a_warm_report_reads_the_kept_links_and_writes_the_same_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "r.html"
    first = _report(out)  # reads the trace, works the links out, keeps them
    (kept,) = _kept_files()
    with monkeypatch.context() as m:
        m.setattr("traceview.analyses.core.common.link_ops", _never)
        m.setattr("traceview.analyses.core.common.op_calls", _never)
        assert _report(out) == first  # read back
    kept.write_bytes(b"not a zip")  # damaged: worked out again, kept anew
    assert _report(out) == first
    assert _kept_files() == [kept] and kept.read_bytes() != b"not a zip"
    r = runner.invoke(app, ["report", str(DEMO), "-o", str(out), "-q", "--force", "--no-cache"])
    assert r.exit_code == 0, r.output
    assert out.read_bytes().replace(b" --no-cache", b"") == first


def test_no_cache_keeps_nothing(tmp_path: Path) -> None:
    r = runner.invoke(app, ["report", str(DEMO), "-o", str(tmp_path / "r.html"), "--no-cache"])
    assert r.exit_code == 0, r.output
    assert _kept_files() == []


def test_the_key_covers_what_the_links_and_calls_import(monkeypatch: pytest.MonkeyPatch) -> None:
    import grimp
    from test_cache_fingerprint import CONTENT_NEUTRAL, PACKAGE

    from traceview.cache import fingerprint
    from traceview.cache import op_links as stored_links

    graph = grimp.build_graph("traceview")
    roots = {"traceview.analyses.core.oplinks", "traceview.analyses.core.opcalls"}
    used = set(roots).union(*(graph.find_upstream_modules(m) for m in roots))
    hashed = {
        ".".join(("traceview", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(
            ".__init__"
        )
        for p in fingerprint.source_files(PACKAGE, stored_links.LINK_SOURCES)
    }
    assert used - CONTENT_NEUTRAL <= hashed, sorted(used - CONTENT_NEUTRAL - hashed)
    key = stored_links.links_key()
    monkeypatch.setattr(stored_links, "code_fingerprint", lambda sources: "0" * 32)
    assert stored_links.links_key() != key

"""Smoke tests for the synthetic kineto trace generator in fixtures/generate.py."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import load_generator

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
TS_TEXT = re.compile(rb'"(?:ts|dur)": ?(-?[0-9][0-9.eE+-]*)')


gen = load_generator()


def _write(tmp_path: Path, name: str, **kwargs: Any) -> tuple[bytes, dict[str, Any]]:
    """Generate a trace into tmp_path and return its (uncompressed) bytes and summary."""
    path = tmp_path / name
    summary = gen.write_trace(path, **kwargs)
    raw = path.read_bytes()
    return (gzip.decompress(raw) if name.endswith(".gz") else raw), summary


def _steps(events: list[dict[str, Any]]) -> list[tuple[Decimal, Decimal]]:
    """CPU ProfilerStep windows as (start, end)."""
    return [
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("cat") == "user_annotation" and str(e.get("name")).startswith("ProfilerStep#")
    ]


@pytest.mark.parametrize("layout", ["kineto", "lines", "compact"])
@pytest.mark.parametrize("ts_mode", ["int", "ns"])
def test_layout_and_ts_mode(tmp_path: Path, layout: str, ts_mode: str) -> None:
    """Valid JSON with the kineto header, coherent correlations and exact timestamp text."""
    data, summary = _write(tmp_path, "t.json", steps=2, layout=layout, ts_mode=ts_mode)
    doc = json.loads(data, parse_float=Decimal)
    keys = list(doc)
    for key in ("schemaVersion", "deviceProperties", "distributedInfo", "record_shapes"):
        assert keys.index(key) < keys.index("traceEvents")
    for key in ("traceName", "displayTimeUnit", "baseTimeNanoseconds"):
        assert keys.index(key) > keys.index("traceEvents")
    assert len(doc["deviceProperties"]) == 2
    events = doc["traceEvents"]
    assert len(events) == summary["events"]

    runtime = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(kernels) == summary["kernels"] > 100
    steps = _steps(events)
    assert len(steps) == 2
    for k in kernels:
        launch = runtime[k["args"]["correlation"]]
        assert k["ts"] >= launch["ts"]
        assert any(lo <= launch["ts"] <= hi for lo, hi in steps)

    numbers = TS_TEXT.findall(data)
    assert len(numbers) > len(events)
    if ts_mode == "ns":
        assert all(re.fullmatch(rb"[0-9]+\.[0-9]{3}", n) for n in numbers)
    else:
        assert all(n.isdigit() for n in numbers)

    newlines = data.count(b"\n")
    if layout == "compact":
        assert newlines == 0
    elif layout == "lines":
        assert newlines == len(events) + 2


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    """Determinism, including the gzip container."""
    a, _ = _write(tmp_path, "a.json.gz", steps=1, seed=7, ts_mode="ns")
    b, _ = _write(tmp_path, "b.json.gz", steps=1, seed=7, ts_mode="ns")
    c, _ = _write(tmp_path, "c.json.gz", steps=1, seed=8, ts_mode="ns")
    assert (tmp_path / "a.json.gz").read_bytes() == (tmp_path / "b.json.gz").read_bytes()
    assert a == b != c


def test_hostile_names_are_valid_json(tmp_path: Path) -> None:
    """Hostile names survive strict parsers and really contain the nasty characters."""
    data, _ = _write(tmp_path, "h.json", steps=2, layout="lines", hostile_names=True)
    doc = orjson.loads(data)
    assert doc == json.loads(data)
    names = "".join(str(e.get("name")) for e in doc["traceEvents"])
    for needle in ("},{", '"', "\\", "\n", "é", "漢字", "\U0001f600", "\U0001f680"):
        assert needle in names
    assert b"\\ud83d\\ude00" in data


def test_size_target_via_cli(tmp_path: Path) -> None:
    """The script's --size lands within 5% (uncompressed) and .gz output is gzip."""
    out = tmp_path / "s.json.gz"
    script = str(FIXTURES / "generate.py")
    cmd = [sys.executable, script, str(out), "--size", "3MB", "--ts", "ns", "--seed", "1"]
    proc = subprocess.run(cmd, capture_output=True, check=True, timeout=60)
    summary = json.loads(proc.stdout)
    data = gzip.decompress(out.read_bytes())
    assert len(data) == summary["bytes"]
    assert abs(len(data) - 3_000_000) <= 150_000
    assert json.loads(data)["traceEvents"]


def test_parse_size() -> None:
    """Decimal size suffixes."""
    assert gen.parse_size("100MB") == 100_000_000
    assert gen.parse_size("1GB") == 1_000_000_000
    assert gen.parse_size("1.5kb") == 1_500
    assert gen.parse_size("12345") == 12_345
    with pytest.raises(ValueError):
        gen.parse_size("ten megs")


def test_edge_fixtures_documented() -> None:
    """Every edge fixture is listed in fixtures/README.md."""
    readme = (FIXTURES / "README.md").read_text()
    files = sorted(p.name for p in (FIXTURES / "edge").iterdir())
    assert len(files) >= 18
    for name in files:
        assert f"`{name}`" in readme


def test_scale_trace_has_the_requested_names_streams_and_steps(tmp_path: Path) -> None:
    path = tmp_path / "scale.json"
    gen.write_scale_trace(path, kernels=500, names=40, streams=7, steps=9)
    events = json.loads(path.read_bytes())["traceEvents"]
    kernels = [e for e in events if e["cat"] == "kernel"]
    steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
    assert len(kernels) == 500
    assert len({e["name"] for e in kernels}) == 40
    assert len({(e["args"]["device"], e["args"]["stream"]) for e in kernels}) == 7
    assert [e["name"] for e in steps] == [f"ProfilerStep#{n}" for n in range(5, 14)]
    launches = {e["args"]["correlation"] for e in events if e["cat"] == "cuda_runtime"}
    assert {e["args"]["correlation"] for e in kernels} == launches

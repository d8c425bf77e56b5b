"""Hostile but readable input through the real CLI as a subprocess: skipped events counted and
said, odd but valid files read (unreadable input: tests/cli/test_bad_input_matrix.py)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from conftest import run_cli

KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,
          "args": {"device": 0, "stream": 7, "correlation": 1}}  # fmt: skip
LAUNCH = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
          "ts": 5, "dur": 2, "args": {"correlation": 1}}  # fmt: skip
STEP = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
        "ts": 0, "dur": 100}  # fmt: skip


def trace_text(events: list[dict]) -> str:
    return json.dumps({"traceEvents": events}, indent=1)


def with_event(raw_event: str) -> str:
    """A valid trace with one extra event given as raw JSON text."""
    good = json.dumps(KERNEL)
    return '{"traceEvents": [\n' + good + ",\n" + raw_event + ",\n" + good + "\n]}"


WARNINGS: dict[str, tuple[bytes, str]] = {
    "name a number": (with_event('{"ph": "X", "cat": "kernel", "name": 5, "ts": 1, "dur": 1}').encode(), "1 events skipped"),
    "ts a string": (with_event('{"ph": "X", "cat": "kernel", "name": "k", "ts": "1", "dur": 1}').encode(), "1 events skipped"),
    "dur null": (with_event('{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": null}').encode(), "1 events without dur"),
    "args not an object": (with_event('{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": [1]}').encode(), "1 events skipped"),
    "NaN and Infinity": (with_event('{"ph": "X", "cat": "kernel", "name": "k", "ts": NaN, "dur": Infinity}').encode(), "1 events skipped"),
    "inf token": (with_event('{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": inf}').encode(), "1 events skipped"),
    "deeply nested args": (with_event('{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"x": ' + "[" * 50000 + "]" * 50000 + "}}").encode(), "1 events skipped: nested too deeply"),
}  # fmt: skip

CLEAN: dict[str, tuple[bytes, int]] = {
    "ints above 2^64": (with_event('{"ph": "X", "cat": "cpu_op", "name": "op", "ts": 1, "dur": 1, "args": {"id": 123456789012345678901234567890}}').encode(), 2),
    "invalid utf-8": (with_event('{"ph": "X", "cat": "kernel", "name": "k\xff\xfe", "ts": 1, "dur": 1}').encode("latin-1"), 3),
    "duplicate keys": (with_event('{"ph": "X", "cat": "kernel", "name": "a", "name": "k", "ts": 1, "dur": 1}').encode(), 3),
    "0 events": (b'{"traceEvents": []}', 0),
    "kernels, no runtime": (trace_text([KERNEL]).encode(), 1),
    "steps, no kernels": (trace_text([STEP, LAUNCH]).encode(), 0),
    "concatenated gzip members": (gzip.compress(trace_text([KERNEL, LAUNCH]).encode()[:40]) + gzip.compress(trace_text([KERNEL, LAUNCH]).encode()[40:]), 1),
}  # fmt: skip


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / (name.replace(" ", "_").replace("^", "") + ".json")
    path.write_bytes(data)
    return path


def assert_one_line_error(r: object, fragment: str) -> None:
    lines = r.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert r.returncode == 1, r.stderr  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("traceview: error: "), r.stderr  # type: ignore[attr-defined]
    assert fragment in lines[0] and "Traceback" not in r.stderr  # type: ignore[attr-defined]
    assert r.stdout == ""  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", sorted(WARNINGS))
def test_skipped_events_are_counted_never_silent(tmp_path: Path, kind: str) -> None:
    data, fragment = WARNINGS[kind]
    r = run_cli("kernels", str(write(tmp_path, kind, data)), "-f", "json", "-q")
    assert r.returncode == 0, r.stderr
    assert any(fragment in w for w in json.loads(r.stdout)["trace"]["warnings"]), r.stdout
    assert f"traceview: warning: {fragment}" in r.stderr
    kept = 3 if kind == "dur null" else 2  # a missing dur counts as 0; the event stays
    assert json.loads(r.stdout)["totals"]["count"] == kept


@pytest.mark.parametrize("kind", sorted(CLEAN))
def test_odd_but_valid_input_reads(tmp_path: Path, kind: str) -> None:
    data, kernels = CLEAN[kind]
    path = write(tmp_path, kind, data)
    r = run_cli("kernels", str(path), "-f", "json", "-q")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["totals"]["count"] == kernels
    assert run_cli("gaps", str(path), "-f", "json", "-q").returncode == 0
    assert run_cli("steps", str(path), "-f", "json", "-q").returncode == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any file")
def test_permission_denied(tmp_path: Path) -> None:
    path = write(tmp_path, "locked", trace_text([KERNEL]).encode())
    path.chmod(0)
    assert_one_line_error(run_cli("kernels", str(path)), "permission denied")


def test_strict_turns_skipped_events_into_an_error(tmp_path: Path) -> None:
    data, _ = WARNINGS["ts a string"]
    r = run_cli("kernels", str(write(tmp_path, "strict", data)), "--strict")
    assert_one_line_error(r, "--strict")

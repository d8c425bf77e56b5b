"""The hostile-name matrix: every command, every format, a trace whose names attack each output."""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from hostile import (
    DEVICE,
    DEVICE_SHOWN,
    MARKDOWN,
    NAMES,
    RICH_MISREADINGS,
    SHOWN,
    hostile_trace,
    unsafe_characters,
)
from typer.testing import CliRunner, Result

from traceview.app import commands
from traceview.cli import app

TERMINAL_ENV = {"FORCE_COLOR": "1", "COLORTERM": "truecolor", "COLUMNS": "1000"}
RICH_STYLE = re.compile(r"\x1b\[(?:0|1|1;3[12])m")  # our own styles: bold, reset, gate colours
FILE_NAME = "t [bold]\x1b[31m\u202e.json"
FILE_SHOWN = r"t [bold]\x1b[31m\u202e.json"
# Which outputs carry the kernel names (steps shows only ProfilerStep#N; gaps CSV is per stream).
ARGS: dict[str, list[str]] = {
    "kernels": ["--top", "0", "-v"],
    "gaps": ["--gap-top", "0", "--largest", "20", "-v"],
    "steps": [],
    "diff": ["--top", "0", "-v"],
}
FORMATS = ("terminal", "text", "json", "csv", "md")
MATRIX = [
    (command, fmt)
    for command in ARGS
    for fmt in FORMATS
    if not (command == "diff" and fmt == "csv")  # diff has no CSV
]


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hostile_trace(tmp_path_factory.mktemp("hostile") / FILE_NAME)


def invoke(args: list[str], terminal: bool, monkeypatch: pytest.MonkeyPatch) -> Result:
    """The CLI in-process; ``terminal``: stdout is taken for a colour terminal (rich path)."""
    if terminal:
        monkeypatch.setattr(commands, "stdout_is_terminal", lambda: True)
    env = TERMINAL_ENV if terminal else {"COLUMNS": "1000"}
    return CliRunner().invoke(app, args, env=env)


def command_args(command: str, fmt: str, trace: Path) -> list[str]:
    inputs = [str(trace), str(trace)] if command == "diff" else [str(trace)]
    format_args = [] if fmt in ("terminal", "text") else ["-f", fmt]
    return [command, *inputs, *ARGS[command], *format_args]


@pytest.mark.parametrize(("command", "fmt"), MATRIX)
def test_every_name_is_data_in_every_format(
    command: str, fmt: str, trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = invoke(command_args(command, fmt, trace), fmt == "terminal", monkeypatch)
    assert r.exit_code == 0, r.output
    assert ("\x1b[1m" in r.stdout) == (fmt == "terminal")  # rich's bold only on the terminal
    if fmt == "json":
        check_json(command, json.loads(r.stdout), trace)
        return
    out = RICH_STYLE.sub("", r.stdout) if fmt == "terminal" else r.stdout
    assert unsafe_characters(out) == set(), sorted(unsafe_characters(out))
    assert unsafe_characters(r.stderr) == set()
    if fmt == "csv":
        check_csv(command, r.stdout)
    elif fmt == "md":
        check_markdown(command, r.stdout)
    else:
        check_text(command, out)


def check_text(command: str, out: str) -> None:
    """Terminal and piped text: names verbatim, control characters as escapes."""
    assert not any(bad in out for bad in RICH_MISREADINGS)
    assert FILE_SHOWN in out and (DEVICE_SHOWN in out or command == "diff")
    if command == "steps":
        assert "ProfilerStep#1" in out
        return
    for shown in SHOWN.values():
        assert shown in out
    if command == "gaps":  # what held each gap quotes CPU-op and annotation names
        for k, shown in enumerate(SHOWN.values()):
            held = f"{shown} 550.0 µs of 550.0 µs host wait"  # see hostile_trace
            if k % 2:
                assert f"ann {held}" in out
            elif k:
                assert f"op {held} (inside or beside it: ann {shown} 550.0 µs)" in out


def check_markdown(command: str, out: str) -> None:
    """Markdown: names escaped, every table row with exactly its header's number of cells."""
    assert "<" not in out and ">" not in out
    for table in markdown_tables(out):
        cells = {pipes(line) for line in table}
        assert len(cells) == 1, table
    if command != "steps":
        for shown in MARKDOWN.values():
            assert shown in out
    if command != "diff":  # diff names the GPUs only when they differ
        assert r"GPU \\x1b\[2J \[bold\]A100\[/bold\] \| &lt;b&gt;" in out


def markdown_tables(text: str) -> Iterator[list[str]]:
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append(line)
        elif block:
            yield block
            block = []


def pipes(line: str) -> int:
    """Cell delimiters as GitHub's table parser counts them (a pipe after \\ is text)."""
    return len(re.findall(r"(?<!\\)\|", line))


def check_csv(command: str, out: str) -> None:
    """CSV: Python's reader reads every row back; names escaped, formulas neutralised."""
    rows = list(csv.DictReader(io.StringIO(out, newline="")))
    assert rows and all(None not in row for row in rows)
    if command != "kernels":
        return
    assert len(rows) == len(NAMES)
    formula = ("=", "+", "-", "@", "\t")
    expected = {("'" if n.startswith(formula) else "") + SHOWN[n] for n in NAMES}
    assert {row["name"] for row in rows} == expected
    assert {row["total_us"] for row in rows} == {"440.0"}  # numbers as they are


def check_json(command: str, doc: dict[str, Any], trace: Path) -> None:
    """JSON: the real strings, whatever they hold."""
    strings = set(all_strings(doc))
    assert str(trace) in strings and DEVICE in strings
    if command == "steps":
        return
    assert set(NAMES) <= strings
    if command == "gaps":
        assert {f"ann {name}" for name in NAMES[1:]} <= strings
        assert {f"op {name}" for name in NAMES[2::2]} <= strings


def all_strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from all_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from all_strings(v)


@pytest.mark.parametrize("command", ["kernels", "gaps"])
def test_text_reports_show_names_escaped(command: str, trace: Path, tmp_path: Path) -> None:
    report = tmp_path / f"{command}.txt"
    option = "-o" if command == "kernels" else "--gap-output"
    args = [command, str(trace), *ARGS[command], "-f", "json", option, str(report)]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    text = report.read_text(encoding="utf-8")
    assert unsafe_characters(text) == set()
    assert FILE_SHOWN in text and DEVICE_SHOWN in text
    for shown in SHOWN.values():
        assert shown in text


def test_snapshot_keeps_real_names_that_diff_shows_escaped(trace: Path, tmp_path: Path) -> None:
    out = tmp_path / "snap.json"
    piped = CliRunner().invoke(app, ["snapshot", str(trace)])
    written = CliRunner().invoke(app, ["snapshot", str(trace), "-o", str(out)])
    assert piped.exit_code == 0 and written.exit_code == 0, piped.output + written.output
    for doc in (json.loads(piped.stdout), json.loads(out.read_text(encoding="utf-8"))):
        strings = set(all_strings(doc))
        assert set(NAMES) <= strings and DEVICE in strings
    r = CliRunner().invoke(app, ["diff", str(out), str(trace), *ARGS["diff"]])  # names from JSON
    assert r.exit_code == 0, r.output
    assert unsafe_characters(r.stdout) == set()
    assert f"(snapshot of {trace.parent}/{FILE_SHOWN}, 1 step)" in r.stdout
    for shown in SHOWN.values():
        assert shown in r.stdout


def test_last_trace_is_named_escaped(trace: Path) -> None:
    assert CliRunner().invoke(app, ["steps", str(trace), "-f", "json"]).exit_code == 0
    r = CliRunner().invoke(app, ["gaps", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert r.stderr == f"traceview: using the last trace analysed: {trace.parent}/{FILE_SHOWN}\n"


def test_cache_list_shows_trace_file_names_escaped(trace: Path) -> None:
    assert CliRunner().invoke(app, ["steps", str(trace), "-f", "json"]).exit_code == 0
    r = CliRunner().invoke(app, ["cache", "list"])
    assert r.exit_code == 0, r.output
    assert r.stdout.endswith(f"ago  {trace.parent}/{FILE_SHOWN}\n")
    assert unsafe_characters(r.stdout) == set()


def test_internal_error_quoting_a_name_is_escaped(
    trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError(f"no row for {NAMES[8]}")  # a bug that quotes a name

    monkeypatch.setattr(commands, "steps", broken)
    r = CliRunner().invoke(app, ["steps", str(trace)])
    assert r.exit_code == 1
    assert r.stderr.endswith(f"RuntimeError: no row for {SHOWN[NAMES[8]]}\n")
    assert r.stderr.count("\n") == 1 and unsafe_characters(r.stderr) == set()


@pytest.mark.parametrize("fmt", ["terminal", "text", "md"])
def test_failed_gate_names_regressions_escaped(
    fmt: str, trace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = hostile_trace(tmp_path / "slow.json", slow=1.3, device="H100 \x1b[1m[/x]")
    args = ["diff", str(trace), str(slow), "--max-regression", "5%", "-v"]
    r = invoke(args + (["-f", "md"] if fmt == "md" else []), fmt == "terminal", monkeypatch)
    assert r.exit_code == 1, r.output
    out = RICH_STYLE.sub("", r.stdout)
    assert unsafe_characters(out) == set() and unsafe_characters(r.stderr) == set()
    (error,) = r.stderr.splitlines()
    assert error.startswith("traceview: error: regression gate failed: total kernel time +30")
    shown = SHOWN["esc \x1b]0;title\x07 \x1b[2J \x1b[31mred"]
    assert f"; kernel {shown} +30.00%" in error
    if fmt == "md":
        name = MARKDOWN["esc \x1b]0;title\x07 \x1b[2J \x1b[31mred"]
        assert f"- kernel {name} +30.00% &gt; 5%" in out
        assert r"new H100 \\x1b\[1m\[/x\]" in out
    else:
        assert f"  kernel {shown} +30.00% > 5%" in out
        assert f"different GPUs: base {DEVICE_SHOWN}; new H100 \\x1b[1m[/x]" in out


@pytest.mark.parametrize("command", ["kernels", "gaps", "diff"])
def test_real_terminal(command: str, trace: Path) -> None:
    """As a subprocess whose stdout is a pseudo-terminal: what a user's terminal receives."""
    inputs = [str(trace)] * (2 if command == "diff" else 1)
    out = on_a_pty([command, *inputs, *ARGS[command], "-q"])
    assert "Traceback" not in out and "error" not in out, out
    assert "\x1b[1m" in out  # rich took it for a terminal: its bold headers
    out = RICH_STYLE.sub("", out)
    assert unsafe_characters(out.replace("\r\n", "\n")) == set()
    assert not any(bad in out for bad in RICH_MISREADINGS)
    for shown in SHOWN.values():
        assert shown in out


def on_a_pty(args: list[str]) -> str:
    """Run traceview with stdout and stderr on a pseudo-terminal 1000 columns wide."""
    leader, follower = pty.openpty()
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "COLUMNS": "1000",
        "TERM": "xterm-256color",
        "TRACEVIEW_CACHE_DIR": os.environ["TRACEVIEW_CACHE_DIR"],
    }
    with subprocess.Popen(
        [sys.executable, "-m", "traceview", *args], stdout=follower, stderr=follower, env=env
    ) as process:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        process.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode("utf-8")

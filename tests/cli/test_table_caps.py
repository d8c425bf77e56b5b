"""Tables cut to their first rows on a terminal, in text and in Markdown (steps --top, gaps
--stream-top), with a line saying what was left out; JSON and CSV hold every row."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from conftest import load_generator
from typer.testing import CliRunner

from traceview.cli import app

runner = CliRunner()
STEPS, STREAMS = 130, 12  # more steps than the default of 100 shown


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """130 steps over 12 streams on 8 devices: a step has up to 8 lines."""
    path = tmp_path_factory.mktemp("caps") / "t.json"
    load_generator().write_scale_trace(path, kernels=2 * STEPS * STREAMS, streams=STREAMS,
                                       steps=STEPS)  # fmt: skip
    return path


def _invoke(*args: str) -> str:
    r = runner.invoke(app, [*args, "--no-cache", "--quiet"])
    assert r.exit_code == 0, r.output
    return r.output


def _step_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if "ProfilerStep#" in line and "note" not in line]


def test_steps_table_shows_the_first_100_steps_by_default(trace: Path) -> None:
    out = _invoke("steps", str(trace))
    assert {line.split()[0] for line in _step_lines(out)} == {
        f"ProfilerStep#{n}" for n in range(5, 105)
    }
    # steps 105-134: 30 steps of 8 devices each
    assert "30 more steps not shown (240 lines); use --top 0 or -f json/csv for all" in out


@pytest.mark.parametrize("fmt", ["table", "md"])
def test_steps_top_cuts_text_and_markdown_alike(trace: Path, fmt: str) -> None:
    out = _invoke("steps", str(trace), "--top", "3", "-f", fmt)
    shown = {line.strip("| ").split()[0] for line in _step_lines(out)}
    assert shown == {"ProfilerStep#5", "ProfilerStep#6", "ProfilerStep#7"}
    assert "127 more steps not shown (1,016 lines); use --top 0 or -f json/csv for all" in out


def test_steps_top_0_shows_every_step(trace: Path) -> None:
    out = _invoke("steps", str(trace), "--top", "0")
    assert len({line.split()[0] for line in _step_lines(out)}) == STEPS
    assert "not shown" not in out


def test_steps_json_and_csv_hold_every_step_whatever_top(trace: Path) -> None:
    doc = json.loads(_invoke("steps", str(trace), "--top", "3", "-f", "json"))
    assert [s["step"] for s in doc["steps"]] == list(range(5, 5 + STEPS))
    rows = list(csv.DictReader(io.StringIO(_invoke("steps", str(trace), "-t", "3", "-f", "csv"))))
    assert len({r["step"] for r in rows}) == STEPS
    assert len(rows) == STEPS * 8


def _stream_rows(out: str) -> list[str]:
    section = out.split("Streams", 1)[1].split("Gap histogram", 1)[0]
    lines = [line for line in section.splitlines() if "not shown" not in line]
    return [line for line in lines if line.strip("| ")[:1].isdigit()]


@pytest.mark.parametrize("fmt", ["table", "md"])
def test_gaps_stream_top_cuts_the_streams_table(trace: Path, fmt: str) -> None:
    out = _invoke("gaps", str(trace), "--per-stream", "--stream-top", "5", "-f", fmt)
    assert len(_stream_rows(out)) == 5
    doc = json.loads(_invoke("gaps", str(trace), "--per-stream", "-f", "json"))
    hidden = sum(s["gaps"] for s in doc["streams"][5:])
    assert f"7 more streams not shown ({hidden:,} gaps); use --stream-top 0 or -f json/csv" in out


def test_gaps_streams_shown_whole_under_the_default(trace: Path) -> None:
    out = _invoke("gaps", str(trace))
    assert len(_stream_rows(out)) == STREAMS
    assert "more streams not shown" not in out


def test_gaps_json_csv_and_report_hold_every_stream(trace: Path, tmp_path: Path) -> None:
    args = ("gaps", str(trace), "--stream-top", "2")
    assert len(json.loads(_invoke(*args, "-f", "json"))["streams"]) == STREAMS
    assert len(list(csv.DictReader(io.StringIO(_invoke(*args, "-f", "csv"))))) == STREAMS
    report = tmp_path / "gaps.txt"
    _invoke(*args, "--gap-output", str(report))
    assert len(_stream_rows(report.read_text())) == STREAMS

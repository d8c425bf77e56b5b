"""``traceview memory`` at the command line: its JSON contract on the demo trace against the
simple loop of tests/memory_reference.py, every format, -o, hostile op names shown escaped,
and one line for a trace without [memory] events."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import memory_reference
import pytest
import reference
from conftest import ROOT
from hostile import SHOWN
from typer.testing import CliRunner

from traceview.cli import app

DEMO = ROOT / "fixtures" / "demo.json.gz"
CONTRACT = ("device", "peak_allocated_bytes", "peak_reserved_bytes", "peak_ts_us", "peak_step",
            "allocations", "frees", "start_allocated_bytes", "end_allocated_bytes", "holders",
            "steps")  # fmt: skip
runner = CliRunner()


def invoke(*args: str) -> str:
    r = runner.invoke(app, [*args, "-q", "--no-cache"], env={"COLUMNS": "120"})
    assert r.exit_code == 0, r.output
    return r.stdout


def test_the_json_contract_on_the_demo_trace() -> None:
    doc = json.loads(invoke("memory", str(DEMO), "-f", "json"))
    assert list(doc) == ["schema_version", "trace", "devices", "cpu", "notes"]
    want = memory_reference.figures(reference.load_trace(DEMO)[1])
    assert want["devices"], "the demo trace has [memory] events"
    for d in doc["devices"]:
        assert tuple(d)[: len(CONTRACT)] == CONTRACT
        ref = want["devices"][d["device"]]
        assert d["peak_allocated_bytes"] == ref["peak_allocated_bytes"]
        assert d["peak_ts_us"] * 1000 == pytest.approx(ref["peak_ts_ns"], abs=0.5)
        assert [(h["op"], h["bytes"], h["count"]) for h in d["holders"]] == ref["holders"]
        steps = [(s["step"], s["peak_allocated_bytes"], s["growth_bytes"]) for s in d["steps"]]
        assert steps == ref["steps"]
        assert d["peak_allocated_gib"] == d["peak_allocated_bytes"] / 2**30
    assert [d["device"] for d in doc["devices"]] == sorted(want["devices"])


def test_every_format_and_an_output_file(tmp_path: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(invoke("memory", str(DEMO), "-f", "csv"))))
    doc = json.loads(invoke("memory", str(DEMO), "-f", "json"))
    assert [int(r["peak_allocated_bytes"]) for r in rows if r["device"] != "cpu"] == [
        d["peak_allocated_bytes"] for d in doc["devices"]
    ]
    assert "### device 0" in invoke("memory", str(DEMO), "-f", "md")
    out = tmp_path / "memory.txt"
    assert invoke("memory", str(DEMO), "-o", str(out)) == ""
    assert out.read_text().startswith("trace    ")
    again = runner.invoke(app, ["memory", str(DEMO), "-o", str(out), "-q", "--no-cache"])
    assert again.exit_code == 2 and "--force" in again.stderr


def _hostile_trace(path: Path) -> Path:
    events = []
    for k, name in enumerate(SHOWN):
        ts = 100 * k
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
                       "dur": 10})  # fmt: skip
        args = {"Device Type": 1, "Device Id": 0, "Bytes": 1024 * (k + 1), "Addr": 4096 * (k + 1),
                "Total Allocated": 512 * (k + 1) * (k + 2), "Total Reserved": 1 << 30}  # fmt: skip
        events.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1,
                       "tid": 1, "ts": ts + 1, "args": args})  # fmt: skip
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_hostile_op_names_are_shown_escaped(tmp_path: Path) -> None:
    trace = _hostile_trace(tmp_path / "hostile.json")
    text = invoke("memory", str(trace), "--top", "0")
    for shown in SHOWN.values():
        assert shown.splitlines()[0] in text
    assert "\x1b" not in text and "\u202e" not in text
    doc = json.loads(invoke("memory", str(trace), "-f", "json"))
    assert {h["op"] for h in doc["devices"][0]["holders"]} == set(SHOWN)


def test_a_trace_without_memory_events_gets_one_line(tmp_path: Path) -> None:
    trace = tmp_path / "plain.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2},
    ]}))  # fmt: skip
    text = invoke("memory", str(trace))
    assert text.count("\n") == 1 and "profile_memory=True" in text
    doc = json.loads(invoke("memory", str(trace), "-f", "json"))
    assert doc["devices"] == [] and doc["cpu"] is None
    assert any("profile_memory=True" in n for n in doc["notes"])
    saved = tmp_path / "memory.txt"
    assert invoke("memory", str(trace), "-o", str(saved)) == ""  # the line goes to -o
    assert saved.read_text() == text


def test_a_one_line_table_goes_to_the_output_file(tmp_path: Path) -> None:
    """Any command's one line instead of a table (no GPU activity) goes where -o says."""
    trace = tmp_path / "cpu.json"
    trace.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 2},
    ]}))  # fmt: skip
    saved = tmp_path / "summary.txt"
    assert invoke("summary", str(trace), "-o", str(saved)) == ""
    assert "no GPU kernels recorded" in saved.read_text()


def test_a_run_gives_each_rank_s_report(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for rank in (0, 1):
        trace = json.loads(_hostile_trace(tmp_path / "one.json").read_text())
        trace["traceEvents"] = trace["traceEvents"][: 2 * (rank + 3)]  # rank 1 goes higher
        (run / f"rank{rank}.json").write_text(json.dumps(trace))
    doc = json.loads(invoke("memory", str(run), "-f", "json"))
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    for r in doc["ranks"]:
        one = json.loads(invoke("memory", str(run / f"rank{r['rank']}.json"), "-f", "json"))
        assert r["devices"] == one["devices"] and r["notes"] == one["notes"]
    assert [r["devices"][0]["peak_allocated_bytes"] for r in doc["ranks"]] == [512 * 12, 512 * 20]
    text = invoke("memory", str(run), "--per-rank")
    assert "highest peak: rank 1, device 0: 10.00 KiB allocated" in text
    assert "rank 1\ntrace    " in text


def test_the_peak_s_timestamp_pastes_into_trim_window(tmp_path: Path) -> None:
    """``at ts 1727000001611587.500 µs``: no thousands separators, the JSON's ``peak_ts_us``,
    and ``trim --window @TS:`` reads it as written."""
    import re

    text = invoke("memory", str(DEMO))
    ts = re.search(r"at ts (\S+) µs", text)
    assert ts is not None and "," not in ts[1], text
    peak_us = json.loads(invoke("memory", str(DEMO), "-f", "json"))["devices"][0]["peak_ts_us"]
    assert float(ts[1]) == pytest.approx(peak_us, abs=0.001)
    out = tmp_path / "peak.json.gz"
    r = runner.invoke(app, ["trim", str(DEMO), "--window", f"@{ts[1]}:", "-o", str(out), "-q"])
    assert r.exit_code == 0, r.output
    assert out.exists()


def test_skipped_memory_events_are_said_only_where_memory_is_read(tmp_path: Path) -> None:
    """A [memory] event with a bad field is skipped: ``memory`` (and ``summary``, which shows
    the peaks) say so; ``kernels``, which never reads them, does not."""
    bad = {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5,
           "args": {"Device Type": 1, "Device Id": 0, "Bytes": "x", "Total Allocated": 1,
                    "Total Reserved": 2}}  # fmt: skip
    kernel = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2,
              "args": {"device": 0, "stream": 7}}  # fmt: skip
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": [kernel, bad]}))
    said = "1 [memory] events skipped"
    for command, warns in (("memory", True), ("summary", True), ("kernels", False)):
        r = runner.invoke(app, [command, str(trace), "--no-cache"], env={"COLUMNS": "120"})
        assert r.exit_code == 0, r.output
        assert (said in r.stderr) is warns, (command, r.stderr)

"""``traceview trim`` on hand-made traces: each option, events copied byte for byte, the
header and trailer kept, metadata always, flows only with both ends, the output's safety."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_cli
from typer.testing import CliRunner

from traceview.cli import app

runner = CliRunner()
HEADER = (
    '{\n  "schemaVersion": 1,\n  "deviceProperties": [{"id": 0, "name": "GPU A"}, '
    '{"id": 1, "name": "GPU B"}],\n  "traceEvents": ['
)
TRAILER = '],\n  "distributedInfo": {"rank": 3},\n  "traceName": "t.json"\n}\n'
# ts in µs; the GPU pids are the devices (0, 1), the CPU process 100. Step 1 runs 1000-1100
# on the CPU; its kernel k1 (launched at 1010) runs at 1150, after the CPU step.
EVENTS = [
    '{"ph": "M", "name": "process_name", "pid": 100, "args": {"name": "python"}}',
    '{"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}}',
    '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 100, "tid": 1,\n'
    '    "ts": 1000, "dur": 100}',
    '{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 100, "tid": 1,\n'
    '    "ts": 1100, "dur": 100}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1,'
    ' "ts": 1010.000, "dur": 5, "args": {"correlation": 1}}',
    '{"ph": "s", "id": 1, "pid": 100, "tid": 1, "ts": 1010.000, "cat": "ac2g", "name": "ac2g"}',
    '{"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 1150.5,'
    ' "dur": 20, "args": {"device": 0, "stream": 7, "correlation": 1}}',
    '{"ph": "f", "id": 1, "pid": 0, "tid": 7, "ts": 1150.5, "cat": "ac2g", "name": "ac2g",'
    ' "bp": "e"}',
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 1,'
    ' "ts": 1110, "dur": 5, "args": {"correlation": 2}}',
    '{"ph": "s", "id": 2, "pid": 100, "tid": 1, "ts": 1110, "cat": "ac2g", "name": "ac2g"}',
    '{"ph": "X", "cat": "kernel", "name": "k2", "pid": 1, "tid": 7, "ts": 1300,'
    ' "dur": 10, "args": {"device": 1, "stream": 7, "correlation": 2}}',
    '{"ph": "f", "id": 2, "pid": 1, "tid": 7, "ts": 1300, "cat": "ac2g", "name": "ac2g",'
    ' "bp": "e"}',
    '{"ph": "X", "cat": "cpu_op", "name": "aten::late", "pid": 100, "tid": 1,'
    ' "ts": 1400, "dur": 10, "args": {"note": NaN}}',
    '{"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 100, "tid": 1,'
    ' "ts": 4891694747319.42, "s": "t"}',
]


def write(tmp_path: Path, events: list[str] = EVENTS, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + "\n  " + ",\n  ".join(events) + "\n" + TRAILER)
    return path


def trim(tmp_path: Path, *options: str, trace: Path | None = None) -> tuple[str, list[str]]:
    """Run trim; the output's text and its events as they are in it (raw text)."""
    trace = trace or write(tmp_path)
    out = tmp_path / "out.json"
    r = runner.invoke(
        app, ["trim", str(trace), "-o", str(out), "-q", "--force", "--no-cache", *options]
    )
    assert r.exit_code == 0, r.output
    text = out.read_text()
    return text, _events_of(text)


def _events_of(text: str) -> list[str]:
    """The output's events: it writes one after another, each after a comma and newline."""
    body = text[text.index('"traceEvents": [') + 16 : text.rindex("\n]")].strip()
    return re.split(r",\n(?=\{)", body) if body else []


def test_whole_trace_is_the_same_events_and_header(tmp_path: Path) -> None:
    text, events = trim(tmp_path)
    assert events == EVENTS  # byte for byte, multi-line events and NaN included
    assert text.startswith(HEADER) and text.endswith(TRAILER)


def test_pstep_keeps_the_steps_gpu_work_and_flows(tmp_path: Path) -> None:
    _, events = trim(tmp_path, "--pstep", "1")
    names = [json.loads(e.replace("NaN", "0")).get("name") for e in events]
    # k1 runs after the CPU step ends: kept, by its launch; k2 (step 2's) is not, though
    # it overlaps the window that k1 widens; ProfilerStep#2 meets that window.
    assert "k1" in names and "k2" not in names and "ProfilerStep#2" in names
    # flow 1 has both ends in [1000, 1170.5]; flow 2 only its start (its end is at 1300)
    kept_flows = [json.loads(e) for e in events if '"ac2g"' in e]
    assert sorted((f["id"], f["ph"]) for f in kept_flows) == [(1, "f"), (1, "s")]
    assert "aten::late" not in names and "mark" not in names


def test_window_relative_keeps_cut_events_whole(tmp_path: Path) -> None:
    # the trace starts at 1000 µs: 105us:112us is 1105-1112, inside step 2, which it cuts
    _, events = trim(tmp_path, "--window", "105us:112us")
    kept = [e for e in events if '"ph": "M"' not in e]
    assert kept == [EVENTS[3], EVENTS[8]]  # flow 2's start is in, its end (1300) is not
    assert [e for e in events if '"ph": "M"' in e] == EVENTS[:2]  # metadata always


def test_window_absolute_ts(tmp_path: Path) -> None:
    _, events = trim(tmp_path, "--window", "@1150.5:@1150.5")
    assert [e for e in events if '"ph": "M"' not in e] == [EVENTS[3], EVENTS[6]]
    # flow 1's finish is in the window, its start (1010) is not: both are left out


def test_flow_with_one_end_outside_is_dropped(tmp_path: Path) -> None:
    _, events = trim(tmp_path, "--window", "@1005:@1200")
    assert EVENTS[5] in events and EVENTS[7] in events  # flow 1: both ends in
    assert EVENTS[9] not in events and EVENTS[11] not in events  # flow 2 ends at 1300


def test_no_cpu_and_device(tmp_path: Path) -> None:
    _, events = trim(tmp_path, "--no-cpu")
    assert [e for e in events if '"pid": 100' in e and '"ph": "M"' not in e] == []
    assert EVENTS[6] in events and EVENTS[10] in events
    assert EVENTS[5] not in events and EVENTS[7] not in events  # flow starts on the CPU
    _, events = trim(tmp_path, "--device", "1")
    assert EVENTS[10] in events and EVENTS[6] not in events
    assert EVENTS[9] in events and EVENTS[11] in events  # flow 2 ends on device 1
    assert EVENTS[5] not in events and EVENTS[7] not in events  # flow 1 ends on device 0


def test_around_gap_with_margin(tmp_path: Path) -> None:
    # device gaps: one device each here, so the largest is device 1's... none (one kernel);
    # two kernels on device 0 make one gap of 1170.5 → 1200.
    extra = '{"ph": "X", "cat": "kernel", "name": "k3", "pid": 0, "tid": 7, "ts": 1200,' + (
        ' "dur": 1, "args": {"device": 0, "stream": 7}}'
    )
    trace = write(tmp_path, [*EVENTS, extra])
    _, events = trim(tmp_path, "--around-gap", "1", "--margin", "0", trace=trace)
    gpu = [e for e in events if '"kernel"' in e]
    assert gpu == [EVENTS[6], extra]  # both ends of the gap, touched by a zero margin
    _, events = trim(tmp_path, "--around-gap", "1", "--margin", "1ms", trace=trace)
    assert EVENTS[10] in events  # k2 at 1300 is within 1 ms after the gap
    r = runner.invoke(
        app, ["trim", str(trace), "-o", str(tmp_path / "x.json"), "--around-gap", "2"]
    )
    assert r.exit_code == 2 and "has 1 device gaps" in r.stderr


def test_ns_timestamps_are_copied_not_reformatted(tmp_path: Path) -> None:
    text, events = trim(tmp_path, "--window", "@4891694747319.42:")
    assert '"ts": 4891694747319.42' in text
    assert [e for e in events if '"ph": "M"' not in e] == [EVENTS[13]]


def test_gzip_when_the_name_ends_gz(tmp_path: Path) -> None:
    trace = write(tmp_path)
    out = tmp_path / "small.json.gz"
    r = runner.invoke(app, ["trim", str(trace), "-o", str(out), "-q", "--pstep", "2"])
    assert r.exit_code == 0, r.output
    text = gzip.decompress(out.read_bytes()).decode()
    assert text.startswith(HEADER) and text.endswith(TRAILER)
    assert EVENTS[10] in _events_of(text)


def test_output_safety(tmp_path: Path) -> None:
    trace = write(tmp_path)
    before = trace.read_bytes()
    r = run_cli("trim", str(trace), "-o", str(trace), "--force")
    assert r.returncode == 2 and "is the input trace" in r.stderr
    os.link(trace, tmp_path / "hard.json")
    r = run_cli("trim", str(trace), "-o", str(tmp_path / "hard.json"), "--force")
    assert r.returncode == 2 and "is the input trace" in r.stderr
    out = tmp_path / "out.json"
    out.write_text("old")
    r = run_cli("trim", str(trace), "-o", str(out))
    assert r.returncode == 2 and "--force" in r.stderr and out.read_text() == "old"
    r = run_cli("trim", str(trace), "-o", str(out), "--force", "-q")
    assert r.returncode == 0, r.stderr
    assert trace.read_bytes() == before


def test_a_failure_leaves_no_output(tmp_path: Path) -> None:
    damaged = write(tmp_path, [*EVENTS[:4], '{"ph": "X", "ts": 1 "dur": 2}', *EVENTS[4:]])
    out = tmp_path / "out.json"
    r = run_cli("trim", str(damaged), "-o", str(out), "--no-cache")
    assert r.returncode == 1 and "malformed JSON" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_truncated_needs_partial_and_then_closes_the_json(tmp_path: Path) -> None:
    text = write(tmp_path).read_text()
    cut = tmp_path / "cut.json"
    cut.write_text(text[: text.index(EVENTS[12]) + 20])
    out = tmp_path / "out.json"
    r = run_cli("trim", str(cut), "-o", str(out), "--no-cache")
    assert r.returncode == 1 and "truncated" in r.stderr and not out.exists()
    r = run_cli("trim", str(cut), "-o", str(out), "--no-cache", "--partial", "-q")
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert len(doc["traceEvents"]) == 12 and doc["schemaVersion"] == 1


def test_usage_errors(tmp_path: Path) -> None:
    trace = write(tmp_path)
    out = str(tmp_path / "o.json")
    for options, fragment in [
        (["--pstep", "1", "--window", "1:2"], "give one of"),
        (["--pstep", "7"], "no ProfilerStep 7"),
        (["--pstep", "1,3"], "one range of steps"),
        (["--window", "5"], "expected START:END"),
        (["--window", "9:5"], "ends before it starts"),
        (["--device", "5"], "--device 5: not in this trace"),
        (["--around-gap", "0"], "the largest gap is 1"),
    ]:
        r = runner.invoke(app, ["trim", str(trace), "-o", out, "-q", *options])
        assert r.exit_code == 2, (options, r.output)
        assert fragment in r.stderr, (options, r.stderr)
        assert not Path(out).exists()


def test_a_pipe_is_refused(tmp_path: Path) -> None:
    trace = write(tmp_path)
    with trace.open("rb") as stdin:
        r = runner.invoke(app, ["trim", "-", "-o", str(tmp_path / "o.json")], input=stdin.read())
    assert r.exit_code == 2, r.output
    assert "trim reads the trace twice; give a file, not a pipe" in r.stderr
    assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("window", ["105us:", ":0.1ms"])
def test_open_sided_windows(tmp_path: Path, window: str) -> None:
    _, events = trim(tmp_path, "--window", window)
    if window.startswith(":"):
        assert EVENTS[2] in events and EVENTS[12] not in events
    else:
        assert EVENTS[12] in events and EVENTS[2] not in events


def test_a_window_from_0_reaches_the_first_event(tmp_path: Path) -> None:
    """``0:`` is open at its start: an instant before the span's first activity is kept, as
    the whole trace keeps it (issue 49: 101,514 events of 101,515)."""
    early = ('{"ph": "i", "cat": "cpu_instant_event", "name": "early", "pid": 100, "tid": 1,'
             ' "ts": 900, "s": "t"}')  # fmt: skip
    trace = write(tmp_path, [early, *EVENTS])
    _, whole = trim(tmp_path, trace=trace)
    _, events = trim(tmp_path, "--window", "0:", trace=trace)
    assert early in events and events == whole


def test_a_serving_step_is_called_by_its_marker_s_name(tmp_path: Path) -> None:
    marker = ('{"ph": "X", "cat": "user_annotation", "name": "step[DECODE bs=2]", "pid": 100,'
              ' "tid": 1, "ts": 1000, "dur": 100}')  # fmt: skip
    kept = [e for e in EVENTS if "ProfilerStep" not in e]
    trace = write(tmp_path, [marker, *kept])
    r = runner.invoke(app, ["trim", str(trace), "-o", str(tmp_path / "o.json"), "--pstep", "0",
                            "--no-cache"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "(step 0 (step[DECODE bs=2]))" in r.stderr and "ProfilerStep" not in r.stderr


def test_gaps_prints_no_trim_command_for_a_pipe(tmp_path: Path) -> None:
    extra = '{"ph": "X", "cat": "kernel", "name": "k3", "pid": 0, "tid": 7, "ts": 1200,' + (
        ' "dur": 1, "args": {"device": 0, "stream": 7}}'
    )
    trace = write(tmp_path, [*EVENTS, extra])
    r = runner.invoke(app, ["gaps", str(trace), "-q", "--no-context"])
    # the gap 1170.5-1200 µs with 2 ms each side (the start stops at 0)
    assert f"#1 traceview trim {trace} --window @0.000:@3200.000 -o gap1.json.gz" in r.stdout
    piped = subprocess.run(
        [sys.executable, "-m", "traceview", "gaps", "-", "-q", "--no-context"],
        input=trace.read_bytes(), capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120, check=False,
    )  # fmt: skip
    assert piped.returncode == 0, piped.stderr
    assert b"traceview trim" not in piped.stdout
    assert b"save it to a file to trim it" in piped.stdout


def test_hostile_field_types_are_copied_or_left_by_rule(tmp_path: Path) -> None:
    odd = [
        '{"ph": ["X"], "cat": {"a": 1}, "name": "odd", "pid": [1], "tid": 1, "ts": 1050}',
        '{"ph": "s", "cat": ["ac2g"], "id": {"x": 1}, "pid": 100, "tid": 1, "ts": "1050"}',
        '{"ph": "X", "cat": "kernel", "name": "k9", "pid": 0, "tid": 7, "ts": 1050,'
        ' "dur": 1, "args": 5}',
        '{"ph": "X", "name": "late \\u001b[31m", "pid": 100, "tid": 1, "ts": 5000, "dur": 1}',
    ]
    trace = write(tmp_path, [*EVENTS, *odd])
    _, events = trim(tmp_path, "--window", "@1040:@1060", trace=trace)
    assert odd[0] in events and odd[2] in events  # an odd ph or cat is a plain event
    assert odd[1] not in events  # a flow start with no finish
    assert odd[3] not in events


def test_an_nsys_export_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "report.sqlite"
    db.write_bytes(b"SQLite format 3\x00" + bytes(100))
    r = runner.invoke(app, ["trim", str(db), "-o", str(tmp_path / "o.json")])
    assert r.exit_code == 2 and "trim cuts Chrome traces" in r.stderr, r.output


def test_a_window_with_nothing_in_it_warns(tmp_path: Path) -> None:
    trace = write(tmp_path)
    r = runner.invoke(
        app, ["trim", str(trace), "-o", str(tmp_path / "o.json"), "--window", "@1:@2"]
    )
    assert r.exit_code == 0, r.output
    assert "warning: no event of the trace is in the window @1:@2" in r.stderr
    assert _events_of((tmp_path / "o.json").read_text()) == EVENTS[:2]


def test_a_repeated_trace_events_key_is_not_copied(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    extra = '{"ph": "X", "name": "second array", "pid": 1, "tid": 1, "ts": 1, "dur": 1}'
    trace.write_text(
        HEADER + "\n  " + ",\n  ".join(EVENTS) + "\n" + '],\n  "traceEvents": [' + extra
        + '],\n  "distributedInfo": {"rank": 3}, "traceEvents": []}\n'
    )  # fmt: skip
    text, events = trim(tmp_path, trace=trace)
    assert events == EVENTS and "second array" not in text
    assert text.endswith('\n],\n  "distributedInfo": {"rank": 3}}\n')
    assert json.loads(text)["distributedInfo"] == {"rank": 3}


def test_invalid_utf8_and_bare_inf_events_are_copied(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    odd = [b'{"ph": "X", "name": "bad \xff name", "pid": 100, "tid": 1, "ts": 1050, "dur": inf}']
    body = b",\n  ".join([e.encode() for e in EVENTS] + odd)
    trace.write_bytes(HEADER.encode() + b"\n  " + body + b"\n" + TRAILER.encode())
    out = tmp_path / "out.json"
    r = runner.invoke(app, ["trim", str(trace), "-o", str(out), "-q", "--window", "@1040:@1060"])
    assert r.exit_code == 0, r.output
    assert odd[0] in out.read_bytes()  # dur unreadable: 0, so it is an instant in the window


def test_the_report_gives_the_trim_command_of_its_largest_gaps(tmp_path: Path) -> None:
    extra = '{"ph": "X", "cat": "kernel", "name": "k3", "pid": 0, "tid": 7, "ts": 1200,' + (
        ' "dur": 1, "args": {"device": 0, "stream": 7}}'
    )
    trace = write(tmp_path, [*EVENTS, extra], name="a&b.json")
    page = tmp_path / "r.html"
    r = runner.invoke(app, ["report", str(trace), "-o", str(page), "-q"])
    assert r.exit_code == 0, r.output
    html = page.read_text()
    quoted = "&#39;" + str(trace).replace("&", "&amp;") + "&#39;"  # for a shell, in HTML
    assert f"<code>traceview trim {quoted} --window @0.000:@3200.000 -o gap1.json.gz</code>" in html
    assert "gap2.json.gz" not in html  # one device gap, one command


def test_pstep_range_keeps_both_steps_gpu_work(tmp_path: Path) -> None:
    _, events = trim(tmp_path, "--pstep", "1-2")
    assert EVENTS[6] in events and EVENTS[10] in events  # k1 and k2
    assert EVENTS[5] in events and EVENTS[11] in events  # flows 1 and 2, both ends
    assert EVENTS[12] not in events  # aten::late starts at 1400, after k2's end (1310)

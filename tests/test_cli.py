"""The CLI in-process (CliRunner) and as a subprocess, with good and bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import ROOT, SHARED_TRACES, run_cli
from typer.testing import CliRunner

from traceview.cli import app

DEMO = ROOT / "fixtures" / "demo.json.gz"
SMALL = {
    "traceEvents": [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1,
         "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": 10, "dur": 5, "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "void k<int>(int)", "pid": 0, "tid": 7,
         "ts": 20, "dur": 30, "args": {"device": 0, "stream": 7, "correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "other", "pid": 0, "tid": 7,
         "ts": 60, "dur": 10, "args": {"device": 0, "stream": 7}},
    ],
    "displayTimeUnit": "ms",
}  # fmt: skip
runner = CliRunner()


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.json"
    path.write_text(json.dumps(SMALL, indent=1))
    return path


def test_kernels_json_shape(small: Path) -> None:
    r = runner.invoke(app, ["kernels", str(small), "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == 2
    assert {"count", "total_us", "distinct"} <= doc["totals"].keys()
    assert doc["totals"]["count"] == 2 and doc["totals"]["total_us"] == 40.0
    first = doc["kernels"][0]
    assert set(first) == {
        "name", "short_name", "variants", "count", "total_us", "mean_us", "std_us", "min_us",
        "max_us", "p50_us", "p90_us", "p99_us", "pct_launches", "pct_time",
    }  # fmt: skip
    assert first["name"] == "void k<int>(int)" and first["short_name"] == "k"
    assert first["variants"] == 1
    assert doc["trace"]["span_us"] == 100.0  # ProfilerStep#3 [0, 100] is on the timeline


def test_kernels_sort_top_and_footer(small: Path) -> None:
    r = runner.invoke(app, ["kernels", str(small), "--sort", "name", "--top", "1"])
    assert r.exit_code == 0, r.output
    # by the displayed name: "k" (of "void k<int>(int)") before "other"
    assert r.stdout.rstrip().splitlines()[-3].endswith("  k") and "other" not in r.stdout
    assert "1 more kernel not shown (1 launch, 10.0 µs); use --top 0 for all" in r.stdout


def test_kernels_pstep_and_name(small: Path) -> None:
    r = runner.invoke(app, ["kernels", str(small), "--pstep", "3", "-f", "csv"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.strip().splitlines()
    # "other" has no launch event: its own start (60) is inside the step window [0, 100].
    assert len(lines) == 3 and lines[1].startswith("1,void k<int>(int),k,1,1,30.0")
    r = runner.invoke(app, ["kernels", str(small), "--name", "^oth", "-f", "json"])
    assert [k["name"] for k in json.loads(r.stdout)["kernels"]] == ["other"]


def test_kernels_markdown_and_report(small: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.txt"
    r = runner.invoke(app, ["kernels", str(small), "-f", "md", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "| # | Count | Total |" in r.stdout and "| Kernel |" in r.stdout
    assert "name          void k<int>(int)" in out.read_text()
    again = runner.invoke(app, ["kernels", str(small), "-o", str(out)])
    assert again.exit_code == 2 and "already exists" in again.output
    forced = runner.invoke(app, ["kernels", str(small), "-o", str(out), "--force"])
    assert forced.exit_code == 0, forced.output


def test_steps_command(small: Path) -> None:
    r = runner.invoke(app, ["steps", str(small), "-f", "json"])
    assert r.exit_code == 0, r.output
    (step,) = json.loads(r.stdout)["steps"]
    assert step["step"] == 3 and step["kernels"] == 2 and step["kernel_time_us"] == 40.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pstep", "9"], "no ProfilerStep 9 in this trace (steps found: 3)"),
        (["--pstep", "x"], "expected N, N-M or N,M,..."),
        (["--sort", "bogus"], "--sort 'bogus'"),
        (["--group-by", "x"], "--group-by 'x'"),
        (["--include", "memcpy,bogus"], "unknown kind 'bogus'"),
        (["--name", "("], "not a valid regular expression"),
        (["--format", "xml"], "--format 'xml'"),
    ],
)
def test_usage_errors_exit_2(small: Path, args: list[str], message: str) -> None:
    r = runner.invoke(app, ["kernels", str(small), *args])
    assert r.exit_code == 2
    assert message in r.output


def _bad_inputs(tmp: Path) -> dict[str, Path]:
    text = json.dumps(SMALL, indent=1).encode()
    files = {
        "missing": tmp / "nope.json",
        "directory": tmp / "no_traces",  # a directory is a run (#15): one without rank files
        "empty": tmp / "empty.json",
        "garbage": tmp / "garbage.txt",
        "binary": tmp / "random.bin",
        "object_without_events": tmp / "object.json",
        "execution_trace": tmp / "et.json",
        "truncated": tmp / "truncated.json",
        "truncated_gz": tmp / "truncated.json.gz",
        "corrupt_gz": tmp / "corrupt.json.gz",
        "events_not_list": tmp / "notlist.json",
        "trailing_garbage": tmp / "trailing.json",
    }
    files["directory"].mkdir(exist_ok=True)
    files["empty"].write_bytes(b"")
    files["garbage"].write_text("hello, this is not a trace\n")
    files["binary"].write_bytes(bytes(range(256)) * 8)
    files["object_without_events"].write_text('{"a": 1, "b": [1, 2]}')
    files["execution_trace"].write_text('{"schema": "1.0.1", "pid": 1, "nodes": []}')
    files["truncated"].write_bytes(text[: len(text) * 2 // 3])
    files["truncated_gz"].write_bytes(gzip.compress(text)[:-30])
    files["corrupt_gz"].write_bytes(gzip.compress(text)[:20] + b"\x00garbage" * 20)
    files["events_not_list"].write_text('{"traceEvents": {"a": 1}}')
    files["trailing_garbage"].write_bytes(text + b"\nxyz")
    return files


@pytest.mark.parametrize("command", ["kernels", "steps", "gaps"])
def test_bad_inputs_fail_with_one_line(tmp_path: Path, command: str) -> None:
    for kind, path in _bad_inputs(tmp_path).items():
        r = run_cli(command, str(path))
        assert r.returncode == 1, (kind, r.stderr)
        assert r.stdout == "", kind
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("traceview: error: "), (kind, r.stderr)
        assert "Traceback" not in r.stderr


def test_error_messages_say_what_is_wrong(tmp_path: Path) -> None:
    files = _bad_inputs(tmp_path)
    expect = {
        "missing": "no such file",
        "directory": "a directory without trace files",
        "empty": "empty file",
        "garbage": "not JSON",
        "execution_trace": "PyTorch Execution Trace",
        "object_without_events": 'without "traceEvents"',
        "truncated": "truncated",
        "truncated_gz": "truncated",
        "corrupt_gz": "corrupt gzip",
        "events_not_list": "not a list",
        "trailing_garbage": "followed by other data",
    }
    for kind, fragment in expect.items():
        r = run_cli("kernels", str(files[kind]))
        assert fragment in r.stderr, (kind, r.stderr)


def test_partial_analyses_a_truncated_trace(tmp_path: Path) -> None:
    for name in ("truncated", "truncated_gz"):
        path = _bad_inputs(tmp_path)[name]
        r = run_cli("kernels", str(path), "--partial", "-f", "json")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert any("TRUNCATED" in w for w in doc["trace"]["warnings"])


def test_input_file_is_not_modified(small: Path) -> None:
    before = (small.read_bytes(), small.stat().st_mtime_ns)
    assert run_cli("kernels", str(small)).returncode == 0
    assert (small.read_bytes(), small.stat().st_mtime_ns) == before


def test_help_lists_commands_and_options() -> None:
    r = run_cli("--help")
    assert r.returncode == 0 and "kernels" in r.stdout and "steps" in r.stdout
    r = run_cli("kernels", "--help")
    for option in (
        "--sort",
        "--top",
        "--pstep",
        "--include",
        "--group-by",
        "--format",
        "--partial",
    ):
        assert option in r.stdout


@pytest.mark.skipif(not DEMO.exists(), reason="demo trace not generated")
def test_demo_trace_runs() -> None:
    r = run_cli("kernels", str(DEMO), "--top", "3")
    assert r.returncode == 0, r.stderr
    assert "kernel" in r.stdout


@pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="../shared/traces is absent")
def test_real_trace_as_subprocess() -> None:
    r = run_cli(
        "kernels", str(SHARED_TRACES / "kineto__resnet50_profiler_api_nw0.json.gz"), "-f", "json"
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["totals"]["count"] == 9564

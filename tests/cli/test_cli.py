"""The CLI in-process (CliRunner) and as a subprocess, with good and bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import SHARED_TRACES, run_cli
from typer.testing import CliRunner

from traceview.cli import app

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
        "max_us", "p50_us", "p90_us", "p99_us", "pct_launches", "pct_time", "fused_ops",
    }  # fmt: skip
    assert first["name"] == "void k<int>(int)" and first["short_name"] == "k"
    assert first["fused_ops"] is None  # not a Triton kernel
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


def test_partial_analyses_a_truncated_trace(tmp_path: Path) -> None:
    """(Without --partial, tests/cli/test_bad_input_matrix.py.)"""
    text = json.dumps(SMALL, indent=1).encode()
    plain, gz = tmp_path / "truncated.json", tmp_path / "truncated.json.gz"
    plain.write_bytes(text[: len(text) * 2 // 3])
    gz.write_bytes(gzip.compress(text)[:-30])
    for path in (plain, gz):
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


@pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="../shared/traces is absent")
def test_real_trace_as_subprocess() -> None:
    r = run_cli(
        "kernels", str(SHARED_TRACES / "kineto__resnet50_profiler_api_nw0.json.gz"), "-f", "json"
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["totals"]["count"] == 9564

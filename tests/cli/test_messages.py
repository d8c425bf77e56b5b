"""Messages that help: filters that match nothing, traces without GPU activity, GPUs without a
name, and files that hold every row whatever --top says."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from conftest import ROOT, SHARED_TRACES, run_cli
from typer.testing import CliRunner

from traceview.cli import app

DEMO = ROOT / "fixtures" / "demo.json.gz"
runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--device", "5"], "--device 5: not in this trace (found: 0, 1)"),
        (["--stream", "99", "--stream", "7"], "--stream 99: not in this trace (found: 7, 13,"),
    ],
)
def test_a_filter_that_matches_nothing_is_a_usage_error(args: list[str], said: str) -> None:
    r = run_cli("gaps", str(DEMO), "-q", *args)
    assert r.returncode == 2 and said in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_a_name_that_matches_nothing_warns() -> None:
    r = run_cli("kernels", str(DEMO), "-q", "--name", "no_such_kernel")
    assert r.returncode == 0
    assert (
        r.stderr == "traceview: warning: --name 'no_such_kernel' matches no kernel of this trace\n"
    )


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("hta__cpu_only__rank-34.Jul_15_10_52_41.1074.json.gz", "no GPU kernels recorded"),
        ("hta__mtia_inference_trace__mtia_inference_rank_0.json.gz", "no GPU kernels recorded"),
        ("partt__profiler_trace_runtime_only.json.gz", "runtime calls but no GPU activity"),
    ],
)
@pytest.mark.parametrize("command", ["kernels", "gaps", "summary", "ops"])
def test_a_trace_without_gpu_activity_says_so_in_one_line(
    command: str, name: str, said: str
) -> None:
    path = SHARED_TRACES / name
    if not path.exists():
        pytest.skip("../shared/traces is absent")
    r = runner.invoke(app, [command, str(path), "-q"])
    assert r.exit_code == 0, r.output
    assert r.stdout.count("\n") == 1 and said in r.stdout
    r = runner.invoke(app, [command, str(path), "-q", "-f", "json"])
    json.loads(r.stdout)  # the document keeps its shape


def test_an_unnamed_gpu_is_told_by_what_is_known(tmp_path: Path) -> None:
    doc = {
        "deviceProperties": [{"id": 0, "name": "", "computeMajor": 9, "computeMinor": 4,
                              "numSms": 304}],
        "traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1,
                         "dur": 2, "args": {"device": 0, "stream": 7}}],
    }  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    r = runner.invoke(app, ["kernels", str(path), "-q", "--no-cache"])
    assert "gpu      1 device (unnamed, cc 9.4, 304 SMs), 1 stream" in r.stdout


def test_files_hold_every_kernel_whatever_top_says(tmp_path: Path) -> None:
    r = runner.invoke(app, ["kernels", str(DEMO), "-q", "--top", "3", "-f", "csv"])
    rows = list(csv.DictReader(io.StringIO(r.stdout, newline="")))
    assert len(rows) == 50  # every kernel of the demo trace, not 3
    out = tmp_path / "report.txt"
    r = runner.invoke(app, ["kernels", str(DEMO), "-q", "--top", "3", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "47 more kernels not shown" in r.stdout  # the screen is cut ...
    report = out.read_text()
    assert "all 50 kernels shown" in report  # ... the file is not
    assert report.count("\n#50  ") == 1
    table = report.split("\n\n")[1]  # one line per kernel, before the detailed blocks
    assert len([line for line in table.splitlines() if line[:2].strip().isdigit()]) == 50

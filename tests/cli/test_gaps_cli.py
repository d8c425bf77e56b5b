"""traceview gaps through the CLI: outputs, the remembered trace, usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT, run_cli
from typer.testing import CliRunner

from traceview.cli import app

DEMO = ROOT / "fixtures" / "demo.json.gz"
runner = CliRunner()


def test_table_has_every_section() -> None:
    r = runner.invoke(app, ["gaps", str(DEMO), "--hist-min", "1", "--gap-top", "3"])
    assert r.exit_code == 0, r.output
    for section in ("Streams", "Gap histogram", "Transitions", "Largest gaps", "device   0: idle"):
        assert section in r.stdout
    assert "below 1.000 µs:" in r.stdout


def test_json_totals_agree_with_streams_and_devices() -> None:
    r = runner.invoke(app, ["gaps", str(DEMO), "-f", "json", "--gap-top", "0", "--per-stream"])
    doc = json.loads(r.stdout)
    assert doc["scope"] == "stream"
    streams = doc["streams"]
    assert doc["totals"]["gaps"] == sum(s["gaps"] for s in streams)
    assert doc["totals"]["idle_us"] == pytest.approx(sum(s["idle_us"] for s in streams))
    r = runner.invoke(app, ["gaps", str(DEMO), "-f", "json", "--gap-top", "0"])
    doc = json.loads(r.stdout)
    assert doc["scope"] == "device"
    devices = doc["devices"]
    assert doc["totals"]["gaps"] == sum(d["gaps"] for d in devices)
    assert doc["totals"]["idle_us"] == pytest.approx(sum(d["idle_us"] for d in devices))
    for d in devices:  # idle is the sum of the device gaps
        assert d["idle_us"] == pytest.approx(d["gap_total_us"])
    hist = doc["histogram"]
    assert hist["below"] + sum(hist["counts"]) + hist["above"] == doc["totals"]["gaps"]


def test_csv_and_markdown() -> None:
    csv = runner.invoke(app, ["gaps", str(DEMO), "-f", "csv"]).stdout.splitlines()
    assert csv[0].startswith("device,stream,events,gaps")
    assert len(csv) == 1 + 7  # the demo trace has 7 streams
    md = runner.invoke(app, ["gaps", str(DEMO), "-f", "md"]).stdout
    assert "### Streams" in md and "| Device | Stream |" in md


def test_without_trace_uses_the_last_one() -> None:
    assert runner.invoke(app, ["kernels", str(DEMO), "-q"]).exit_code == 0
    r = run_cli("gaps", "-f", "json", "-q")
    assert r.returncode == 0, r.stderr
    assert "using the last trace analysed" in r.stderr and str(DEMO) in r.stderr
    assert json.loads(r.stdout)["trace"]["path"].endswith("demo.json.gz")


def test_without_any_trace_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACEVIEW_CACHE_DIR", str(tmp_path / "empty"))
    r = runner.invoke(app, ["gaps"])
    assert r.exit_code == 2 and "no TRACE given" in r.output


def test_gap_output_report(tmp_path: Path) -> None:
    out = tmp_path / "gaps.txt"
    r = runner.invoke(app, ["gaps", str(DEMO), "--gap-top", "2", "--gap-output", str(out)])
    assert r.exit_code == 0, r.output
    report = out.read_text()
    assert "all transitions shown" in report  # the report is not cut by --gap-top
    assert "2 more" not in report


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--hist-min", "1ms", "--hist-max", "10us"], "hist"),
        (["--min-gap", "five"], "--min-gap 'five'"),
        (["--gap-sort", "bogus"], "bogus"),
        (["--busy", "kernel,bogus"], "bogus"),
        (["--pstep", "99"], "no ProfilerStep 99"),
    ],
)
def test_usage_errors(args: list[str], message: str) -> None:
    r = runner.invoke(app, ["gaps", str(DEMO), *args])
    assert r.exit_code == 2, r.output
    assert message in r.output

"""``traceview source`` on the command line: the JSON contract, the tables, folded stacks,
files, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SHARED_TRACES, run_cli
from typer.testing import CliRunner

from traceview.cli import app

RESNET = SHARED_TRACES / "tracelens__mi300__resnet_act_checkpoint.json.gz"
needs_resnet = pytest.mark.skipif(not RESNET.is_file(), reason="../shared/traces is absent")
runner = CliRunner()


def invoke(*args: str) -> str:
    r = runner.invoke(app, ["source", *args, "--no-cache"])
    assert r.exit_code == 0, r.output
    return r.stdout


@needs_resnet
def test_the_json_contract() -> None:
    doc = json.loads(invoke(str(RESNET), "-f", "json"))
    assert {"frames", "modules", "totals"} <= set(doc) and doc["schema_version"] == 1
    assert {"kernel_time_us", "attributed_us", "unattributed_us"} <= set(doc["totals"])
    for frame in doc["frames"]:
        assert {"frame", "self_gpu_time_us", "gpu_time_us", "kernels", "calls"} <= set(frame)
    for module in doc["modules"]:
        assert {"module", "path", "forward_gpu_time_us", "backward_gpu_time_us"} <= set(module)
        assert module["path"].endswith(module["module"])
    totals = doc["totals"]
    self_ns = sum(round(f["self_gpu_time_us"] * 1000) for f in doc["frames"])
    assert self_ns + round(totals["unattributed_us"] * 1000) == round(
        totals["kernel_time_us"] * 1000
    )
    assert sum(totals["unattributed_why"].values()) == pytest.approx(totals["unattributed_us"])
    assert any(m["backward_gpu_time_us"] > 0 for m in doc["modules"])


@needs_resnet
def test_folded_stacks_to_a_file_add_up_to_the_kernel_time(tmp_path: Path) -> None:
    out = tmp_path / "gpu.folded"
    r = runner.invoke(app, ["source", str(RESNET), "-f", "folded", "-o", str(out), "--no-cache"])
    assert r.exit_code == 0, r.output
    lines = out.read_text().splitlines()
    stacks = [line.rsplit(" ", 1) for line in lines]
    assert len({s for s, _ in stacks}) == len(lines)  # one line per distinct stack
    doc = json.loads(invoke(str(RESNET), "-f", "json"))
    assert sum(int(n) for _, n in stacks) == round(doc["totals"]["kernel_time_us"] * 1000)
    assert any(";[backward];" in s for s, _ in stacks)
    r = runner.invoke(app, ["source", str(RESNET), "-f", "folded", "-o", str(out), "--no-cache"])
    assert r.exit_code != 0 and "--force" in r.output  # never over an existing file


@needs_resnet
@pytest.mark.parametrize(
    ("args", "header"),
    [
        ((), "Self"),
        (("--by", "module"), "Module path"),
        (("-f", "md"), "| Frame"),
        (("-f", "csv"), "frame,self_gpu_time_us,gpu_time_us"),
        (("--by", "module", "-f", "csv"), "module,path,forward_gpu_time_us"),
    ],
)
def test_tables_in_every_format(args: tuple[str, ...], header: str) -> None:
    out = invoke(str(RESNET), "--top", "5", *args)
    assert header in out


@needs_resnet
def test_top_limits_the_table_and_says_so() -> None:
    out = invoke(str(RESNET), "--top", "3")
    assert "more frames not shown; use --top 0 for all" in out
    assert "GPU time by Python frame" in out


def test_bad_options_and_input(tmp_path: Path) -> None:
    r = run_cli("source", str(tmp_path / "missing.json"))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    garbage = tmp_path / "garbage.json"
    garbage.write_text('{"traceEvents": [{"ph": "X", "cat": "python_function", "ts": "')
    r = run_cli("source", str(garbage), "--no-cache")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    r = run_cli("source", str(garbage), "--by", "line")
    assert r.returncode == 2


def test_the_report_flame_shows_the_folded_stacks(tmp_path: Path) -> None:
    from test_report import DEMO, embedded, write_report

    from traceview.render.html.flame import MIN_SHARE

    page = write_report(DEMO, tmp_path / "r.html")
    icicle = embedded(page, "tv-charts")["flame"]["data"][0]
    per_root: dict[str, int] = {}
    for line in invoke(str(DEMO), "-f", "folded").splitlines():
        stack, ns = line.rsplit(" ", 1)
        per_root[stack.split(";", 1)[0]] = per_root.get(stack.split(";", 1)[0], 0) + int(ns)
    total = sum(per_root.values())
    roots = sorted(v for v, up in zip(icicle["values"], icicle["parents"], strict=True) if not up)
    assert roots == sorted(v for v in per_root.values() if v >= MIN_SHARE * total)

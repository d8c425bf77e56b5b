"""Every kernel on screen is distinguishable (issue #13 "Names"), end to end on the demo."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from conftest import ROOT
from typer.testing import CliRunner

from traceview.cli import app

DEMO = ROOT / "fixtures" / "demo.json.gz"
runner = CliRunner()


def _kernel_cells(*args: str) -> list[str]:
    """The Kernel column of the piped kernels table (the last column, after two spaces)."""
    r = runner.invoke(app, ["kernels", str(DEMO), "-q", "--top", "0", *args])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if set(line) == {"-", " "}) + 1
    rows = lines[start : lines.index("", start)]
    return [row.split("  ")[-1].strip() for row in rows]


def test_the_demo_kernels_table_shows_no_name_twice() -> None:
    cells = _kernel_cells()
    assert len(cells) == 50
    assert [c for c, n in Counter(cells).items() if n > 1] == []
    assert "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align4>" in cells


def test_the_displayed_name_does_not_depend_on_top_or_sort() -> None:
    every = _kernel_cells()
    assert _kernel_cells("--top", "3") == every[:3]
    assert _kernel_cells("--sort", "count", "--top", "7") == _kernel_cells("--sort", "count")[:7]


def test_sort_name_sorts_by_the_displayed_name() -> None:
    cells = _kernel_cells("--sort", "name")
    assert cells == sorted(cells) and len(cells) == 50


def test_group_by_short_says_how_many_variants_each_row_merged() -> None:
    r = runner.invoke(app, ["kernels", str(DEMO), "-q", "--group-by", "short", "-f", "json"])
    assert r.exit_code == 0, r.output
    rows = {k["name"]: k["variants"] for k in json.loads(r.stdout)["kernels"]}
    assert rows["cutlass::Kernel2"] == 3 and rows["ampere_sgemm_128x128_nt"] == 1
    cells = _kernel_cells("--group-by", "short")
    assert "cutlass::Kernel2 (3 variants)" in cells
    assert "ampere_sgemm_128x128_nt" in cells


def test_gaps_tables_tell_the_kernels_apart() -> None:
    r = runner.invoke(app, ["gaps", str(DEMO), "-q", "--gap-top", "0"])
    assert r.exit_code == 0, r.output
    assert "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_tn_align4>" in r.stdout
    assert "cutlass::Kernel2 " not in r.stdout and "cutlass::Kernel2\n" not in r.stdout


def test_diff_rows_tell_the_kernels_apart() -> None:
    r = runner.invoke(app, ["diff", str(DEMO), str(DEMO), "-q", "-f", "json", "--top", "0"])
    assert r.exit_code == 0, r.output
    shown = [k["short_name"] for k in json.loads(r.stdout)["kernels"]]
    assert len(shown) == 50 and len(set(shown)) == 50
    assert "at::native::vectorized_elementwise_kernel<4, FillFunctor<float>, …>" in shown


def test_summary_top_kernels_tell_the_kernels_apart() -> None:
    r = runner.invoke(app, ["summary", str(DEMO), "-q"])
    assert r.exit_code == 0, r.output
    assert "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_tn_align4>" in r.stdout


def _trace(path: Path, kernels: list[tuple[str, int]]) -> Path:
    """A one-stream trace with these (name, µs) kernels, one after another."""
    events, ts = [], 0
    for name, dur in kernels:
        events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts,
                       "dur": dur, "args": {"device": 0, "stream": 7}})  # fmt: skip
        ts += dur + 5
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_diff_group_by_short_compares_template_instantiations_as_one_kernel(
    tmp_path: Path,
) -> None:
    base = _trace(tmp_path / "base.json", [("void k<int>(int)", 10), ("void k<float>(int)", 20)])
    new = _trace(tmp_path / "new.json", [("void k<long>(int)", 35)])
    args = ["diff", str(base), str(new), "-q", "-f", "json", "--no-cache"]
    by_name = json.loads(runner.invoke(app, args).stdout)
    assert [k["name"] for k in by_name["kernels"]] == []
    assert [k["short_name"] for k in by_name["new_kernels"]] == ["k<long>"]  # told from k<int>
    r = runner.invoke(app, [*args, "--group-by", "short"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["selection"]["group_by"] == "short"
    assert doc["new_kernels"] == [] and doc["vanished_kernels"] == []
    [k] = doc["kernels"]
    assert (k["name"], k["time_before_us"], k["time_after_us"]) == ("k", 30.0, 35.0)


def test_diff_group_by_other_is_a_usage_error() -> None:
    r = runner.invoke(app, ["diff", str(DEMO), str(DEMO), "-q", "--group-by", "kernel-name"])
    assert r.exit_code == 2
    assert (
        "--group-by 'kernel-name': expected one of name, short, category, op, fused-op" in r.output
    )

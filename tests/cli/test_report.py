"""``traceview report``: the page carries the commands' JSON documents (so its numbers are
theirs), its tables show their figures, names are escaped, and errors are one line."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

from tests.conftest import ROOT, run_cli
from tests.hostile import hostile_trace
from traceview.cli import app
from traceview.render.escape import html_text, script_json

DEMO = ROOT / "fixtures" / "demo.json.gz"
# The charts drawn for the demo trace; the roofline and the GEMM heatmap too once `ops` gives
# its rows FLOPs (the operator issue), see with_flops.
CHARTS = (
    "breakdown",
    "categories",
    "kernels",
    "timeline",
    "timeline-step",
    "gap-histogram",
    "step-breakdown",
    "steps",
    "mfu",
    "memory",
    "flame",  # the demo has module frames
)
ROOFLINE = ("roofline", "gemm-heatmap")
runner = CliRunner()
# Names that would run script if the page put them into HTML unescaped.
XSS = (
    "<script>window.__pwned=1</script>",
    "</script><script>window.__pwned=2</script>",
    '<img src=x onerror="window.__pwned=3">',
    "<svg onload=window.__pwned=4>",
    '<a href="javascript:window.__pwned=5">click</a>',
    "\u2028<!--<script>",
)


def cli_json(*args: str) -> Any:
    r = runner.invoke(app, [*args, "-f", "json", "-q"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def write_report(trace: Path, out: Path, *more: str) -> str:
    r = runner.invoke(app, ["report", str(trace), "-o", str(out), "-q", *more])
    assert r.exit_code == 0, r.output
    return out.read_text("utf-8")


def embedded(page: str, element: str) -> Any:
    match = re.search(f'<script type="application/json" id="{element}">(.*?)</script>', page, re.S)
    assert match, element
    return json.loads(match.group(1))


def with_flops(page: str) -> bool:
    """Whether any ops row the page carries has FLOPs (then the roofline is drawn)."""
    return any(r.get("flops") for r in embedded(page, "tv-data")["ops"]["ops"])


def without_plotly(page: str) -> str:
    """The page less the inlined plotly.js (whose own code holds tags in strings)."""
    start = page.index("<script>", page.index("</style>"))
    return page[:start] + page[page.index("</script>", start) :]


def hostile_xss_trace(path: Path) -> Path:
    """tests/hostile.py's trace, plus kernels whose names are HTML and script."""
    hostile_trace(path, device="<script>window.__pwned=9</script>")
    doc = json.loads(path.read_text())
    for i, name in enumerate(XSS):
        t = 100_000 + 1000 * i
        doc["traceEvents"].append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": name,
                "pid": 0,
                "tid": 7,
                "ts": t,
                "dur": 300,
                "args": {"device": 0, "stream": 7},
            }
        )
    path.write_text(json.dumps(doc))
    return path


def test_the_page_carries_the_commands_documents(tmp_path: Path) -> None:
    page = write_report(DEMO, tmp_path / "r.html")
    data = embedded(page, "tv-data")
    d = str(DEMO)
    assert data["summary"] == cli_json("summary", d)
    assert data["kernels"] == cli_json("kernels", d, "--top", "0")
    assert data["gaps"] == cli_json("gaps", d, "--largest", "20")
    assert data["steps"] == cli_json("steps", d)
    grouped = ["--group-by", data["ops"]["group_by"]] if "group_by" in data["ops"] else []
    assert data["ops"] == cli_json("ops", d, "--top", "0", *grouped)


def test_the_tables_and_charts_show_the_commands_figures(tmp_path: Path) -> None:
    page = write_report(DEMO, tmp_path / "r.html")
    summary, kernels = cli_json("summary", str(DEMO)), cli_json("kernels", str(DEMO), "--top", "0")
    for device in summary["devices"]:  # idle ms and % of the window, in the breakdown table
        idle = f"{device['idle_us'] / 1000:,.3f} ms<small> "
        assert idle + f"{100 * device['idle_us'] / device['window_us']:.1f}%</small>" in page
    charts = embedded(page, "tv-charts")
    bars = charts["kernels"]["data"][0]
    assert bars["x"] == [k["total_us"] / 1000 for k in kernels["kernels"][:20]]
    split = charts["breakdown"]["data"]
    for i, device in enumerate(summary["devices"]):
        parts = sum(trace["x"][i] for trace in split)
        assert parts == pytest.approx(device["window_us"] / 1000)
    hist = cli_json("gaps", str(DEMO))["histogram"]
    assert charts["gap-histogram"]["data"][0]["text"] == [
        str(c) if c else "" for c in hist["counts"]
    ]
    steps = cli_json("steps", str(DEMO))["steps"]
    assert charts["steps"]["data"][0]["y"] == [s["step_time_us"] / 1000 for s in steps]
    with_flops = [s for s in steps if s["model_flops"]]
    mfu = [None if s["mfu"] is None else 100 * s["mfu"] for s in with_flops]
    assert with_flops and charts["mfu"]["data"][0]["y"] == mfu
    assert charts["mfu"]["data"][1]["y"] == [s["tflops_per_s"] for s in with_flops]


def test_every_section_and_the_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The header names the command line the process was started with.
    monkeypatch.setattr("sys.argv", ["traceview", "report", "t <b>.json"])
    page = write_report(DEMO, tmp_path / "r.html", "--timeline-step", "6")
    for name in CHARTS:
        assert f'data-chart="{name}"' in page
    # Without FLOPs in ops, each roofline chart is one line saying why; with them, drawn.
    mark = "data-chart" if with_flops(page) else "data-absent"
    assert f'{mark}="roofline"' in page and f'{mark}="gemm-heatmap"' in page
    assert "step 6&#39;s first GPU work" in page or "step 6's first GPU work" in page
    for fact in (
        "fixtures/demo.json.gz",
        "NVIDIA H100 80GB HBM3",
        "<th>command</th><td>traceview report &#39;t &lt;b&gt;.json&#39;</td>",
    ):
        assert fact in page
    assert "http://" not in without_plotly(page) and "https://" not in without_plotly(page)


def test_names_are_escaped_and_cannot_close_the_data(tmp_path: Path) -> None:
    page = write_report(hostile_xss_trace(tmp_path / "h.json"), tmp_path / "r.html")
    ours = without_plotly(page)
    for name in XSS:
        assert name not in ours
    assert "\u2028" not in ours and "<!--" not in ours
    assert ours.count("<script") == 3  # the data (2) and report.js: nothing from the trace
    names = [k["name"] for k in embedded(page, "tv-data")["kernels"]["kernels"]]
    assert set(XSS) <= set(names)  # the real names, intact, for the table's textContent


def test_script_json_and_html_text() -> None:
    value = {"a": "</script><script>alert(1)</script>", "b": "\u2028\u2029 & <!-- x -->"}
    text = script_json(value)
    assert "<" not in text and ">" not in text and "&" not in text
    assert "\u2028" not in text and "\u2029" not in text
    assert orjson.loads(text) == value
    assert html_text('<b a="1">\x1b & \'') == "&lt;b a=&quot;1&quot;&gt;\\x1b &amp; &#39;"


def test_usage_and_data_errors_are_one_line(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    out.write_text("mine")
    r = run_cli("report", str(DEMO), "-o", str(out), "-q")
    assert r.returncode == 2 and "already exists" in r.stderr and out.read_text() == "mine"
    r = run_cli("report", str(DEMO), "-o", str(tmp_path / "n.html"), "--timeline-step", "99", "-q")
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "--timeline-step 99: no such step in this trace (steps: 5-10)" in r.stderr
    r = run_cli("report", str(DEMO), "-q")
    assert r.returncode == 2 and "--output" in r.stderr
    r = run_cli("report", str(tmp_path / "absent.json"), "-o", str(tmp_path / "a.html"))
    assert r.returncode != 0 and "Traceback" not in r.stderr


def test_without_plotly_one_line_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from traceview.render.html import page

    def absent(name: str) -> None:
        return None  # what find_spec says of a package that is not installed

    monkeypatch.setattr(page, "find_spec", absent)
    r = runner.invoke(app, ["report", str(DEMO), "-o", str(tmp_path / "r.html"), "-q"])
    assert r.exit_code == 1
    assert r.output.strip().splitlines() == [f"traceview: error: {page.MISSING_PLOTLY}"]
    assert not (tmp_path / "r.html").exists()


def test_the_page_written_as_bytes_is_the_page_encoded() -> None:
    from traceview.app.commands import ReadOptions, read_trace
    from traceview.render.html.documents import ReportOptions, collect
    from traceview.render.html.page import PageInfo, render, render_bytes

    docs = collect(read_trace(DEMO, ReadOptions(quiet=True), keep_cpu=True), ReportOptions())
    info = PageInfo("test", "traceview report <demo> ✓")
    assert render_bytes(docs, info) == render(docs, info).encode("utf-8")


def test_the_memory_section_shows_the_memory_command_s_figures(tmp_path: Path) -> None:
    page = write_report(DEMO, tmp_path / "r.html")
    device = cli_json("memory", str(DEMO))["devices"][0]
    allocated, reserved, peak = embedded(page, "tv-charts")["memory"]["data"][:3]
    assert allocated["y"] == [p["allocated_bytes"] / 2**30 for p in device["timeline"]]
    assert reserved["y"] == [p["reserved_bytes"] / 2**30 for p in device["timeline"]]
    assert peak["y"] == [device["peak_allocated_bytes"] / 2**30] == [max(allocated["y"])]
    for holder in device["holders"][:10]:
        assert f"<td>{html_text(holder['op'])}</td>" in page


def test_ops_holding_memory_are_escaped(tmp_path: Path) -> None:
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 0, "dur": 5,
         "args": {"device": 0, "stream": 7}},
    ]  # fmt: skip
    for i, name in enumerate(XSS):
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
                       "ts": 100 * i, "dur": 10})  # fmt: skip
        events.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1,
                       "tid": 1, "ts": 100 * i + 1, "args": {"Device Type": 1, "Device Id": 0,
                       "Bytes": 1 << 20, "Addr": (i + 1) << 20,
                       "Total Allocated": (i + 1) << 20, "Total Reserved": 1 << 30}})  # fmt: skip
    trace = tmp_path / "m.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    ours = without_plotly(write_report(trace, tmp_path / "r.html"))
    for name in XSS:
        assert name not in ours
        assert f"<td>{html_text(name)}</td>" in ours
    assert ours.count("<script") == 3


def test_the_step_chart_names_each_rectangle_by_its_kernel() -> None:
    from traceview.app.commands import ReadOptions, read_trace
    from traceview.render.html.charts import label, step_work
    from traceview.render.html.documents import ReportOptions, collect

    docs = collect(read_trace(DEMO, ReadOptions(quiet=True), keep_cpu=True), ReportOptions())
    work, figure = docs.step, step_work(docs)
    assert work is not None and figure is not None
    graph = np.zeros(len(work.ts), dtype=bool) if work.graph is None else work.graph
    # the traces in the chart's order (category, then graph replays last), one name a kernel
    expected = [
        label(docs.names[n], 90)
        for c in sorted(set(work.category.tolist()))
        for replayed in (False, True)
        for n in work.name[(work.category == c) & (graph == replayed)].tolist()
    ]
    shown = [name for bars in figure["data"] for name in bars["hovertext"]]
    assert shown == expected
    assert len(set(shown)) < len(shown)  # names repeat: each is labelled once, used again


def test_collect_lets_go_of_the_links_but_their_launch_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Shared handed over to collect: by the time the gaps' document is made, its links'
    columns but the launch times are gone (30 MB at 7.8 GB); the gaps read the same launch
    times, and a column let go of fails loudly if read."""
    import gc
    import weakref

    from traceview.analyses.core.common import work_out
    from traceview.app.commands import ReadOptions, read_trace
    from traceview.columns.schema import ColumnDropped
    from traceview.render.html import documents

    events = read_trace(DEMO, ReadOptions(quiet=True), keep_cpu=True)
    held = [work_out(events)]
    leaf, launch = weakref.ref(held[0].links.leaf), held[0].links.launch
    seen: list[tuple[bool, bool]] = []
    real = documents.analyse_gaps

    def gaps(events: Any, options: Any, shared: Any) -> Any:
        gc.collect()
        seen.append((leaf() is None, shared.links.launch is launch))
        with pytest.raises(ColumnDropped):
            shared.links.leaf.sum()
        return real(events, options, shared)

    monkeypatch.setattr(documents, "analyse_gaps", gaps)
    documents.collect(events, documents.ReportOptions(), held.pop())
    assert seen == [(True, True)]


def test_report_lets_go_of_the_runtime_calls_before_the_device_gaps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runtime calls (16 B each) are gone once the links are made, before the device
    gaps' peak: only the launched mask is kept."""
    import gc
    import weakref

    from traceview.analyses.core import common
    from traceview.app.reading import read_trace

    calls: list[weakref.ref[object]] = []
    alive: list[bool] = []
    real_read, real_gaps = read_trace, common.every_gap

    def read(*args: Any, **kwargs: Any) -> Any:
        events = real_read(*args, **kwargs)
        calls.append(weakref.ref(events.runtime.correlation))
        return events

    def every_gap(*args: Any) -> Any:
        gc.collect()
        alive.append(calls[0]() is not None)
        return real_gaps(*args)

    monkeypatch.setattr("traceview.app.commands.read_trace", read)
    monkeypatch.setattr(common, "every_gap", every_gap)
    out = tmp_path / "r.html"
    r = runner.invoke(app, ["report", str(DEMO), "-o", str(out), "-q", "--no-cache"])
    assert r.exit_code == 0, r.output
    assert alive == [False]

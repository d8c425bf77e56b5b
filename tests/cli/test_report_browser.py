"""The report in a real browser (Playwright driving Debian's chromium), cut off from the
network: no error, no request leaving the file, every chart drawn, the filter works, hostile
names run nothing. Screenshots go to the test's tmp dir (and to $TRACEVIEW_SCREENSHOTS)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_report import (
    CHARTS,
    ROOFLINE,
    XSS,
    hostile_xss_trace,
    with_flops,
    write_report,
)
from test_report_roofline import DEVICE, ROWS

from tests.conftest import ROOT, SHARED_TRACES

# Debian's chromium, or the one $TRACEVIEW_CHROMIUM names (playwright downloads no browser here).
CHROMIUM = Path(os.environ.get("TRACEVIEW_CHROMIUM", "/usr/bin/chromium"))
DEMO = ROOT / "fixtures" / "demo.json.gz"
# A real trace whose ops carry shapes (record_shapes) and one without steps.
REAL = (
    "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "kineto__resnet50_profiler_api_nw0.json.gz",
)

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
)
if not os.access(CHROMIUM, os.X_OK):
    pytest.skip(
        f"no chromium at {CHROMIUM} (apt-get install chromium, as .ci/run does, or set "
        "TRACEVIEW_CHROMIUM to a chromium binary)",
        allow_module_level=True,
    )


class Visit:
    """A page opened offline, with every console message, page error and request noted."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.dialogs: list[str] = []
        self.context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("dialog", self._dialog)
        self.page.goto(path.as_uri())
        self.page.wait_for_function("document.body.dataset.drawn === 'true'")

    def _route(self, route: Any) -> None:
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def _console(self, message: Any) -> None:
        if message.type in ("error", "warning"):
            self.errors.append(f"console {message.type}: {message.text}")

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def drawn(self) -> dict[str, tuple[float, float]]:
        """Each data-chart with an svg or canvas inside: its drawn size."""
        out = {}
        for el in self.page.query_selector_all("[data-chart]"):
            inner = el.query_selector("svg.main-svg, canvas")
            box = inner.bounding_box() if inner else None
            out[el.get_attribute("data-chart")] = (box["width"], box["height"]) if box else (0, 0)
        return out

    def screenshot(self, path: Path) -> None:
        self.page.screenshot(path=str(path), full_page=True)
        wanted = os.environ.get("TRACEVIEW_SCREENSHOTS")
        if wanted:
            shutil.copy(path, Path(wanted) / f"report-{path.stem}.png")

    def clean(self) -> None:
        assert self.errors == [] and self.outside == [] and self.dialogs == []
        assert self.page.evaluate("window.__pwned") is None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        yield b
        b.close()


def test_demo_offline_drawn_and_filterable(browser: Any, tmp_path: Path) -> None:
    visit = Visit(browser, _report(DEMO, tmp_path))
    drawn = visit.drawn()
    roofline = ROOFLINE if with_flops(visit.page.content()) else ()
    assert sorted(drawn) == sorted(CHARTS + roofline)
    assert all(w > 100 and h > 100 for w, h in drawn.values()), drawn
    rows = visit.page.locator("#kernel-table tbody tr")
    assert rows.count() == 50
    visit.page.fill("#kernel-filter", "nccl")
    shown = [
        visit.page.locator("#kernel-table tbody tr td.name").nth(i).get_attribute("title")
        for i in range(rows.count())
    ]
    assert 0 < len(shown) < 50 and all("nccl" in s.lower() for s in shown)
    visit.page.fill("#kernel-filter", "/^void flash::/")
    assert 0 < rows.count() < len(shown) + 50
    visit.page.fill("#kernel-filter", "")
    visit.page.click("#kernel-table th:has-text('count')")
    counts = [
        int(c.replace(",", ""))
        for c in visit.page.locator("#kernel-table tbody tr td:nth-child(3)").all_inner_texts()
    ]
    assert counts == sorted(counts, reverse=True) and len(counts) == 50
    visit.screenshot(tmp_path / "demo.png")
    visit.clean()


def test_hostile_names_run_nothing_and_show_as_text(browser: Any, tmp_path: Path) -> None:
    visit = Visit(browser, _report(hostile_xss_trace(tmp_path / "h.json"), tmp_path))
    titles = visit.page.locator("#kernel-table tbody td.name").evaluate_all(
        "cells => cells.map(c => c.title)"
    )
    for name in XSS[:-1]:
        assert name in titles  # shown as the characters it is made of
    assert "\\u2028<!--<script>" in titles  # the line separator shown as an escape
    assert visit.page.locator("h1").inner_text().startswith("traceview report: h.json")
    for i in range(visit.page.locator(".js-plotly-plot").count()):  # hovering runs nothing
        visit.page.locator(".js-plotly-plot").nth(i).hover()
    visit.screenshot(tmp_path / "hostile.png")
    visit.clean()


def test_roofline_and_heatmap_drawn_from_ops_with_flops(browser: Any, tmp_path: Path) -> None:
    from traceview.app.commands import ReadOptions, read_trace
    from traceview.render.html.documents import ReportOptions, collect
    from traceview.render.html.page import PageInfo, render

    docs = collect(read_trace(DEMO, ReadOptions(quiet=True), keep_cpu=True), ReportOptions())
    docs = replace(docs, ops={**docs.ops, "ops": ROWS, "device": DEVICE})
    page = tmp_path / "roofline.html"
    page.write_text(render(docs, PageInfo("test", "traceview report")), "utf-8")
    visit = Visit(browser, page)
    drawn = visit.drawn()
    assert drawn["roofline"][1] > 100 and drawn["gemm-heatmap"][1] > 100
    heat = visit.page.locator('[data-chart="gemm-heatmap"]')
    before = heat.evaluate("el => el.data.map(t => t.visible)")
    heat.locator(".updatemenu-header-group").click()
    heat.locator(".updatemenu-dropdown-button").nth(1).click()
    after = heat.evaluate("el => el.data.map(t => t.visible)")
    assert before[0] is True and after[1] is True and after[0] is False
    visit.page.locator('[data-chart="roofline"]').screenshot(path=str(tmp_path / "r.png"))
    visit.screenshot(tmp_path / "roofline.png")
    visit.clean()


@pytest.mark.parametrize("name", REAL)
def test_real_traces(browser: Any, tmp_path: Path, name: str) -> None:
    trace = SHARED_TRACES / name
    if not trace.exists():
        pytest.skip(f"{trace} is absent")
    visit = Visit(browser, _report(trace, tmp_path))
    drawn = visit.drawn()
    assert {"breakdown", "kernels", "timeline", "gap-histogram"} <= set(drawn)
    assert all(w > 100 and h > 100 for w, h in drawn.values()), drawn
    visit.screenshot(tmp_path / f"{name.split('__')[0]}.png")
    visit.clean()


def test_train_findings_first_linked_to_their_charts(browser: Any, tmp_path: Path) -> None:
    """h200/train: the summary's findings head the page, each linked to a section that is
    on it; the per-step breakdown shows the host wait of the every-third-step stall (steps
    5 and 8 the largest); the timeline marks each step's bounds."""
    trace = SHARED_TRACES / "h200" / "train.json.gz"
    if not trace.exists():
        pytest.skip(f"{trace} is absent")
    visit = Visit(browser, _report(trace, tmp_path))
    page = visit.page
    sections = page.locator("section").evaluate_all("s => s.map(e => e.id)")
    assert sections[0] == "findings"
    rules = page.locator("ol.findings li").evaluate_all("l => l.map(e => e.dataset.rule)")
    assert rules == ["gemm-alignment", "cpu-bound", "host-stall"]  # by time at stake
    links = page.locator("ol.findings a").evaluate_all("a => a.map(e => e.hash.slice(1))")
    assert links == ["roofline", "steps", "steps"] and set(links) <= set(sections)
    page.locator("ol.findings a").nth(1).click()
    assert page.evaluate("location.hash") == "#steps"
    chart = page.locator('[data-chart="step-breakdown"]')
    bars = chart.evaluate("el => el.data.map(t => [t.name, t.x, t.y])")
    steps, host = next((x, y) for name, x, y in bars if name == "host wait")
    stalls = sorted(zip(host, steps, strict=True), reverse=True)[:2]
    assert sorted(s for _, s in stalls) == ["5", "8"]
    assert min(h for h, _ in stalls) > 2 * sorted(host)[len(host) // 2]  # they stand out
    shapes = page.locator('[data-chart="timeline"]').evaluate("el => el.layout.shapes.length")
    assert shapes == len(steps) + 1  # every step's start, and the last one's end
    assert visit.drawn()["step-breakdown"][1] > 100
    visit.screenshot(tmp_path / "train.png")
    visit.clean()


EDGE = sorted(p.name for p in (ROOT / "fixtures" / "edge").glob("*.json"))
UNREADABLE = {"execution_trace.json", "truncated.json"}


@pytest.mark.parametrize("name", [n for n in EDGE if n not in UNREADABLE])
def test_edge_fixtures_draw_without_errors(browser: Any, tmp_path: Path, name: str) -> None:
    visit = Visit(browser, _report(ROOT / "fixtures" / "edge" / name, tmp_path))
    drawn = visit.drawn()
    assert all(w > 100 and h > 100 for w, h in drawn.values()), drawn
    absent = visit.page.locator("[data-absent]").all_inner_texts()
    assert all(text.startswith("absent: ") for text in absent)
    assert len(drawn) + len(absent) >= 7  # every chart, or a line saying why not
    visit.clean()


def _report(trace: Path, tmp_path: Path) -> Path:
    out = tmp_path / "report.html"
    write_report(trace, out, "--force")
    return out


@pytest.mark.parametrize("run", ["dlrm", "generated"])
def test_ranks_chart_drawn_for_a_run(browser: Any, tmp_path: Path, run: str) -> None:
    from test_ranks import generated_run
    from test_report_ranks import dlrm_dir

    if run == "dlrm":
        inputs = dlrm_dir(tmp_path)
    else:
        inputs = generated_run(tmp_path / "run", "--ranks", "6", "--late-rank", "4")
    out = tmp_path / "report.html"
    write_report(inputs, out, "--force", "-j", "1")
    visit = Visit(browser, out)
    drawn = visit.drawn()
    assert drawn["ranks"][0] > 100 and drawn["ranks"][1] > 100, drawn
    assert {"breakdown", "kernels", "timeline"} <= set(drawn)
    assert all(w > 100 and h > 100 for w, h in drawn.values()), drawn
    chart = visit.page.locator('[data-chart="ranks"]')
    assert chart.locator(".annotation-text").text_content().startswith("★ slowest: rank ")
    assert chart.locator("g.trace.bars .point").count() == 2 * (8 if run == "dlrm" else 6)
    chart.screenshot(path=str(tmp_path / f"ranks-{run}.png"))
    visit.screenshot(tmp_path / f"run-{run}.png")
    visit.clean()


def test_diff_waterfall_page_drawn_offline(browser: Any, tmp_path: Path) -> None:
    """``diff --explain -f html``: the waterfall drawn, a bar per part, hostile names inert."""
    from test_diff_page import hostile_copy, waterfall_page

    new = hostile_copy(tmp_path)
    out, bars = waterfall_page(tmp_path, DEMO, new)
    visit = Visit(browser, out)
    drawn = visit.drawn()
    assert list(drawn) == ["waterfall"] and all(s > 100 for s in drawn["waterfall"]), drawn
    points = visit.page.locator("[data-chart=waterfall] .point").count()
    assert points == len(bars["y"]) == len(bars["x"])
    box = visit.page.locator("[data-chart=waterfall] .nsewdrag").first.bounding_box()
    for i in range(4 * points):  # across every bar: hovering a name that is script runs nothing
        x = box["x"] + box["width"] * (i + 0.5) / (4 * points)
        visit.page.mouse.move(x, box["y"] + box["height"] / 2)
    visit.screenshot(tmp_path / "diff.png")
    visit.clean()

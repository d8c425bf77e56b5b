"""HTML report benchmark: page size and write time of ``traceview report``.

    python benchmarks/bench_report.py [TRACE ...] [--size 1GB] [--runs 3] [--browser]

With no TRACE, a kineto trace of ``--size`` is generated once (fixtures/generate.py) into
benchmarks/data/bench-SIZE.json. Per trace: one cold run (fills a private cache, timed too),
then ``--runs`` warm runs from the cache, each ``traceview report TRACE -o page.html``
in its own process; the median warm wall time, the page's size (and gzipped) and each run's
peak RSS (``os.wait4``) are printed; a trace traceview cannot report on is said and skipped.
With ``--browser``, the last page is also opened offline in chromium (Playwright, the system's
/usr/bin/chromium or $TRACEVIEW_CHROMIUM): the time from navigation until every chart is drawn
(``body[data-drawn]``), the charts drawn, and any console error or request leaving the file.
Targets (issue 17): under 10 MB for the 1 GB trace, under 2 s warm, drawn in under 5 s.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class Failed(Exception):
    """traceview report exited non-zero (its one-line message)."""


def run(trace: Path, out: Path, cache: Path) -> tuple[float, float, float]:
    """One ``traceview report`` in its own process: its wall time (s), peak RSS (MB) and CPU
    time (user + system, s: on a loaded machine, steadier than the wall time)."""
    env = {**os.environ, "TRACEVIEW_CACHE_DIR": str(cache)}
    args = [sys.executable, "-m", "traceview", "report", str(trace), "-o", str(out), "--force"]
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([*args, "-q"], env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            err.seek(0)
            lines = err.read().strip().splitlines()
            raise Failed(lines[-1] if lines else f"exit {proc.returncode}")
    return wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def browse(page: Path) -> str:
    """Open the page offline in chromium: seconds until drawn, charts drawn, problems."""
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("TRACEVIEW_CHROMIUM", "/usr/bin/chromium")
    problems: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        context = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})

        def only_the_file(route: Any) -> None:
            if route.request.url.startswith("file:"):
                route.continue_()
            else:
                problems.append(f"request {route.request.url}")
                route.abort()

        context.route("**/*", only_the_file)
        tab = context.new_page()
        tab.on("pageerror", lambda e: problems.append(str(e)))
        tab.on("console", lambda m: m.type == "error" and problems.append(m.text))
        start = time.perf_counter()
        tab.goto(page.as_uri(), timeout=120_000)
        tab.wait_for_function("document.body.dataset.drawn === 'true'", timeout=120_000)
        drawn = time.perf_counter() - start
        charts = tab.evaluate(
            "[...document.querySelectorAll('[data-chart]')]"
            ".filter(el => el.querySelector('svg.main-svg, canvas')).length"
        )
        wanted = tab.evaluate("document.querySelectorAll('[data-chart]').length")
        browser.close()
    return f"drawn in chromium in {drawn:.2f} s ({charts}/{wanted} charts; problems: {problems})"


def measure(trace: Path, runs: int, browser: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cache, out = Path(tmp) / "cache", Path(tmp) / "report.html"
        try:
            cold, cold_rss, _ = run(trace, out, cache)
        except Failed as e:
            print(f"{trace.name}: no report ({e})")
            return
        warm = [run(trace, out, cache) for _ in range(runs)]
        page = out.read_bytes()
        shown = browse(out) if browser else ""
    walls, cpus = [w for w, _, _ in warm], [c for _, _, c in warm]
    print(
        f"{trace.name}: {trace.stat().st_size / 1e6:,.2f} MB trace; page "
        f"{len(page) / 1e6:.2f} MB ({len(gzip.compress(page)) / 1e6:.2f} MB gzipped); "
        f"cold {cold:.2f} s (peak RSS {cold_rss:,.0f} MB); warm median "
        f"{statistics.median(walls):.2f} s (runs: {', '.join(f'{w:.2f}' for w in walls)}; "
        f"CPU median {statistics.median(cpus):.2f} s; "
        f"peak RSS {max(r for _, r, _ in warm):,.0f} MB)" + (f"; {shown}" if shown else ""),
        flush=True,
    )


def generated(size: str) -> Path:
    path = ROOT / "benchmarks" / "data" / f"bench-{size}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        generate = [sys.executable, str(ROOT / "fixtures" / "generate.py"), "--size", size]
        subprocess.run([*generate, str(path)], check=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", type=Path)
    parser.add_argument("--size", default="1GB")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--browser", action="store_true", help="time drawing it in chromium")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    for trace in args.traces or [generated(args.size)]:
        measure(trace, args.runs, args.browser)


if __name__ == "__main__":
    main()

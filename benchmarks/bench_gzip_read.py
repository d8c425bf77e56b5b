"""A command on a gzip trace, with the inflater variants side by side (alternated runs).

    python benchmarks/bench_gzip_read.py [FILE.json.gz] [--runs 5] [--command kernels]

Variants: ``python-inflate`` (the compiled scanner, zlib-ng inflating in the reading
process, the worker's share 0.56: as before the compiled gzip reader), ``compiled`` (the
compiled core's gzip reader on its own thread: what runs by default), ``compiled-1p`` (the
same in one process: no two-process split). Each run is a fresh ``traceview CMD FILE
--no-cache -q -f json``; reported: the median wall and CPU (user + sys of the process and
its worker), MB/s of decompressed bytes, and the load average before and after, since the
machine may be shared.
"""

from __future__ import annotations

import argparse
import gzip
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "traces" / "h200" / "big.json.gz"
_RUN = "import sys; from traceview.cli import main; sys.argv[0] = 'traceview'; sys.exit(main())"
# Before the compiled gzip reader: zlib-ng in the reading process, the worker's share 0.56.
_NO_COMPILED_GZIP = (
    "import traceview.read.source as s, traceview.read.reader as r; "
    "s.gzip_reader = lambda *a: None; r._GZIP_WORKER_SHARE = (0.56, 0.56); "
)
VARIANTS = {
    "python-inflate": (_NO_COMPILED_GZIP + _RUN, {}),
    "compiled": (_RUN, {}),
    "compiled-1p": (_RUN, {"TRACEVIEW_PARALLEL_MIN_BYTES": str(1 << 62)}),
}


def run_once(code: str, env: dict[str, str], args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + sys, the worker's too) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code, *args],
        env={**os.environ, **env},
        check=True,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--command", default="kernels")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    opts = parser.parse_args()
    with gzip.open(opts.file, "rb") as f:
        size = sum(len(b) for b in iter(lambda: f.read(1 << 24), b""))
    args = [opts.command, str(opts.file), "--no-cache", "-q", "-f", "json"]
    print(f"{opts.file} ({size / 1e6:.0f} MB decompressed), `traceview {' '.join(args)}`")
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in opts.variants}
    for _ in range(opts.runs):
        for name in opts.variants:
            code, env = VARIANTS[name]
            times[name].append(run_once(code, env, args))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print("| variant | wall s (median) | CPU s (median) | MB/s (wall) | walls |")
    print("|---|---|---|---|---|")
    for name, runs in times.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        walls = " ".join(f"{w:.2f}" for w, _ in runs)
        print(f"| {name} | {wall:.2f} | {cpu:.2f} | {size / 1e6 / wall:,.0f} | {walls} |")


if __name__ == "__main__":
    main()

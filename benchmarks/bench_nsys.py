"""Nsight Systems export benchmark: how fast traceview reads an nsys SQLite file.

    python benchmarks/bench_nsys.py [--size 1GB] [--runs 3] [--data-dir benchmarks/data]

A synthetic export of about ``--size`` bytes is generated once with the test suite's writer
(tests/nsys_writer.py: nsys's table and column names, a subset of the columns) and kept in
the data dir as nsys-1GB.sqlite: kernels on 2 devices × 3 streams with 50 names, one
``cudaLaunchKernel_v7000`` runtime call per kernel, a ``ProfilerStep#N`` NVTX range per
1000 kernels. Then ``traceview kernels FILE --no-cache -f json`` runs ``--runs`` times in
its own process (after one untimed ``cat FILE > /dev/null`` to warm the page cache); the
median wall time gives rows/s (kernel + runtime + NVTX rows) and MB/s (file bytes).
Peak RSS is the largest child's ``ru_maxrss``. Sizes use decimal units.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from nsys_writer import PUSH_POP, Writer, gtid  # noqa: E402

UNITS = {"MB": 10**6, "GB": 10**9}
BATCH = 200_000  # kernels per insert batch
NAMES = 50
PER_STEP = 1000


def parse_size(text: str) -> int:
    number, unit = text[:-2], text[-2:].upper()
    return int(float(number) * UNITS[unit])


def generate(path: Path, size: int) -> int:
    """Write an export of about ``size`` bytes; returns the number of kernels."""
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    w = Writer(tmp)
    w.db.execute("PRAGMA synchronous = OFF")
    names = [w.sid(f"void kernel_{i}<float, {i % 7}>(Params<{i}>)") for i in range(NAMES)]
    launch = w.sid("cudaLaunchKernel_v7000")
    thread = gtid(4242, 4242)
    n = 0
    while os.path.getsize(tmp) < size:
        kernels, calls, steps = [], [], []
        for i in range(n, n + BATCH):
            start = i * 3000
            kernels.append((start, start + 1000 + (i % 13) * 97, i % 2, 1, 7 + i % 3, i, 1,
                            names[i % NAMES], names[i % NAMES], 32, 64, 128))  # fmt: skip
            calls.append((start - 700, start - 200, 0, thread, i, launch, 0))
            if i % PER_STEP == 0:
                end = start + PER_STEP * 3000 - 800
                steps.append((start - 800, end, PUSH_POP, None, f"ProfilerStep#{i // PER_STEP}",
                              thread, None))  # fmt: skip
        w.insert("CUPTI_ACTIVITY_KIND_KERNEL", kernels)
        w.insert("CUPTI_ACTIVITY_KIND_RUNTIME", calls)
        w.insert("NVTX_EVENTS", steps)
        w.db.commit()
        n += BATCH
    w.close()
    tmp.rename(path)
    return n


def rows_in(path: Path) -> int:
    import sqlite3

    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    tables = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")
    total = sum(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables)
    db.close()
    return int(total)


def timed_run(path: Path) -> float:
    command = [sys.executable, "-m", "traceview", "kernels", str(path), "--no-cache", "-f", "json"]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"traceview failed: {done.stderr.strip()}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="1GB")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=ROOT / "benchmarks" / "data")
    args = parser.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    path = args.data_dir / f"nsys-{args.size}.sqlite"
    if not path.exists():
        start = time.perf_counter()
        kernels = generate(path, parse_size(args.size))
        print(f"generated {path} ({kernels:,} kernels) in {time.perf_counter() - start:.1f} s")
    size, rows = path.stat().st_size, rows_in(path)
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
    walls = [timed_run(path) for _ in range(args.runs)]
    wall = statistics.median(walls)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"file {path.name}: {size / 1e6:,.1f} MB, {rows:,} rows")
    print(f"traceview kernels --no-cache: median {wall:.2f} s of {[round(w, 2) for w in walls]}")
    print(f"{rows / wall / 1e6:.2f} M rows/s, {size / wall / 1e6:.1f} MB/s, peak RSS {peak:.0f} MB")


if __name__ == "__main__":
    main()

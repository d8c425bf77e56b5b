"""Read-time cost of the launch configuration column (grid, block, registers, shared memory,
bytes): time to read a generated trace into columns, serially and with the default reader.

    python benchmarks/bench_launch.py [--size 200MB] [--runs 5] [--data-dir /tmp]

Run it on the commit before the launch column and on the one after; each run reads the same
file (generated once, seed 0, from the page cache after one untimed read) in a fresh process,
without the cache, and prints the median wall time of ``collect_events`` and the peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_WORKER = """
import json, resource, sys, time
from pathlib import Path
from traceview.events import collect_events
from traceview.read.reader import TraceReader
t = time.perf_counter()
events = collect_events(TraceReader(Path(sys.argv[1])))
took = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"s": took, "rss": rss, "gpu": len(events.gpu.ts)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="200MB")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp"))
    args = parser.parse_args()
    root = Path(__file__).resolve().parent.parent
    trace = args.data_dir / f"bench-launch-{args.size}.json"
    if not trace.exists():
        generator = root / "fixtures" / "generate.py"
        subprocess.run(
            [sys.executable, str(generator), "--size", args.size, str(trace)], check=True
        )
    trace.read_bytes()  # into the page cache
    env = {**os.environ, "PYTHONPATH": str(root)}
    runs = []
    for _ in range(args.runs):
        out = subprocess.run(
            [sys.executable, "-c", _WORKER, str(trace)], env=env, check=True, capture_output=True
        )
        runs.append(json.loads(out.stdout))
    took = statistics.median(r["s"] for r in runs)
    rss = max(r["rss"] for r in runs)
    print(
        f"{trace.name}: {runs[0]['gpu']:,} GPU rows; read {took:.3f} s median of {args.runs} "
        f"(min {min(r['s'] for r in runs):.3f}), peak RSS {rss / 1e6:.0f} MB"
    )


if __name__ == "__main__":
    main()

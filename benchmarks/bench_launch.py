"""Read-time cost of the launch configuration column (grid, block, registers, shared memory,
bytes): time to read a generated trace into columns, serially and with the default reader.

    python benchmarks/bench_launch.py [--size 200MB] [--runs 5] [--data-dir /tmp]
                                      [--serial] [--root OTHER_CHECKOUT ...]

Each run reads the same file (generated once, seed 0, from the page cache after one untimed
read) in a fresh process, without the cache, and prints the median wall and CPU time (user +
sys, the reading processes together) of ``collect_events`` and the peak RSS. ``--root`` runs
the same measurement with other checkouts' traceview (e.g. the commit before the launch
column), runs interleaved so that load from other processes hits every checkout alike.
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
import json, os, resource, sys, time
from pathlib import Path
from traceview.columns.parallel import collect_events
from traceview.read.reader import TraceReader
t, cpu = time.perf_counter(), os.times()
events = collect_events(TraceReader(Path(sys.argv[1])))
took, after = time.perf_counter() - t, os.times()
used = sum(after[:4]) - sum(cpu[:4])
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"s": took, "cpu": used, "rss": rss, "gpu": len(events.gpu.ts)}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="200MB")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp"))
    parser.add_argument("--serial", action="store_true", help="one reading process")
    parser.add_argument("--root", type=Path, action="append", default=[])
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    trace = args.data_dir / f"bench-launch-{args.size}.json"
    if not trace.exists():
        generator = here / "fixtures" / "generate.py"
        subprocess.run(
            [sys.executable, str(generator), "--size", args.size, str(trace)], check=True
        )
    trace.read_bytes()  # into the page cache
    roots = [here, *args.root]
    runs: dict[Path, list[dict[str, float]]] = {root: [] for root in roots}
    for _ in range(args.runs):
        for root in roots:
            env = {**os.environ, "PYTHONPATH": str(root)}
            if args.serial:
                env["TRACEVIEW_PARALLEL_MIN_BYTES"] = str(1 << 60)
            out = subprocess.run(
                [sys.executable, "-c", _WORKER, str(trace)], env=env, check=True,
                capture_output=True,
            )  # fmt: skip
            runs[root].append(json.loads(out.stdout))
    for root, done in runs.items():
        print(
            f"{root}: {trace.name}, {done[0]['gpu']:,} GPU rows; median of {args.runs}: wall "
            f"{statistics.median(r['s'] for r in done):.3f} s, CPU "
            f"{statistics.median(r['cpu'] for r in done):.3f} s; peak RSS "
            f"{max(r['rss'] for r in done) / 1e6:.0f} MB"
        )


if __name__ == "__main__":
    main()

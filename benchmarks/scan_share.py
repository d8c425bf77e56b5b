"""How much of a serial read is the compiled scanner's, and how much Python's?

Reads a trace as gaps (``cpu``) or summary (``frames``) read it, in one process, and prints
the read's CPU seconds (``time.process_time``) and those spent inside ``scan_chunk``.

    python benchmarks/scan_share.py benchmarks/data/h200-big.json --keep frames
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from traceview.columns.parallel import collect_events
from traceview.read import compiled
from traceview.read.reader import TraceReader


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--keep", choices=("gpu", "cpu", "frames"), default="cpu")
    args = parser.parse_args()
    os.environ["TRACEVIEW_PARALLEL_MIN_BYTES"] = str(1 << 62)  # serial
    core = compiled.scanner()
    spent = [0.0]

    class Timed:
        def __getattr__(self, key: str) -> Any:
            return getattr(core, key)

        def scan_chunk(self, *a: Any) -> Any:
            start = time.process_time()
            try:
                return core.scan_chunk(*a)
            finally:
                spent[0] += time.process_time() - start

    if core is not None:
        compiled.scanner = Timed  # type: ignore[assignment]
    start = time.process_time()
    collect_events(TraceReader(args.trace), args.keep != "gpu", keep_frames=args.keep == "frames")
    total = time.process_time() - start
    rest = total - spent[0]
    print(f"{args.keep}: read {total:.2f} CPU s, scan_chunk {spent[0]:.2f} s, rest {rest:.2f} s")


if __name__ == "__main__":
    main()

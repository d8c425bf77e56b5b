"""Inflate benchmark: how fast stdlib zlib, zlib-ng and python-isal decompress a gzip trace.

    python benchmarks/bench_inflate.py [FILE.json.gz] [--runs 5] [--chunk-mb 1]

Default FILE: benchmarks/data/trace-100MB.json.gz, made with gzip level 6 (the stdlib default)
from trace-100MB.json, which is generated first when missing (see bench_read.py). Each run
feeds the whole file, read into memory once, to a fresh decompressobj(wbits=31) 1 MB at a
time, as a streaming reader does; the output is counted and dropped. Multi-member files are
followed member by member. Reported: the median wall of --runs runs, and MB/s of output
(MB = 10**6 bytes of JSON). isal is optional: without it the row is skipped with a note.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import shutil
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

from bench_read import ROOT, ensure_trace, machine_info

DATA = ROOT / "benchmarks" / "data"
DEFAULT = DATA / "trace-100MB.json.gz"
LIBS = {"zlib (stdlib)": "zlib", "zlib-ng": "zlib_ng.zlib_ng", "isal": "isal.isal_zlib"}


def default_input() -> Path:
    """trace-100MB.json.gz at level 6, compressed from trace-100MB.json (generated if missing)."""
    if not DEFAULT.exists():
        plain = ensure_trace(DATA, "100MB", 100 * 10**6, "kineto", gz=False)
        tmp = DEFAULT.with_name(f".{DEFAULT.name}.tmp")
        print(f"compressing {plain} -> {DEFAULT} (level 6) ...", file=sys.stderr, flush=True)
        with open(plain, "rb") as src, gzip.GzipFile(tmp, "wb", compresslevel=6, mtime=0) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        tmp.replace(DEFAULT)
    return DEFAULT


def inflate(zlib: ModuleType, data: bytes, chunk: int) -> int:
    """Bytes of output from inflating gzip `data` fed `chunk` bytes at a time."""
    out = 0
    d = zlib.decompressobj(wbits=31)
    for i in range(0, len(data), chunk):
        piece = data[i : i + chunk]
        while piece:
            out += len(d.decompress(piece))
            piece = d.unused_data if d.eof else b""
            if d.eof:  # a new gzip member starts in this piece
                d = zlib.decompressobj(wbits=31)
    return out + len(d.flush())


def time_lib(zlib: ModuleType, data: bytes, chunk: int, runs: int) -> tuple[float, int]:
    """Median wall of `runs` inflates, and the output size."""
    walls, size = [], 0
    for _ in range(runs):
        t0 = time.perf_counter()
        size = inflate(zlib, data, chunk)
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), size


def load(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("file", nargs="?", type=Path, help=f"a .gz trace (default {DEFAULT})")
    p.add_argument("--runs", type=int, default=5, help="runs per library (median reported)")
    p.add_argument("--chunk-mb", type=float, default=1.0, help="bytes fed per call, MB (1)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    path = args.file or default_input()
    data = path.read_bytes()
    chunk = int(args.chunk_mb * 2**20)
    print("\n".join(machine_info()))
    print(f"input: {path} ({len(data) / 1e6:.1f} MB compressed); {args.runs} runs, median;")
    print(f"fed {chunk} bytes at a time to decompressobj(wbits=31); MB = 10**6 bytes of output")
    print()
    print(f"{'library':<14}  {'version':<10}  {'wall s':>7}  {'MB/s':>6}")
    notes = []
    for name, module in LIBS.items():
        zlib = load(module)
        if zlib is None:
            notes.append(f"{name}: not installed ({module}), skipped")
            continue
        version = getattr(zlib, "ZLIBNG_VERSION", None) or getattr(zlib, "ZLIB_VERSION", "")
        wall, size = time_lib(zlib, data, chunk, args.runs)
        print(f"{name:<14}  {version:<10}  {wall:7.3f}  {size / 1e6 / wall:6.0f}", flush=True)
    print("\n".join(["", *notes]) if notes else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())

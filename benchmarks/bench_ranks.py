"""Several ranks against one file of the same bytes: wall time, MB/s and peak RSS.

    python benchmarks/bench_ranks.py [--rank-size 1GB] [--ranks 8] [--tiny-size 4MB]
                                     [--tiny-ranks 256] [--runs 1] [--data-dir benchmarks/data]

Two runs are generated once in the data dir (fixtures/generate.py, seed 0): ``--ranks`` copies
of one trace of ``--rank-size`` (rank{i}.json, ranks told by file name) and ``--tiny-ranks``
copies of one trace of ``--tiny-size``; and for each, one trace of the same total bytes. Rows:
cold ``traceview ranks RUN`` and ``kernels RUN`` (--no-cache) against cold ``kernels FILE``;
the warm ``ranks RUN`` (cache filled by a first run). Each measurement is a subprocess; peak
RSS is the largest process (%M) and the peak of the summed RSS of the process tree (sampled,
see bench_read.py). The issue's targets (2-core machine, quiet): 8 × 1 GB ≥ 90% of the
one-file cold MB/s with a tree peak ≤ 600 MB; 256 × 4 MB ≤ 2× the one-file time; warm
``ranks`` on 8 × 1 GB ≤ 2 s.
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


bench_read = _load("bench_read", ROOT / "benchmarks" / "bench_read.py")
generate = _load("generate", ROOT / "fixtures" / "generate.py")


def make_run(data: Path, label: str, ranks: int, size: int) -> tuple[Path, Path, int]:
    """The run directory (``ranks`` copies of one trace) and one file of the same bytes."""
    run_dir = data / f"run-{ranks}x{label}"
    single = data / f"single-{ranks}x{label}.json"
    one = run_dir / "rank0.json"
    if not one.exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        generate.write_trace(one, size_bytes=size, seed=0)
    for r in range(1, ranks):
        copy = run_dir / f"rank{r}.json"
        if not copy.exists():
            copy_as_rank(one, copy, r)
    if not single.exists():
        generate.write_trace(single, size_bytes=size * ranks, seed=0)
    total = sum(p.stat().st_size for p in run_dir.glob("rank*.json"))
    return run_dir, single, total


def copy_as_rank(source: Path, target: Path, rank: int) -> None:
    """A copy of a trace whose header's ``distributedInfo.rank`` says ``rank``."""
    with source.open("rb") as src, target.open("wb") as dst:
        head = src.read(1 << 16)
        dst.write(head.replace(b'"rank": 0,', b'"rank": %d,' % rank, 1))
        shutil.copyfileobj(src, dst, 16 << 20)


def bench(label: str, run_dir: Path, single: Path, nbytes: int, runs: int) -> None:
    tv = [sys.executable, "-m", "traceview"]
    cold = ["-f", "json", "-q", "--no-cache"]
    for path in (run_dir, single):  # into the page cache, untimed
        for f in [path] if path.is_file() else sorted(path.glob("*.json")):
            f.read_bytes()
    rows = [
        ("kernels FILE (one file), cold", [*tv, "kernels", str(single), *cold]),
        ("kernels RUN, cold", [*tv, "kernels", str(run_dir), *cold]),
        ("ranks RUN, cold", [*tv, "ranks", str(run_dir), *cold]),
    ]
    with tempfile.TemporaryDirectory() as cache:
        warm = [*tv, "ranks", str(run_dir), "-f", "json", "-q", "--cache-dir", cache]
        bench_read.run_once(warm)  # fills the cache
        rows.append(("ranks RUN, warm", warm))
        for method, cmd in rows:
            bench_read.measure(label, "json", method, cmd, runs, nbytes)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rank-size", default="1GB")
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--tiny-size", default="4MB")
    p.add_argument("--tiny-ranks", type=int, default=256)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--data-dir", type=Path, default=ROOT / "benchmarks" / "data")
    args = p.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    for ranks, size in ((args.ranks, args.rank_size), (args.tiny_ranks, args.tiny_size)):
        run_dir, single, nbytes = make_run(args.data_dir, size, ranks, generate.parse_size(size))
        print(f"{ranks} ranks × {size}: {nbytes / 1e6:,.0f} MB", file=sys.stderr)
        bench(f"{ranks}x{size}", run_dir, single, nbytes, args.runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Read-throughput benchmark: traceview vs. a raw read and the naive json/ijson ways.

    python benchmarks/bench_read.py [--sizes 100MB 1GB] [--runs 3] [--data-dir benchmarks/data]
                                    [--gzip] [--baseline-runs N]

For each size a synthetic kineto trace is generated once (fixtures/generate.py, seed 0) and
cached in the data dir. Every measurement runs in its own subprocess so that peak RSS is that
run's own: via `/usr/bin/time -f "%e %M"` when available, else `os.wait4` on the child. Wall
time is taken with `time.perf_counter` around the child (finer than time's 10 ms `%e`), so it
includes interpreter start-up and imports. The page cache cannot be dropped without root, so
each file gets one untimed `cat FILE > /dev/null` first and every run reads from the cache.

Sizes use decimal units (1 MB = 10**6 bytes); MB/s is the uncompressed trace size / wall.
The script also runs its own workers: `bench_read.py --worker {raw,json,ijson} FILE`.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
BLOCK = 16 * 1024 * 1024
UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9}
TIME_BIN = "/usr/bin/time"


# ---------------------------------------------------------------- workers (run in children)


def _open(path: str) -> IO[bytes]:
    """The trace as a binary stream, decompressing .gz files."""
    if path.endswith(".gz"):
        return gzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


def _add_kernel(totals: dict[str, float], ev: Any) -> None:
    """The naive per-name sum: complete events whose category is kernel."""
    if ev.get("ph") == "X" and str(ev.get("cat", "")).lower() == "kernel":
        name = ev.get("name", "")
        totals[name] = totals.get(name, 0) + ev.get("dur", 0)


def _sum_kernels(events: Iterable[Any]) -> dict[str, float]:
    totals: dict[str, float] = {}
    for ev in events:
        _add_kernel(totals, ev)
    return totals


def worker_raw(path: str) -> dict[str, Any]:
    """Read the whole file in 16 MB blocks and do nothing with it."""
    n = 0
    with _open(path) as f:
        while block := f.read(BLOCK):
            n += len(block)
    return {"bytes": n}


def worker_json(path: str) -> dict[str, Any]:
    """json.load the whole document, then loop over traceEvents."""
    with _open(path) as f:
        doc = json.load(f)
    totals = _sum_kernels(doc.get("traceEvents", []))
    return {"names": len(totals), "total_dur": float(sum(totals.values()))}


def worker_ijson(path: str) -> dict[str, Any]:
    """ijson.items over traceEvents.item with the same loop."""
    import ijson  # type: ignore[import-untyped]

    with _open(path) as f:
        totals = _sum_kernels(ijson.items(f, "traceEvents.item"))
    total = float(sum(totals.values()))
    return {"names": len(totals), "total_dur": total, "backend": ijson.backend}


WORKERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "raw": worker_raw,
    "json": worker_json,
    "ijson": worker_ijson,
}


# ---------------------------------------------------------------- data


def parse_size(text: str) -> int:
    """'100MB' -> 100_000_000 (decimal units)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMG]?B)\s*", text.upper())
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}; use e.g. 100MB or 1GB")
    return int(float(m.group(1)) * UNITS[m.group(2)])


def load_generator() -> ModuleType:
    """Import fixtures/generate.py by path, as tests/test_fixtures_generator.py does."""
    name = "traceview_fixtures_generate"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, FIXTURES / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def ensure_trace(data_dir: Path, label: str, size: int, gz: bool) -> Path:
    """The cached trace for this size, generated (atomically) if missing."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"trace-{label}.json{'.gz' if gz else ''}"
    if path.exists():
        return path
    tmp = path.with_name(f".{path.name}.tmp{'.gz' if gz else ''}")
    t0 = time.perf_counter()
    print(f"generating {path} ...", file=sys.stderr, flush=True)
    load_generator().write_trace(tmp, size_bytes=size, seed=0, layout="kineto", ts_mode="int")
    os.replace(tmp, path)
    print(f"  done in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return path


def uncompressed_size(path: Path) -> int:
    """Bytes of JSON text (streams through gzip files once)."""
    if path.suffix != ".gz":
        return path.stat().st_size
    return worker_raw(str(path))["bytes"]


def warm_cache(path: Path) -> None:
    """One untimed `cat FILE > /dev/null` so that all runs read from the page cache."""
    subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)


# ---------------------------------------------------------------- measuring


@dataclass
class Run:
    wall_s: float
    rss_mb: float
    stdout: str


def _run_time_bin(cmd: list[str]) -> Run:
    """Run under /usr/bin/time; peak RSS from its %M (KiB)."""
    with (
        tempfile.NamedTemporaryFile("r", suffix=".time") as tf,
        tempfile.TemporaryFile("w+") as out,
    ):
        full = [TIME_BIN, "-f", "%e %M", "-o", tf.name, *cmd]
        t0 = time.perf_counter()
        proc = subprocess.run(full, stdout=out, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        fields = Path(tf.name).read_text().split()
        out.seek(0)
        return Run(wall, int(fields[-1]) / 1024, out.read())


def _run_wait4(cmd: list[str]) -> Run:
    """Run via Popen + os.wait4; peak RSS from the child's own ru_maxrss (KiB on Linux)."""
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd} failed ({proc.returncode})")
        out.seek(0)
        return Run(wall, usage.ru_maxrss / 1024, out.read())


def run_once(cmd: list[str]) -> Run:
    if os.access(TIME_BIN, os.X_OK):
        return _run_time_bin(cmd)
    return _run_wait4(cmd)


@dataclass
class Row:
    size_label: str
    method: str
    runs: int
    wall_s: float
    mb_s: float
    rss_mb: float
    note: str = ""


def measure(label: str, method: str, cmd: list[str], runs: int, nbytes: int) -> tuple[Row, str]:
    """Median wall and median peak RSS over `runs` subprocess runs; also the last stdout."""
    results = [run_once(cmd) for _ in range(runs)]
    wall = statistics.median(r.wall_s for r in results)
    rss = statistics.median(r.rss_mb for r in results)
    row = Row(label, method, runs, wall, nbytes / 1e6 / wall, rss)
    print(f"  {label:>6} {method:<18} {wall:8.2f} s  {rss:8.0f} MB", file=sys.stderr, flush=True)
    return row, results[-1].stdout


def have_ijson() -> bool:
    return importlib.util.find_spec("ijson") is not None


def commands(path: Path) -> dict[str, list[str]]:
    py, me, f = sys.executable, str(Path(__file__).resolve()), str(path)
    return {
        "raw read 16MB": [py, me, "--worker", "raw", f],
        "traceview kernels": [
            py,
            "-m",
            "traceview",
            "kernels",
            f,
            "-f",
            "json",
            "-q",
            "--no-cache",
        ],
        "traceview gaps": [py, "-m", "traceview", "gaps", f, "-f", "json", "-q", "--no-cache"],
        "traceview steps": [py, "-m", "traceview", "steps", f, "-f", "json", "-q", "--no-cache"],
        WARM: [py, "-m", "traceview", "kernels", f, "-f", "json", "-q"],
        "json.load + loop": [py, me, "--worker", "json", f],
        "ijson items + loop": [py, me, "--worker", "ijson", f],
    }


BASELINES = {"json.load + loop", "ijson items + loop"}
WARM = "traceview kernels, warm"  # answered from the Parquet cache filled by one untimed run


def bench_size(
    label: str, path: Path, runs: int, baseline_runs: int, notes: list[str]
) -> list[Row]:
    nbytes = uncompressed_size(path)
    warm_cache(path)
    rows: list[Row] = []
    outputs: dict[str, str] = {}
    for method, cmd in commands(path).items():
        if method == "ijson items + loop" and not have_ijson():
            notes.append(f"{label}: ijson not installed, ijson baseline skipped")
            continue
        n = baseline_runs if method in BASELINES else runs
        if method == WARM:
            run_once(cmd)  # fill the cache (a private TRACEVIEW_CACHE_DIR, see main)
        row, outputs[method] = measure(label, method, cmd, n, nbytes)
        rows.append(row)
    cross_check(label, outputs, notes)
    return rows


def cross_check(label: str, outputs: dict[str, str], notes: list[str]) -> None:
    """The baselines and traceview should agree on total kernel time (µs, ints here)."""
    try:
        tv = json.loads(outputs["traceview kernels"])["totals"]
    except (KeyError, ValueError):
        return
    tv_total = next((v for k, v in tv.items() if k.startswith("total")), None)
    for method in (m for m in commands(Path()) if m in BASELINES and m in outputs):
        got = json.loads(outputs[method])
        notes.append(
            f"{label}: {method}: {got['names']} kernel names, total dur {got['total_dur']:.0f} µs"
            f" (traceview totals: count {tv.get('count')}, {tv_total})"
        )


# ---------------------------------------------------------------- report


def machine_info() -> list[str]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    return [
        f"machine: nproc={usable}, CPU: {model}",
        f"python:  {platform.python_implementation()} {platform.python_version()}"
        f" ({sys.executable}), {platform.platform()}",
    ]


def format_table(rows: list[Row]) -> list[str]:
    header = ("size", "method", "runs", "wall s", "MB/s", "peak RSS MB")
    cells = [
        (r.size_label, r.method, str(r.runs), f"{r.wall_s:.2f}", f"{r.mb_s:.0f}", f"{r.rss_mb:.0f}")
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *cells, strict=True)]
    left = {0, 1}

    def line(vals: tuple[str, ...]) -> str:
        pairs = enumerate(zip(vals, widths, strict=True))
        return "  ".join(v.ljust(w) if i in left else v.rjust(w) for i, (v, w) in pairs)

    return [line(header), "  ".join("-" * w for w in widths), *(line(c) for c in cells)]


def ratio_lines(rows: list[Row]) -> list[str]:
    out = []
    for label in dict.fromkeys(r.size_label for r in rows):
        by = {r.method: r for r in rows if r.size_label == label}
        if "traceview kernels" in by and "json.load + loop" in by:
            ratio = by["traceview kernels"].mb_s / by["json.load + loop"].mb_s
            out.append(f"ratio {label}: traceview kernels MB/s / json.load MB/s = {ratio:.2f}x")
    return out


# ---------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--sizes", nargs="+", default=["100MB", "1GB"], help="e.g. 100MB 1GB")
    p.add_argument("--runs", type=int, default=3, help="runs per measurement (median reported)")
    p.add_argument(
        "--baseline-runs",
        type=int,
        default=None,
        help="runs for the json/ijson baselines (default: --runs)",
    )
    p.add_argument("--data-dir", type=Path, default=ROOT / "benchmarks" / "data")
    p.add_argument("--gzip", action="store_true", help="benchmark .json.gz traces instead")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # The warm-cache row must neither touch nor be helped by the user's cache.
    os.environ["TRACEVIEW_CACHE_DIR"] = tempfile.mkdtemp(prefix="traceview-bench-cache-")
    sizes = [(s.upper(), parse_size(s)) for s in args.sizes]
    baseline_runs = args.baseline_runs or args.runs
    how_rss = "/usr/bin/time %M" if os.access(TIME_BIN, os.X_OK) else "os.wait4 ru_maxrss"
    header = [
        *machine_info(),
        f"rss via: {how_rss}"
        "; wall via perf_counter around each subprocess (includes interpreter start-up)",
        "page cache: warm — one untimed `cat FILE > /dev/null` per file, all runs read from cache"
        " (dropping the cache needs root)",
        f"runs: {args.runs} (baselines: {baseline_runs}), median wall and median peak RSS;"
        " MB = 10**6 bytes of uncompressed JSON",
    ]
    print("\n".join(header), flush=True)
    rows: list[Row] = []
    notes: list[str] = []
    for label, size in sizes:
        path = ensure_trace(args.data_dir, label, size, args.gzip)
        print(f"{label}: {path} ({path.stat().st_size / 1e6:.1f} MB on disk)", flush=True)
        rows += bench_size(label, path, args.runs, baseline_runs, notes)
    print()
    print("\n".join(format_table(rows)))
    print()
    print("\n".join(notes))
    print("\n".join(ratio_lines(rows)), flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        print(json.dumps(WORKERS[sys.argv[2]](sys.argv[3])))
        sys.exit(0)
    sys.exit(main())

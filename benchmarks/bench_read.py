"""Read-throughput benchmark: traceview vs. a raw read and the naive json/ijson ways.

    python benchmarks/bench_read.py [--sizes 100MB 1GB] [--runs 3] [--data-dir benchmarks/data]
                                    [--layout kineto|lines] [--gzip | --both]
                                    [--baseline-runs N] [--baseline-max-size 1GB]

For each size a synthetic trace is generated once (fixtures/generate.py, seed 0) and cached in
the data dir: trace-1GB.json(.gz) in kineto's multi-line layout, trace-1GB-lines.json(.gz) with
one event per line. `--both` measures the plain and the gzip file of each size side by side.

Every measurement runs in its own subprocess. Peak RSS is reported twice: `/usr/bin/time`'s %M
(else `os.wait4`'s ru_maxrss), the largest single process of the tree; and the peak of the SUM
of VmRSS over the process tree, sampled from /proc every ~5 ms, which is what traceview's two
reading processes hold together (pages shared after fork count twice, so an upper bound; a
peak shorter than the period can be missed). `Run.tree_pss_mb` is what the tree holds: the
peak of its processes' summed PSS (/proc/PID/smaps_rollup: a page shared by n processes
counts 1/n to each), sampled every ~50 ms while there are two processes or more (~0.4 ms a
read of a 500 MB process), the single process's VmRSS otherwise. The tree is found by a scan
of /proc/*/stat every ~200 ms (/proc/<pid>/task/*/children needs CONFIG_PROC_CHILDREN). Wall
time is `time.perf_counter` around the child, so it includes interpreter start-up and imports. On
Linux this script is the child subreaper: what a command leaves running as it ends (its cache
writer, which it waits for until that says it is done, not until it exits) is waited for after
the wall time is taken, and its CPU and peak RSS are counted.
The page cache cannot be dropped without root, so each file gets one untimed
`cat FILE > /dev/null` first and every run reads from the cache.

Sizes use decimal units (1 MB = 10**6 bytes); MB/s is the uncompressed trace size / wall.
For .gz files the raw read inflates with zlib-ng, as traceview does; the json.load and ijson
baselines use the stdlib gzip module, as naive code would.
The json.load, ijson and HTA baselines are skipped above --baseline-max-size (json.load needs
~5 GB of RAM per GB of trace); HTA is measured only when `hta` is importable.
The cache rows use a private cache dir: "kernels, fill" is a first run with the cache on
(`--refresh`: hash the file, read it with the CPU rows, write the entry), the warm rows answer
from that entry; the note after the table gives the entry's size.
The script also runs its own workers: `bench_read.py --worker {raw,json,ijson,hta} FILE`.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
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
SAMPLE_S = 0.005  # VmRSS sampling period
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
RESCAN_EVERY = 40  # samples between two scans of /proc for the tree's processes (~200 ms)
PSS_EVERY = 10  # samples between two readings of PSS while the tree has two processes or more


# ---------------------------------------------------------------- workers (run in children)


def _open(path: str, fast_gzip: bool = False) -> IO[bytes]:
    """The trace as a binary stream; .gz files through stdlib gzip, or zlib-ng's if fast_gzip."""
    if not path.endswith(".gz"):
        return open(path, "rb")
    if fast_gzip:
        from zlib_ng import gzip_ng  # type: ignore[import-untyped]

        return gzip_ng.open(path, "rb")  # type: ignore[no-any-return]
    return gzip.open(path, "rb")  # type: ignore[return-value]


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
    """Read the whole file in 16 MB blocks and do nothing with it (gzip: zlib-ng, as traceview)."""
    n = 0
    with _open(path, fast_gzip=True) as f:
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


def worker_hta(path: str) -> dict[str, Any]:
    """HolisticTraceAnalysis: load the trace (alone in a directory) and its kernel breakdown."""
    from hta.trace_analysis import TraceAnalysis  # type: ignore[import-not-found]

    with tempfile.TemporaryDirectory(prefix="traceview-bench-hta-") as d:
        os.symlink(os.path.abspath(path), os.path.join(d, os.path.basename(path)))
        analyzer = TraceAnalysis(trace_dir=d)
        _, kernels = analyzer.get_gpu_kernel_breakdown(visualize=False)
    return {"kernel_rows": len(kernels)}


WORKERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "raw": worker_raw,
    "json": worker_json,
    "ijson": worker_ijson,
    "hta": worker_hta,
}


# ---------------------------------------------------------------- data


def parse_size(text: str) -> int:
    """'100MB' -> 100_000_000 (decimal units)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMG]?B)\s*", text.upper())
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}; use e.g. 100MB or 1GB")
    return int(float(m.group(1)) * UNITS[m.group(2)])


def load_generator() -> ModuleType:
    """Import fixtures/generate.py by path, as tests/cli/test_fixtures_generator.py does."""
    name = "traceview_fixtures_generate"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, FIXTURES / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def trace_path(data_dir: Path, label: str, layout: str, gz: bool) -> Path:
    """trace-1GB.json(.gz) for kineto (the historical names), trace-1GB-<layout>.json otherwise."""
    stem = f"trace-{label}" if layout == "kineto" else f"trace-{label}-{layout}"
    return data_dir / f"{stem}.json{'.gz' if gz else ''}"


def ensure_trace(data_dir: Path, label: str, size: int, layout: str, gz: bool) -> Path:
    """The cached trace for this size and layout, generated (atomically) if missing."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = trace_path(data_dir, label, layout, gz)
    if path.exists():
        return path
    tmp = path.with_name(f".{path.name}.tmp{'.gz' if gz else ''}")
    t0 = time.perf_counter()
    print(f"generating {path} ...", file=sys.stderr, flush=True)
    load_generator().write_trace(tmp, size_bytes=size, seed=0, layout=layout, ts_mode="int")
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


# ---------------------------------------------------------------- process-tree RSS


def _ppid_map() -> dict[int, list[int]]:
    """Parent pid -> child pids, from /proc/*/stat (works without CONFIG_PROC_CHILDREN)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])  # the name may hold spaces
        except (OSError, ValueError, IndexError):
            continue  # the process vanished
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def tree_pids(root: int) -> list[int]:
    """root and all its descendants."""
    children = _ppid_map()
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo += children.get(pid, [])
    return pids


def rss_kib(pid: int) -> int:
    """Resident set size of pid in KiB (VmRSS, read from the cheaper statm); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE_KIB
    except (OSError, ValueError, IndexError):
        return 0


def pss_kib(pid: int) -> int:
    """Proportional set size of pid in KiB (/proc/PID/smaps_rollup); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


class TreeRss(threading.Thread):
    """Peak of the summed RSS of a process tree, sampled every SAMPLE_S in a thread, and of
    its summed PSS (every PSS_EVERY samples while it has two processes or more; its one
    process's RSS otherwise).

    The tree is rescanned every RESCAN_EVERY samples; `skip` is a pid left out of the sum
    (the /usr/bin/time wrapper, so that the column compares with its %M)."""

    def __init__(self, root: int, skip: int | None = None) -> None:
        super().__init__(daemon=True)
        self.root, self.skip, self.peak_kib, self.peak_pss_kib = root, skip, 0, 0
        self.running = True

    def run(self) -> None:
        pids: list[int] = []
        n = 0
        while self.running:
            if not pids or n % RESCAN_EVERY == 0:  # also until the wrapped command started
                pids = [p for p in tree_pids(self.root) if p != self.skip]
            rss = sum(rss_kib(p) for p in pids)
            self.peak_kib = max(self.peak_kib, rss)
            if len(pids) < 2:
                self.peak_pss_kib = max(self.peak_pss_kib, rss)
            elif n % PSS_EVERY == 0:
                self.peak_pss_kib = max(self.peak_pss_kib, sum(pss_kib(p) for p in pids))
            n += 1
            time.sleep(SAMPLE_S)

    def stop(self) -> float:
        """Stop sampling; the peak in MB (MiB, like %M)."""
        self.running = False
        self.join()
        return self.peak_kib / 1024

    @property
    def pss_mb(self) -> float:
        """The peak of the summed PSS, in MB (MiB)."""
        return self.peak_pss_kib / 1024


# ---------------------------------------------------------------- measuring


@dataclass
class Run:
    wall_s: float
    rss_mb: float
    tree_rss_mb: float
    stdout: str
    cpu_s: float = 0.0  # user + system, of the process and the children it waited for
    tree_pss_mb: float = 0.0  # the peak of the tree's summed PSS (TreeRss)


def _become_subreaper() -> bool:
    """Linux: the processes a measured command leaves running when it ends (traceview's cache
    writer: the command waits until it says it is done, not for its exit) become this
    process's children then, so that run_once waits for them and counts their CPU and RSS."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


SUBREAPER = _become_subreaper()


def run_once(cmd: list[str]) -> Run:
    """Run cmd in a subprocess: wall, peak RSS (%M or ru_maxrss) and sampled tree RSS. What
    the command left running is waited for after the wall time is taken; its CPU is added,
    and its peak RSS counts for the largest process (SUBREAPER)."""
    timed = os.access(TIME_BIN, os.X_OK)
    with (
        tempfile.NamedTemporaryFile("r", suffix=".time") as tf,
        tempfile.TemporaryFile("w+") as out,
        tempfile.TemporaryFile("w+") as err,
    ):
        full = [TIME_BIN, "-f", "%e %M", "-o", tf.name, *cmd] if timed else cmd
        t0 = time.perf_counter()
        proc = subprocess.Popen(full, stdout=out, stderr=err)
        sampler = TreeRss(proc.pid, skip=proc.pid if timed else None)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        left_cpu, left_kib = 0.0, 0
        while SUBREAPER:  # what it left running, reparented here
            try:
                _, _, left = os.wait4(-1, 0)
            except ChildProcessError:
                break
            left_cpu += left.ru_utime + left.ru_stime
            left_kib = max(left_kib, left.ru_maxrss)
        tree_mb = sampler.stop()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{cmd} failed ({proc.returncode}): {err.read()[-2000:]}")
        rss_kib = int(Path(tf.name).read_text().split()[-1]) if timed else usage.ru_maxrss
        rss_kib = max(rss_kib, left_kib)
        out.seek(0)
        cpu = usage.ru_utime + usage.ru_stime + left_cpu
        return Run(wall, rss_kib / 1024, tree_mb, out.read(), cpu, sampler.pss_mb)


@dataclass
class Row:
    size_label: str
    kind: str  # "json" or "json.gz"
    method: str
    runs: int
    wall_s: float
    mb_s: float
    rss_mb: float
    tree_rss_mb: float


def measure(
    label: str, kind: str, method: str, cmd: list[str], runs: int, nbytes: int
) -> tuple[Row, str]:
    """Medians of wall, peak RSS and tree RSS over `runs` subprocess runs; also the last stdout."""
    results = [run_once(cmd) for _ in range(runs)]
    wall = statistics.median(r.wall_s for r in results)
    rss = statistics.median(r.rss_mb for r in results)
    tree = statistics.median(r.tree_rss_mb for r in results)
    row = Row(label, kind, method, runs, wall, nbytes / 1e6 / wall, rss, tree)
    print(
        f"  {label:>6} {kind:<7} {method:<24} {wall:8.2f} s  {rss:6.0f} MB  tree {tree:6.0f} MB",
        file=sys.stderr,
        flush=True,
    )
    return row, results[-1].stdout


def have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def commands(path: Path) -> dict[str, list[str]]:
    py, me, f = sys.executable, str(Path(__file__).resolve()), str(path)
    tv = [py, "-m", "traceview"]
    cold = ["-f", "json", "-q", "--no-cache"]
    return {
        "raw read 16MB": [py, me, "--worker", "raw", f],
        "traceview kernels": [*tv, "kernels", f, *cold],
        "traceview gaps": [*tv, "gaps", f, *cold],
        "traceview steps": [*tv, "steps", f, *cold],
        "traceview ops": [*tv, "ops", f, *cold],  # issue 16: within 1.5x of gaps
        FILL: [*tv, "kernels", f, "-f", "json", "-q", "--refresh"],
        WARM: [*tv, "kernels", f, "-f", "json", "-q"],
        WARM_GAPS: [*tv, "gaps", f, "-f", "json", "-q"],
        JSON: [py, me, "--worker", "json", f],
        IJSON: [py, me, "--worker", "ijson", f],
        HTA: [py, me, "--worker", "hta", f],
    }


JSON, IJSON, HTA = "json.load + loop", "ijson items + loop", "HTA kernel breakdown"
BASELINES = {JSON, IJSON, HTA}
# The cache rows use a private TRACEVIEW_CACHE_DIR (see main). FILL is a first run with the
# cache on (--refresh: hash, read with CPU rows, write the entry); the warm rows answer from it.
FILL = "traceview kernels, fill"
WARM = "traceview kernels, warm"
WARM_GAPS = "traceview gaps, warm"


def skipped(method: str, baselines: bool) -> bool:
    """Whether to leave this method out (too big for the baselines, module not installed)."""
    if method in BASELINES and not baselines:
        return True
    return (method == IJSON and not have("ijson")) or (method == HTA and not have("hta"))


def bench_file(
    label: str, path: Path, runs: int, baseline_runs: int, baselines: bool, notes: list[str]
) -> list[Row]:
    kind = "json.gz" if path.suffix == ".gz" else "json"
    nbytes = uncompressed_size(path)
    warm_cache(path)
    rows: list[Row] = []
    outputs: dict[str, str] = {}
    for method, cmd in commands(path).items():
        if skipped(method, baselines):
            continue
        if method == FILL:  # the entry of this file only, for its size below
            shutil.rmtree(Path(os.environ["TRACEVIEW_CACHE_DIR"]) / "entries", ignore_errors=True)
        n = baseline_runs if method in BASELINES else runs
        try:
            row, outputs[method] = measure(label, kind, method, cmd, n, nbytes)
        except RuntimeError as e:
            if method != HTA:
                raise
            notes.append(f"{label} {kind}: HTA failed: {str(e).strip().splitlines()[-1]}")
            continue
        rows.append(row)
        if method == FILL:
            notes.append(
                f"{label} {kind}: cache entry {_cache_mb():.1f} MB for {nbytes / 1e6:.0f} MB"
            )
    cross_check(f"{label} {kind}", outputs, notes)
    return rows


def _cache_mb() -> float:
    """Size of the entries in the private cache dir (emptied before each file's first run)."""
    entries = Path(os.environ["TRACEVIEW_CACHE_DIR"]) / "entries"
    return sum(p.stat().st_size for p in entries.rglob("*") if p.is_file()) / 1e6


def cross_check(where: str, outputs: dict[str, str], notes: list[str]) -> None:
    """The baselines and traceview should agree on total kernel time (µs, ints here)."""
    try:
        tv = json.loads(outputs["traceview kernels"])["totals"]
    except (KeyError, ValueError):
        return
    tv_total = next((v for k, v in tv.items() if k.startswith("total")), None)
    for method in (m for m in (JSON, IJSON) if m in outputs):
        got = json.loads(outputs[method])
        notes.append(
            f"{where}: {method}: {got['names']} kernel names, total dur {got['total_dur']:.0f} µs"
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


def format_table(rows: list[Row], rss_name: str) -> list[str]:
    header = (
        "size",
        "input",
        "method",
        "runs",
        "wall s",
        "MB/s",
        rss_name,
        "tree RSS MB (sampled)",
    )
    cells = [
        (
            r.size_label,
            r.kind,
            r.method,
            str(r.runs),
            f"{r.wall_s:.2f}",
            f"{r.mb_s:.0f}",
            f"{r.rss_mb:.0f}",
            f"{r.tree_rss_mb:.0f}",
        )
        for r in rows
    ]
    widths = [max(len(x) for x in col) for col in zip(header, *cells, strict=True)]
    left = {0, 1, 2}

    def line(vals: tuple[str, ...]) -> str:
        pairs = enumerate(zip(vals, widths, strict=True))
        return "  ".join(v.ljust(w) if i in left else v.rjust(w) for i, (v, w) in pairs)

    return [line(header), "  ".join("-" * w for w in widths), *(line(c) for c in cells)]


def ratio_lines(rows: list[Row]) -> list[str]:
    out = []
    by = {(r.size_label, r.kind, r.method): r for r in rows}
    for label, kind in dict.fromkeys((r.size_label, r.kind) for r in rows):
        tv, base = by.get((label, kind, "traceview kernels")), by.get((label, kind, JSON))
        if tv and base:
            ratio = tv.mb_s / base.mb_s
            out.append(
                f"ratio {label} {kind}: traceview kernels MB/s / json.load MB/s = {ratio:.2f}x"
            )
    for label, kind in dict.fromkeys((r.size_label, r.kind) for r in rows):
        cold, fill = by.get((label, kind, "traceview kernels")), by.get((label, kind, FILL))
        warm, gaps = by.get((label, kind, WARM)), by.get((label, kind, "traceview gaps"))
        warm_gaps = by.get((label, kind, WARM_GAPS))
        if cold and fill and warm:
            out.append(
                f"cache {label} {kind}: first run with the cache {fill.wall_s / cold.wall_s:.2f}x"
                f" the --no-cache kernels run; warm kernels {cold.wall_s / warm.wall_s:.1f}x"
                f" faster than --no-cache, {fill.wall_s / warm.wall_s:.1f}x than the first run"
            )
        if gaps and warm_gaps:
            out.append(
                f"cache {label} {kind}: warm gaps {gaps.wall_s / warm_gaps.wall_s:.1f}x faster"
                " than --no-cache"
            )
        ops = by.get((label, kind, "traceview ops"))
        if gaps and ops:
            out.append(
                f"ops {label} {kind}: {ops.wall_s / gaps.wall_s:.2f}x the wall time of gaps"
                f" (target <= 1.5), peak RSS {ops.rss_mb:.0f} vs {gaps.rss_mb:.0f} MB"
            )
    for label in dict.fromkeys(r.size_label for r in rows):
        parts = []
        for method in ("traceview kernels", "traceview gaps"):
            gz, plain = by.get((label, "json.gz", method)), by.get((label, "json", method))
            if gz and plain:
                parts.append(f"{method.split()[-1]} {gz.mb_s / plain.mb_s:.2f}")
        if parts:
            out.append(f"gzip/plain throughput {label}: {', '.join(parts)} (target >= 0.80)")
    return out


# ---------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--sizes", nargs="+", default=["100MB", "1GB"], help="e.g. 100MB 1GB 4GB")
    p.add_argument("--runs", type=int, default=3, help="runs per measurement (median reported)")
    p.add_argument(
        "--baseline-runs",
        type=int,
        default=None,
        help="runs for the json/ijson/HTA baselines (default: --runs)",
    )
    p.add_argument(
        "--baseline-max-size",
        type=parse_size,
        default="1GB",
        help="skip the json/ijson/HTA baselines above this trace size (default 1GB)",
    )
    p.add_argument("--data-dir", type=Path, default=ROOT / "benchmarks" / "data")
    p.add_argument(
        "--layout",
        choices=("kineto", "lines"),
        default="kineto",
        help="kineto's multi-line events or one event per line (default kineto)",
    )
    kinds = p.add_mutually_exclusive_group()
    kinds.add_argument("--gzip", action="store_true", help="benchmark .json.gz traces instead")
    kinds.add_argument("--both", action="store_true", help="benchmark .json and .json.gz")
    return p.parse_args(argv)


def header_lines(args: argparse.Namespace, rss_via: str) -> list[str]:
    return [
        *machine_info(),
        f"layout: {args.layout}; rss via: {rss_via} (largest single process), and the peak of"
        f" the summed VmRSS of the process tree sampled every {SAMPLE_S * 1000:.0f} ms"
        " (pages shared after fork count twice: an upper bound)",
        "wall via perf_counter around each subprocess (includes interpreter start-up)",
        "page cache: warm — one untimed `cat FILE > /dev/null` per file, all runs read from cache"
        " (dropping the cache needs root)",
        f"runs: {args.runs} (baselines: {args.baseline_runs}), medians of wall and RSS;"
        " MB/s = 10**6 bytes of uncompressed JSON per s",
    ]


def bench_size(text: str, args: argparse.Namespace, notes: list[str]) -> list[Row]:
    """All rows of one size: its plain and/or gzip file, side by side."""
    label, size = text.upper(), parse_size(text)
    baselines = size <= args.baseline_max_size
    if not baselines:
        limit = f"{args.baseline_max_size / 1e6:g} MB"
        notes.append(
            f"{label}: json.load/ijson/HTA baselines skipped (--baseline-max-size {limit})"
        )
    rows: list[Row] = []
    for gz in [False, True] if args.both else [args.gzip]:
        path = ensure_trace(args.data_dir, label, size, args.layout, gz)
        print(f"{label}: {path} ({path.stat().st_size / 1e6:.1f} MB on disk)", flush=True)
        rows += bench_file(label, path, args.runs, args.baseline_runs, baselines, notes)
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.baseline_runs = args.baseline_runs or args.runs
    # The warm-cache row must neither touch nor be helped by the user's cache.
    os.environ["TRACEVIEW_CACHE_DIR"] = tempfile.mkdtemp(prefix="traceview-bench-cache-")
    # Start-up as for an installed package (pip writes .pyc files): with
    # PYTHONDONTWRITEBYTECODE set, an editable install would recompile every module per run.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "traceview")], check=True)
    rss_via = "/usr/bin/time %M" if os.access(TIME_BIN, os.X_OK) else "os.wait4 ru_maxrss"
    print("\n".join(header_lines(args, rss_via)), flush=True)
    notes: list[str] = []
    if not have("ijson"):
        notes.append("ijson not installed: ijson baseline skipped")
    if not have("hta"):
        notes.append("hta (HolisticTraceAnalysis) not importable: HTA baseline skipped")
    rows = [row for text in args.sizes for row in bench_size(text, args, notes)]
    print()
    print("\n".join(format_table(rows, f"peak RSS MB ({rss_via.split()[-1]})")))
    print()
    print("\n".join(notes))
    print("\n".join(ratio_lines(rows)), flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        print(json.dumps(WORKERS[sys.argv[2]](sys.argv[3])))
        sys.exit(0)
    sys.exit(main())

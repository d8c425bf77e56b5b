"""Peak RSS against trace size (issue #43: each command ≤ 256 MB, flat from 0.5 to 8 GB; the
first run that fills the cache ≤ 1.25× a ``--no-cache`` run).

    python benchmarks/bench_memory.py [--sizes 0.5GB 1GB 2GB 4GB 8GB]
        [--commands kernels gaps summary steps trim] [--fill kernels gaps] [--warm ...] [--runs 1]
        [--pstep 60] [--source ../shared/traces/h200/big.json.gz] [--data-dir benchmarks/data]
        [--keep]

Each size is a synthetic trace made of the H200 big trace's events (519 MB) repeated, written
streamed, a copy at a time, to ``--data-dir`` (deleted after its measurements unless
``--keep``; a size the free disk cannot hold is skipped, said why). Each copy after the first
has its timestamps shifted past the end of the one before, and its correlation and flow ids
past the largest of the source, and its ProfilerStep numbers on from the last, so that the copies
follow each other as in one long profile (each launch finds its own kernel; ``trim --pstep
N`` keeps one step).

Every command runs ``--no-cache -f json -q`` in its own process (``trim``: ``trim --pstep N -o
FILE``; ``report``: ``report -o FILE``): median wall (start-up included), MB/s, CPU s (user +
system, the two-process read's worker included), peak RSS of the largest process (/usr/bin/time
%M, and the children it left to end after it: bench_read.run_once; MiB) and the sampled peak of
the process tree's summed RSS (pages a fork shares count twice), and of its summed PSS (what
the tree holds, bench_read.TreeRss; "PSS MB"): the verdict is the larger of RSS and PSS.
``--fill`` commands also run once with an emptied private cache, the first run that fills
it, against their ``--no-cache`` run; ``--warm`` commands run again from the cache their
first run filled (peak RSS of a warm run).
"""

from __future__ import annotations

import argparse
import gzip
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_read import Run, parse_size, run_once
from repeat_trace import _START, _array_end

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT.parent / "shared" / "traces" / "h200" / "big.json.gz"
TRACEVIEW = str(Path(sys.executable).parent / "traceview")
LIMIT_MB = 256
# The integers a copy shifts: timestamps (their µs integer part) and the ids linking a launch
# to its kernel (args correlation, the ac2g flows' id, External id).
_SHIFTED = re.compile(rb'"(ts|correlation|id|External id)": (-?[0-9]+)')
_STEP = re.compile(rb"ProfilerStep#([0-9]+)")


class Source:
    """The source trace split into header, event array body and trailer, with the shifts that
    put a copy after the one before."""

    def __init__(self, path: Path) -> None:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as f:
            text = f.read()
        start = _START.search(text)
        if start is None:
            sys.exit(f"{path}: no traceEvents array")
        end = text.rindex(b"]", start.end(), _array_end(text, start.end()) + 1)
        self.head, self.tail = text[: start.end()] + b"\n", b"\n" + text[end:]
        self.body = text[start.end() : end].strip()
        del text
        ts, ids = [], []
        for m in _SHIFTED.finditer(self.body):
            (ts if m[1] == b"ts" else ids).append(int(m[2]))
        self.ts_step = max(ts) - min(ts) + 1_000  # µs: a ms between copies
        self.id_step = max(ids) + 1
        steps = [int(m[1]) for m in _STEP.finditer(self.body)] or [0]
        self.step_step = max(steps) - min(steps) + 1  # no hole in the numbering between copies

    def copy(self, k: int) -> bytes:
        if k == 0:
            return self.body
        shift = {b"ts": k * self.ts_step}
        ids = k * self.id_step

        def shifted(m: re.Match[bytes]) -> bytes:
            by = shift.get(m[1], ids)
            return b'"%s": %d' % (m[1], int(m[2]) + by)

        steps = k * self.step_step
        body = _STEP.sub(lambda m: b"ProfilerStep#%d" % (int(m[1]) + steps), self.body)
        return _SHIFTED.sub(shifted, body)

    def write(self, out: Path, copies: int) -> int:
        """Write ``copies`` copies to ``out``; its size in bytes."""
        with open(out, "wb") as f:
            f.write(self.head)
            for k in range(copies):
                f.write(self.copy(k) if k == 0 else b",\n" + self.copy(k))
            f.write(self.tail)
        return out.stat().st_size


def command(name: str, trace: Path, pstep: str, trim_out: Path, cache: bool) -> list[str]:
    tail = [] if cache else ["--no-cache"]
    if name == "trim":
        return [TRACEVIEW, "trim", str(trace), "--pstep", pstep, "-o", str(trim_out), "--force",
                "-q", *tail]  # fmt: skip
    if name == "report":  # its page written where trim's output goes (deleted after each run)
        return [TRACEVIEW, "report", str(trace), "-o", str(trim_out), "--force", "-q", *tail]
    return [TRACEVIEW, name, str(trace), "-f", "json", "-q", *tail]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--sizes", nargs="+", type=parse_size, default=[parse_size("0.5GB"),
                   parse_size("1GB"), parse_size("2GB")])  # fmt: skip
    p.add_argument("--commands", nargs="+", default=["kernels", "gaps", "summary", "steps", "trim"])
    p.add_argument(
        "--fill", nargs="*", default=["kernels", "gaps"], help="commands timed filling the cache"
    )
    p.add_argument(
        "--warm", nargs="*", default=[], help="commands also run from the cache they filled"
    )
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--pstep", default="60")
    p.add_argument("--source", type=Path, default=SOURCE)
    p.add_argument("--data-dir", type=Path, default=ROOT / "benchmarks" / "data")
    p.add_argument("--keep", action="store_true", help="keep the synthetic traces")
    args = p.parse_args(argv)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    source = Source(args.source)
    print(f"source: {args.source} ({len(source.body) / 1e6:.0f} MB of events)", file=sys.stderr)
    trim_out = args.data_dir / "bench-memory-trim.json"
    rows: list[tuple[str, int, str, list[Run]]] = []
    fills: list[str] = []
    for size in args.sizes:
        copies = max(1, round(size / len(source.body)))
        trace = args.data_dir / f"bench-memory-{copies}x.json"
        need = copies * len(source.body) * 1.05 + (1 << 30)  # and room for the cache and trim
        if not trace.exists() and shutil.disk_usage(args.data_dir).free < need:
            print(f"{size / 1e9:g} GB: skipped, {need / 1e9:.1f} GB free needed", file=sys.stderr)
            continue
        nbytes = trace.stat().st_size if trace.exists() else source.write(trace, copies)
        try:
            _measure(trace, nbytes, args, trim_out, rows, fills)
        finally:
            if not args.keep:
                trace.unlink(missing_ok=True)
    print(_table(rows))
    print("\n".join(fills))
    return 0


def _measure(
    trace: Path,
    nbytes: int,
    args: argparse.Namespace,
    trim_out: Path,
    rows: list[tuple[str, int, str, list[Run]]],
    fills: list[str],
) -> None:
    """Each command on one synthetic trace (rows), and the first runs that fill the cache
    (fills)."""
    label = f"{nbytes / 1e9:.2f} GB"
    for name in args.commands:
        runs = []
        try:
            for _ in range(args.runs):
                runs.append(run_once(command(name, trace, args.pstep, trim_out, False)))
                trim_out.unlink(missing_ok=True)
                print(f"  {label} {name:<8} {runs[-1].wall_s:7.2f} s", file=sys.stderr)
        except RuntimeError as e:  # a command that fails: said, and the next one runs
            print(f"  {label} {name}: {e}", file=sys.stderr)
            runs = []
        rows.append((label, nbytes, name, runs))
        if (name not in args.fill and name not in args.warm) or not runs:
            continue
        with tempfile.TemporaryDirectory(dir=args.data_dir) as cache:
            cmd = ["env", f"TRACEVIEW_CACHE_DIR={cache}",
                   *command(name, trace, args.pstep, trim_out, True)]  # fmt: skip
            fill = run_once(cmd)
            trim_out.unlink(missing_ok=True)
            warm = run_once(cmd) if name in args.warm else None
            trim_out.unlink(missing_ok=True)
        cold = statistics.median(r.wall_s for r in runs)
        if name in args.fill:
            fills.append(
                f"{label} {name}: first run with the cache {fill.wall_s:.2f} s = "
                f"{fill.wall_s / cold:.2f}x --no-cache {cold:.2f} s "
                f"(peak RSS {fill.rss_mb:.0f} MB, tree {fill.tree_rss_mb:.0f} MB, "
                f"PSS {fill.tree_pss_mb:.0f} MB)"
            )
            print(f"  {fills[-1]}", file=sys.stderr)
        if warm is not None:
            fills.append(
                f"{label} {name}: a run from the cache {warm.wall_s:.2f} s "
                f"(peak RSS {warm.rss_mb:.0f} MB, tree {warm.tree_rss_mb:.0f} MB, "
                f"PSS {warm.tree_pss_mb:.0f} MB)"
            )
            print(f"  {fills[-1]}", file=sys.stderr)


def _table(rows: list[tuple[str, int, str, list[Run]]]) -> str:
    head = (f"{'size':>8} {'command':<8} {'wall s':>7} {'MB/s':>6} {'CPU s':>6} {'RSS MB':>7} "
            f"{'tree MB':>7} {'PSS MB':>7}  ≤ {LIMIT_MB} MB")  # fmt: skip
    lines = [head, "-" * len(head)]
    for label, nbytes, name, runs in rows:
        if not runs:
            lines.append(f"{label:>8} {name:<8} failed (its error above)")
            continue
        wall = statistics.median(r.wall_s for r in runs)
        cpu = statistics.median(r.cpu_s for r in runs)
        rss = statistics.median(r.rss_mb for r in runs)
        tree = statistics.median(r.tree_rss_mb for r in runs)
        pss = statistics.median(r.tree_pss_mb for r in runs)
        mb_s = nbytes / 1e6 / wall
        ok = "yes" if max(rss, pss) <= LIMIT_MB else "NO"
        lines.append(
            f"{label:>8} {name:<8} {wall:7.2f} {mb_s:6.0f} {cpu:6.2f} {rss:7.0f} {tree:7.0f} "
            f"{pss:7.0f}  {ok}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

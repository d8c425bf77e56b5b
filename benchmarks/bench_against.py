"""This checkout against another revision, side by side: MB/s, peak RSS and their ratio.

    python benchmarks/bench_against.py --against REV [TRACE ...]
        [--commands kernels gaps summary steps trim] [--runs 3] [--pstep 60] [--fill]
        [--fill-from CACHE_DIR] [--scratch DIR]
    python benchmarks/bench_against.py --against-dir CHECKOUT [TRACE ...]

``--against REV`` checks REV out into a scratch git worktree (``--scratch``, default
$TMPDIR/traceview-against/<sha>) with its own virtual environment (``pip install -e``), kept
for the next call; ``--against-dir`` uses a checkout that already has its ``.venv``. Each
command runs ``--no-cache -f json -q`` on each trace, this checkout and the other alternately
(``--runs`` times each), so that load on a shared machine falls on both alike; the table gives
medians of wall time (perf_counter around the subprocess: start-up included), MB/s of
uncompressed JSON (10^6 bytes), CPU seconds (user + system, the two-process read's worker
included), peak RSS (/usr/bin/time %M: the largest single process) and the sampled peak of
the process tree's summed RSS (a fork's shared pages twice) and summed PSS (what the tree
holds: bench_read.TreeRss), and the ratio of the other's wall time to this one's (> 1:
this checkout is faster). ``trim`` is ``trim --pstep N -o FILE`` (``--pstep``, default 60,
a middle step of the H200 big trace); its output compared is the file's bytes.
``--fill`` adds, for each command, a first run with the cache (a private cache dir, emptied
before each) and its ratio to the ``--no-cache`` run; ``--fill-from`` starts each such run
from a copy of that cache dir instead (a cache that holds other traces, its index made).
Outputs of the two sides are compared (stdout of the last run, trim's file) and a difference
is reported.
Default traces: benchmarks/data/h200-big.json (decompress ../shared/traces/h200/big.json.gz
there) and that .gz.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_read import Run, run_once, uncompressed_size, warm_cache

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "traces"
DEFAULT_TRACES = [ROOT / "benchmarks" / "data" / "h200-big.json", SHARED / "h200" / "big.json.gz"]
FILL = ", fill"  # "kernels, fill": a first run with the cache, of that command
TRIM_OUT = Path(tempfile.gettempdir()) / f"traceview-against-trim-{os.getpid()}.json"
PSTEP = ["60"]  # trim --pstep N (set by --pstep)
FILL_FROM: list[Path] = []  # the cache dir each fill starts from a copy of (--fill-from)


@dataclass
class Side:
    name: str
    checkout: Path
    runs: dict[tuple[str, str], list[Run]] = field(default_factory=dict)

    @property
    def traceview(self) -> str:
        return str(self.checkout / ".venv" / "bin" / "traceview")


def build(rev: str, scratch: Path | None) -> Path:
    """A checkout of ``rev`` with its own .venv (made once, then reused)."""
    sha = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    where = (scratch or Path(tempfile.gettempdir()) / "traceview-against") / sha[:12]
    if not (where / ".venv" / "bin" / "traceview").exists():
        if not where.exists():
            _git("worktree", "add", "--detach", str(where), sha)
        subprocess.run([sys.executable, "-m", "venv", str(where / ".venv")], check=True)
        pip = [str(where / ".venv" / "bin" / "pip"), "install", "--quiet"]
        subprocess.run([*pip, "-e", str(where)], check=True)
    return where


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def command(side: Side, name: str, trace: Path) -> list[str]:
    if name.removesuffix(FILL) == "trim":
        out = ["-o", str(TRIM_OUT), "--force", "-q"]
        return [side.traceview, "trim", str(trace), "--pstep", PSTEP[0], *out] + (
            [] if name.endswith(FILL) else ["--no-cache"]
        )
    if name.endswith(FILL):
        return [side.traceview, name.removesuffix(FILL), str(trace), "-f", "json", "-q"]
    return [side.traceview, name, str(trace), "-f", "json", "-q", "--no-cache"]


def _has_command(side: Side, name: str) -> bool:
    """Whether ``side`` knows ``name`` (an older revision may not: it is left out, said why)."""
    done = subprocess.run([side.traceview, name, "--help"], capture_output=True)
    if done.returncode != 0:
        print(f"{side.name}: no '{name}' command at {side.checkout}: left out", file=sys.stderr)
    return done.returncode == 0


def run(side: Side, name: str, trace: Path) -> Run:
    if name.endswith(FILL):  # a first run: nothing of this trace in the private cache
        shutil.rmtree(Path(os.environ["TRACEVIEW_CACHE_DIR"]), ignore_errors=True)
        if FILL_FROM:
            shutil.copytree(FILL_FROM[0], os.environ["TRACEVIEW_CACHE_DIR"])
    result = run_once(command(side, name, trace))
    if name.removesuffix(FILL) == "trim":  # its output is the file: compared by its digest
        result.stdout = hashlib.sha256(TRIM_OUT.read_bytes()).hexdigest()
        TRIM_OUT.unlink()
    side.runs.setdefault((str(trace), name), []).append(result)
    print(f"  {side.name:<5} {name:<14} {trace.name:<22} {result.wall_s:7.2f} s", file=sys.stderr)
    return result


def table(sides: list[Side], traces: list[Path], names: list[str]) -> list[str]:
    head = (
        f"{'trace':<22} {'command':<14} {'this s':>7} {'MB/s':>6} {'CPU s':>6} {'RSS MB':>6} "
        f"{'tree':>5} {'PSS':>5}  {'other s':>7} {'MB/s':>6} {'CPU s':>6} {'RSS MB':>6} "
        f"{'tree':>5} {'PSS':>5}  "
        f"{'ratio':>6}  output"
    )
    lines = [head, "-" * len(head)]
    for trace in traces:
        mb = uncompressed_size(trace) / 1e6
        for name in names:
            cells = []
            for side in sides:
                runs = side.runs[(str(trace), name)]
                wall = statistics.median(r.wall_s for r in runs)
                cpu = statistics.median(r.cpu_s for r in runs)
                rss = statistics.median(r.rss_mb for r in runs)
                tree = statistics.median(r.tree_rss_mb for r in runs)
                pss = statistics.median(r.tree_pss_mb for r in runs)
                cells.append((wall, mb / wall, cpu, rss, tree, pss, runs[-1].stdout))
            same = "same" if cells[0][6] == cells[1][6] else "DIFFERS"
            row = f"{trace.name:<22} {name:<14} "
            row += "  ".join(
                f"{w:7.2f} {r:6.0f} {c:6.2f} {m:6.0f} {t:5.0f} {q:5.0f}"
                for w, r, c, m, t, q, _ in cells
            )
            lines.append(f"{row}  {cells[1][0] / cells[0][0]:6.2f}  {same}")
    return lines


def fill_ratios(side: Side, traces: list[Path], names: list[str]) -> list[str]:
    out = []
    for trace in traces:
        for name in names:
            fill = side.runs.get((str(trace), name + FILL))
            cold = side.runs.get((str(trace), name))
            if fill and cold:
                ratio = statistics.median(r.wall_s for r in fill) / statistics.median(
                    r.wall_s for r in cold
                )
                out.append(
                    f"{side.name}: {trace.name}: first run with the cache {ratio:.2f}x {name} "
                    "--no-cache"
                )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    against = p.add_mutually_exclusive_group(required=True)
    against.add_argument("--against", metavar="REV", help="a git revision to build and compare")
    against.add_argument("--against-dir", type=Path, help="a checkout with its own .venv")
    p.add_argument("traces", nargs="*", type=Path, default=DEFAULT_TRACES)
    p.add_argument("--commands", nargs="+", default=["kernels", "gaps", "summary", "steps", "trim"])
    p.add_argument("--pstep", default=PSTEP[0], help="the step trim keeps (trim --pstep N)")
    p.add_argument("--runs", type=int, default=3, help="runs of each side (medians)")
    p.add_argument("--fill", action="store_true", help="also a first run that fills the cache")
    p.add_argument(
        "--fill-from", type=Path, help="each fill starts from a copy of this cache dir (--fill)"
    )
    p.add_argument("--scratch", type=Path, help="where --against builds its checkouts")
    args = p.parse_args(argv)
    PSTEP[0] = args.pstep
    FILL_FROM[:] = [args.fill_from] if args.fill_from else []
    other = args.against_dir or build(args.against, args.scratch)
    sides = [Side("this", ROOT), Side("other", other.resolve())]
    names = [n for n in args.commands if all(_has_command(side, n) for side in sides)]
    names += [name + FILL for name in names] if args.fill else []
    os.environ["TRACEVIEW_CACHE_DIR"] = tempfile.mkdtemp(prefix="traceview-against-cache-")
    for side in sides:  # start-up as installed: with PYTHONDONTWRITEBYTECODE, no .pyc otherwise
        py = side.checkout / ".venv" / "bin" / "python"
        subprocess.run([str(py), "-m", "compileall", "-q", str(side.checkout / "traceview")])
    for trace in args.traces:
        warm_cache(trace)
        for name in names:
            for _ in range(args.runs):
                for side in sides:
                    run(side, name, trace)
    print(f"this:  {ROOT} ({_git('rev-parse', '--short', 'HEAD')}, plus any uncommitted change)")
    print(f"other: {other}")
    print(f"runs: {args.runs} per side, alternated; medians; nproc={os.cpu_count()}")
    print("\n".join(table(sides, args.traces, names)))
    ratios = (line for side in sides for line in fill_ratios(side, args.traces, args.commands))
    print("\n".join(ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())

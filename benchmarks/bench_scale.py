"""Scale benchmark: time and peak RSS against distinct kernel names, streams and steps.

    python benchmarks/bench_scale.py [--kernels 200000] [--names 1e3 1e4 1e5]
                                     [--streams 10 1e3 1e4] [--steps 10 1e3 1e4]
                                     [--commands kernels short gaps steps snapshot pstep]
                                     [--runs 3] [--timeout 300] [--data-dir benchmarks/data]
                                     [--tree DIR]

Each case varies one dimension from a base trace (``--kernels`` launches, 100 distinct names,
4 streams, 10 steps), generated once by ``fixtures/generate.py`` (``write_scale_trace``, ~400
bytes per kernel launch) and kept in the data dir. Every command runs in its own subprocess
with ``--no-cache``; wall is ``time.perf_counter`` around it (interpreter start-up included),
peak RSS is ``os.wait4``'s ru_maxrss (the largest single process; traces are generated in a
child, since a forked child's ru_maxrss starts at the parent's RSS). Medians of ``--runs``; a
run over ``--timeout`` (or killed when out of memory) is shown as ``killed``. The default is
a quick run (~5 min on 2 busy cores).

Commands: kernels; ``short`` = kernels --group-by short; ``regex`` = kernels --name REGEX;
gaps; steps; snapshot; ``pstep`` = kernels --pstep 5-10000000 (a usage error, exit 2);
``pstep-huge`` = kernels --pstep 5-1000000000, not run by default (before issue #21 it
needed tens of GB: do not run it on old code on a shared machine). Outputs of every row, not
run by default: ``csv`` = kernels -f csv, ``all-json`` = kernels -f json --top 0, ``report``
= kernels -o /dev/null, ``gaps-report`` = gaps -o /dev/null, ``gaps-all`` = gaps -f json
--gap-top 0 (before issue #21's streamed outputs they took 3-6 GB at 10^6 names).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASE_NAMES, BASE_STREAMS, BASE_STEPS = 100, 4, 10
COMMANDS: dict[str, tuple[list[str], int]] = {  # name → (traceview arguments, exit code)
    "kernels": (["kernels"], 0),
    "short": (["kernels", "--group-by", "short"], 0),
    "regex": (["kernels", "--name", r"fused_kernel_\d*7<"], 0),
    "gaps": (["gaps"], 0),
    "steps": (["steps"], 0),
    "snapshot": (["snapshot"], 0),
    "pstep": (["kernels", "--pstep", "5-10000000"], 2),
    "pstep-huge": (["kernels", "--pstep", "5-1000000000"], 2),
    # outputs of every row (not run by default: at 10^6 names they write 0.3-0.7 GB)
    "csv": (["kernels", "-f", "csv"], 0),
    "all-json": (["kernels", "-f", "json", "--top", "0"], 0),
    "report": (["kernels", "-o", "/dev/null"], 0),
    "gaps-report": (["gaps", "-o", "/dev/null"], 0),
    "gaps-all": (["gaps", "-f", "json", "--gap-top", "0"], 0),
}
_EVERY_ROW = ("csv", "all-json", "report", "gaps-report", "gaps-all")
DEFAULT_COMMANDS = [c for c in COMMANDS if c != "pstep-huge" and c not in _EVERY_ROW]


@dataclass(frozen=True)
class Case:
    """One trace: launches, distinct names, streams, steps."""

    kernels: int
    names: int
    streams: int
    steps: int

    @property
    def label(self) -> str:
        return f"k{self.kernels}-n{self.names}-s{self.streams}-p{self.steps}"


def ensure_trace(data_dir: Path, case: Case) -> Path:
    """The case's trace, generated (atomically) if missing."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / f"scale-{case.label}.json"
    if not path.exists():
        tmp = path.with_name(f".{path.name}.tmp")
        t0 = time.perf_counter()
        # In a child process: a forked child's ru_maxrss starts at its parent's RSS, so a
        # benchmark process grown by generating a trace would inflate every later measurement.
        code = (
            "import sys; from pathlib import Path; "
            f"sys.path.insert(0, {str(ROOT / 'fixtures')!r}); import generate; "
            f"generate.write_scale_trace(Path({str(tmp)!r}), kernels={case.kernels}, "
            f"names={case.names}, streams={case.streams}, steps={case.steps})"
        )
        subprocess.run([sys.executable, "-c", code], check=True)
        os.replace(tmp, path)
        print(f"generated {path} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return path


def run_once(
    args: list[str], expect: int, timeout: float, tree: Path | None
) -> tuple[float, float]:
    """Wall seconds and peak RSS MB of one traceview run; wall = inf when it was killed."""
    cmd = [sys.executable, "-m", "traceview", *args, "--no-cache", "--quiet"]
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        # ``python -m`` puts the working directory first on sys.path: run in the tree.
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=tree, start_new_session=True
        )
        timer = threading.Timer(timeout, os.killpg, (proc.pid, signal.SIGKILL))
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        timer.cancel()
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code == -signal.SIGKILL:  # by the timer, or by the kernel when out of memory
            return float("inf"), usage.ru_maxrss / 1024
        if code != expect:
            err.seek(0)
            raise RuntimeError(f"{cmd}: exit {code}, expected {expect}: {err.read()[-500:]!r}")
    return wall, usage.ru_maxrss / 1024


def measure(
    path: Path, command: str, runs: int, timeout: float, tree: Path | None
) -> tuple[float, float]:
    """Median wall and RSS over ``runs``; stops after the first run that timed out."""
    args, expect = COMMANDS[command]
    results = []
    for _ in range(runs):
        results.append(run_once([args[0], str(path), *args[1:]], expect, timeout, tree))
        if results[-1][0] == float("inf"):
            break
    return statistics.median(r[0] for r in results), statistics.median(r[1] for r in results)


def cases(args: argparse.Namespace) -> list[Case]:
    """The base case, then one dimension varied at a time."""
    k = args.kernels
    out = [Case(k, BASE_NAMES, BASE_STREAMS, BASE_STEPS)]
    out += [Case(k, n, BASE_STREAMS, BASE_STEPS) for n in args.names]
    out += [Case(k, BASE_NAMES, s, BASE_STEPS) for s in args.streams]
    out += [Case(k, BASE_NAMES, BASE_STREAMS, p) for p in args.steps]
    return list(dict.fromkeys(out))


def _count(text: str) -> int:
    return int(float(text))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kernels", type=_count, default=200_000, help="launches per trace")
    p.add_argument("--names", type=_count, nargs="*", default=[1000, 10_000, 100_000])
    p.add_argument("--streams", type=_count, nargs="*", default=[10, 1000, 10_000])
    p.add_argument("--steps", type=_count, nargs="*", default=[10, 1000, 10_000])
    p.add_argument("--commands", nargs="*", choices=list(COMMANDS), default=DEFAULT_COMMANDS)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    p.add_argument(
        "--tree", type=Path, help="run traceview from this source tree (e.g. a checkout of main)"
    )
    p.add_argument("--data-dir", type=Path, default=ROOT / "benchmarks" / "data")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    where = args.tree or "the installed package"
    print(f"python: {sys.executable}; traceview from {where}; nproc={os.cpu_count()}")
    print(f"runs: {args.runs} (medians); timeout {args.timeout:.0f} s")
    print(f"{'case':<32} {'MB':>6} {'command':<9} {'wall s':>8} {'peak RSS MB':>12}")
    for case in cases(args):
        path = ensure_trace(args.data_dir.resolve(), case)
        mb = path.stat().st_size / 1e6
        for command in args.commands:
            wall, rss = measure(path, command, args.runs, args.timeout, args.tree)
            shown = "killed" if wall == float("inf") else f"{wall:.2f}"
            print(f"{case.label:<32} {mb:6.0f} {command:<9} {shown:>8} {rss:12.0f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

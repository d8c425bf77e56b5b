"""Start-up of short commands: median wall and CPU (user + sys) seconds over alternated runs,
this checkout against another revision's (``--against DIR``: a checkout of it, e.g. from
``git archive REV | tar -x -C DIR``, with the built ``traceview/_core*.so`` copied in).

Both trees are byte-compiled first (a wheel's install does it; an editable install under
PYTHONDONTWRITEBYTECODE=1 would compile every module on every start) and run by this venv's
``traceview`` script with PYTHONPATH set to the tree, from a neutral directory.

    python benchmarks/bench_startup.py --against /tmp/before --runs 7
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = str(ROOT / "fixtures" / "demo.json.gz")  # 15,583 events, 4.5 MB inflated
TINY = str(ROOT / "fixtures" / "edge" / "one_line.json")  # 1.5 kB: start-up alone
COMMANDS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
    "traceview --version": ["--version"],
    "traceview --help": ["--help"],
    "kernels tiny": ["kernels", TINY, "--no-cache", "-q", "-f", "json"],
    "kernels demo": ["kernels", DEMO, "--no-cache", "-q", "-f", "json"],
    "gaps demo": ["gaps", DEMO, "--no-cache", "-q", "-f", "json"],
    "summary demo": ["summary", DEMO, "--no-cache", "-q", "-f", "json"],
    "steps demo": ["steps", DEMO, "--no-cache", "-q", "-f", "json"],
}


def timed(argv: list[str], tree: Path, cwd: str) -> tuple[float, float]:
    """Wall and CPU (user + sys of the child) seconds of one run."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv} failed in {tree}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, help="a checkout of the revision to compare")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--only", nargs="*", help="commands (keys) to time; default: all")
    args = parser.parse_args()
    trees = {"after": ROOT} | ({"before": args.against.resolve()} if args.against else {})
    for tree in trees.values():
        compileall.compile_dir(tree / "traceview", quiet=1)
    script = str(Path(sys.executable).parent / "traceview")
    names = args.only or list(COMMANDS)
    print(f"| command | {' | '.join(f'{t} wall s | {t} CPU s' for t in trees)} |")
    print(f"|---|{'---|---|' * len(trees)}")
    with tempfile.TemporaryDirectory() as cwd:
        for name in names:
            cmd = COMMANDS[name]
            argv = cmd if cmd[0] == sys.executable else [script, *cmd]
            times: dict[str, list[tuple[float, float]]] = {t: [] for t in trees}
            for _ in range(args.runs):  # alternated, so load changes hit both alike
                for label, tree in trees.items():
                    times[label].append(timed(argv, tree, cwd))
            cells = []
            for label in trees:
                walls, cpus = zip(*times[label], strict=True)
                cells += [f"{statistics.median(walls):.3f}", f"{statistics.median(cpus):.3f}"]
            print(f"| {name} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()

"""Profile one traceview command in-process under cProfile: the functions called more than N
times (issue 43: no Python loop per event, kernel or op call, so none over ~20,000 on a big
trace) and the top by own time. Exit 1 when any function is over N, so it serves as a check.

    python benchmarks/profile_calls.py summary benchmarks/data/h200-big.json
    python benchmarks/profile_calls.py --warm kernels TRACE -- --top 5
    TRACEVIEW_PARALLEL_MIN_BYTES=100000000000 python benchmarks/profile_calls.py gaps TRACE

Cold (default) adds ``--no-cache``; ``--warm`` first runs the command once unprofiled with a
cache in a temp dir (or $TRACEVIEW_CACHE_DIR), then profiles the run that reads it;
``--fill`` profiles the run that fills that (empty) cache. Output
goes to a temp file (``-f json``; report and export ``-o``) so the profile sees the render,
not the terminal. A
parallel read (columns/parallel.py) forks: its workers' calls are not in the profile; set
TRACEVIEW_PARALLEL_MIN_BYTES high to read serially and see them.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Commands whose output is a file they write (no -f json): the output path goes in as -o.
_FILE_OUTPUT = {"report": ".html", "export": "", "trim": ".json", "snapshot": ".json"}


def _argv(command: str, traces: list[str], tmp: Path, extra: list[str], cold: bool) -> list[str]:
    argv = ["traceview", command, *traces, "-q"]
    if command in _FILE_OUTPUT:
        argv += ["-o", str(tmp / f"out{_FILE_OUTPUT[command]}"), "--force"]
    else:
        argv += ["-f", "json"]
    if cold:
        argv.append("--no-cache")
    return argv + extra


def _run(argv: list[str], stdout: Path) -> int:
    """Runs ``traceview`` as the command line does, its standard output (file descriptor 1,
    whatever writes it) into the file ``stdout``."""
    from traceview.cli import main

    saved, saved_fd = sys.argv, os.dup(1)
    sys.argv = argv
    sys.stdout.flush()
    with stdout.open("wb") as sink:
        os.dup2(sink.fileno(), 1)
    try:
        main()
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    finally:
        sys.stdout.flush()
        os.dup2(saved_fd, 1)
        os.close(saved_fd)
        sys.argv = saved
    return 0


def _where(func: tuple[str, int, str]) -> str:
    path, line, name = func
    marker = f"{os.sep}traceview{os.sep}"
    if marker in path:
        path = "traceview/" + path.rsplit(marker, 1)[1].replace(os.sep, "/")
    elif path == "~":
        return name
    return f"{path}:{line}({name})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command")
    parser.add_argument("traces", nargs="+")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--warm", action="store_true", help="profile a run from the cache")
    mode.add_argument("--fill", action="store_true", help="profile the run filling a cache")
    parser.add_argument("-n", "--max-calls", type=int, default=20_000)
    parser.add_argument("--top", type=int, default=15, help="rows of the tottime table")
    parser.add_argument("--stats", help="also dump the raw profile here (pstats)")
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]

    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tv-profile-")))
        if (args.warm or args.fill) and "TRACEVIEW_CACHE_DIR" not in os.environ:
            os.environ["TRACEVIEW_CACHE_DIR"] = str(tmp / "cache")
        stdout = tmp / "stdout"
        filling = _argv(args.command, args.traces, tmp, extra, cold=False)
        if args.warm and _run(filling, stdout) not in (0, 1):
            print("profile_calls: the filling run failed", file=sys.stderr)
            return 2
        argv = _argv(args.command, args.traces, tmp, extra, cold=not (args.warm or args.fill))
        profile = cProfile.Profile()
        start, cpu = time.perf_counter(), time.process_time()
        profile.enable()
        code = _run(argv, stdout)
        profile.disable()
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu

    stats = pstats.Stats(profile, stream=io.StringIO())
    if args.stats:
        stats.dump_stats(args.stats)
    rows: list[tuple[str, int, float, float]] = []
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    for func, (_cc, calls, tottime, cumtime, _callers) in raw.items():
        rows.append((_where(func), calls, tottime, cumtime))
    mode = "warm" if args.warm else "fill" if args.fill else "cold"
    print(f"{' '.join(argv[1:])}\n{mode}: exit {code}, {wall:.2f} s wall, {cpu:.2f} s CPU")
    over = sorted((r for r in rows if r[1] > args.max_calls), key=lambda r: -r[1])
    print(f"\nfunctions called more than {args.max_calls:,} times: {len(over)}")
    for where, calls, tottime, cumtime in over:
        print(f"  {calls:>11,}  {tottime:7.3f} s own  {cumtime:7.3f} s cum  {where}")
    print(f"\ntop {args.top} by own time:")
    for where, calls, tottime, cumtime in sorted(rows, key=lambda r: -r[2])[: args.top]:
        print(f"  {tottime:7.3f} s own  {cumtime:7.3f} s cum  {calls:>11,}  {where}")
    return 1 if over else (0 if code == 0 else 2)


if __name__ == "__main__":
    sys.exit(main())

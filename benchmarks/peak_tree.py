"""The peak RSS of each process a command runs, its forked children included.

    python benchmarks/peak_tree.py [--every 0.01] [--private] -- traceview export TRACE -o DIR

``/usr/bin/time %M`` gives the largest of the command's process and the children it waited
for: a child left to end after the command (a cache entry's reader, writing CPU rows no one
asked for) is not counted. Here every process of the tree is sampled (``VmHWM``, the peak
its kernel keeps, read from /proc every ``--every`` seconds) and each one's peak printed,
in MB (KiB / 1000), with the span it was seen over. A process that lives less than one
interval may be missed; a forked child's RSS counts the pages it shares with its parent:
``--private`` adds each one's largest sampled private memory (``Private_Clean`` +
``Private_Dirty``, /proc/PID/smaps_rollup), what it holds that no other process shares.
Linux only.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_read import tree_pids


def peak_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def private_kib(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return sum(int(line.split()[1]) for line in f if line.startswith("Private_"))
    except (OSError, ValueError):
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=0.01, help="seconds between samples")
    parser.add_argument("--private", action="store_true", help="sample private memory too")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    peaks: dict[int, tuple[int, float, float]] = {}  # pid: (KiB, first seen, last seen)
    private: dict[int, int] = {}  # pid: KiB
    while process.poll() is None:
        now = time.monotonic() - started
        for pid in tree_pids(process.pid):
            kib = peak_kib(pid)
            if kib is not None:
                old, first, _ = peaks.get(pid, (0, now, now))
                peaks[pid] = (max(old, kib), first, now)
            own = private_kib(pid) if args.private else None
            if own is not None:
                private[pid] = max(private.get(pid, 0), own)
        time.sleep(args.every)
    wall = time.monotonic() - started
    print(f"exit {process.returncode}, {wall:.2f} s")
    for pid, (kib, first, last) in peaks.items():
        who = "command" if pid == process.pid else "child"
        own = f"  private {private[pid] / 1000:.1f} MB" if pid in private else ""
        print(f"{who:8} {kib / 1000:7.1f} MB  seen {first:.2f}-{last:.2f} s{own}")
    sys.exit(process.returncode)


if __name__ == "__main__":
    main()

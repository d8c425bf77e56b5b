"""Print the stacks of a hung test (tests/conftest.py wrote them) so that the end of the output,
which is what CI's log keeps, says the most: the processes it forked first, then each thread,
the main thread last, each innermost frame last; the test's name on the very last line.

    python tests/hang_report.py FOLDER
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

FRAMES = 8  # of each thread but the main one
MAIN_FRAMES = 14
_FRAME = re.compile(r'\s*File "(.*)", line (\d+) in (.*)')


def _short(path: str) -> str:
    for mark in ("site-packages/", "/traceview/", "/tests/", "/rust/"):
        if mark in path:
            return mark.strip("/") + "/" + path.split(mark, 1)[1]
    return path


def _threads(text: str) -> list[tuple[str, list[str]]]:
    """(header, frames innermost first) of each thread of a faulthandler dump."""
    threads: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith(("Thread 0x", "Current thread 0x")):
            threads.append((line.split(" (most recent", 1)[0], []))
        elif (frame := _FRAME.match(line)) and threads:
            path, number, function = frame.groups()
            threads[-1][1].append(f"{_short(path)}:{number} {function}")
    return threads


def _print_thread(header: str, frames: list[str], keep: int) -> None:
    print(f"  {header}{' (innermost last)' if frames else ''}")
    for frame in reversed(frames[:keep]):
        print(f"    {frame}")


def report(folder: Path) -> int:
    """Print each hang found in ``folder``; how many there were."""
    hangs = 0
    for stack in sorted(folder.glob("hang-*.txt")):
        text = stack.read_text(errors="replace")
        # the last dump: faulthandler's at the end, else the one before the forks were stopped
        threads = _threads(re.split(r"(?m)^(?=Timeout \(|before its forked)", text)[-1])
        if not threads:
            continue  # its last test ended
        hangs += 1
        test = text.splitlines()[0].removeprefix("test: ")
        pid = stack.stem.removeprefix("hang-")
        children = folder / f"forks-{pid}.txt"
        print(f"==== a hung test, {test} (process {pid})")
        if children.exists():  # each process's line, then its stack if it is a fork
            for part in re.split(r"(?m)^(?=process \d+: )", children.read_text(errors="replace")):
                if part.strip():
                    print(f"  {part.splitlines()[0]}")
                for header, frames in _threads(part):
                    _print_thread(header, frames, FRAMES)
        for header, frames in threads[:-1]:
            _print_thread(header, frames, FRAMES)
        main = threads[-1][1]
        ours = [i for i, frame in enumerate(main) if not frame.startswith("site-packages/")]
        main = main[: ours[-1] + 1] if ours else main  # from the test's own frame in
        _print_thread(f"main {threads[-1][0].lower()}", main, MAIN_FRAMES)
        print(f"==== hung: {test}")
    return hangs


if __name__ == "__main__":
    sys.exit(0 if report(Path(sys.argv[1])) == 0 else 1)

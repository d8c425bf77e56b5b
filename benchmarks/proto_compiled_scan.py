"""How fast could a compiled scanner read a kineto trace? A measurement, not traceview code.

One numba pass over the bytes of a plain-JSON trace (``{"traceEvents": [ {...}, ... ]}``, events
at depth 3) that writes columns (kernel or not, name offsets, ts and dur in ns, correlation)
with no Python object per event: the design the reader would need for issue 37's targets.
It scans the whole file in one thread, then in two (numba releases the GIL), and checks its
kernel count and kernel time against ``traceview kernels -f json``.

Limits, as a prototype: ts/dur digits past the third decimal are cut, not rounded half to
even; no escapes in keys; no NaN, exponent or gzip; the file must start with the event array's
object. Needs numba, which is not a traceview dependency:

    python -m venv /tmp/nb && /tmp/nb/bin/pip install numba numpy
    /tmp/nb/bin/python benchmarks/proto_compiled_scan.py TRACE.json \
        --check-with .venv/bin/traceview
"""

from __future__ import annotations

import argparse
import json
import mmap
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numba as nb
import numpy as np

QUOTE, BACKSLASH, OPEN, CLOSE, OPEN_LIST, CLOSE_LIST, COLON, COMMA = (
    34,
    92,
    123,
    125,
    91,
    93,
    58,
    44,
)
EVENT_DEPTH = 3  # root object, traceEvents array, event
ARGS_DEPTH = 4


@nb.njit(cache=True, nogil=True)
def _equals(buf: Any, start: int, end: int, literal: Any) -> bool:
    if end - start != len(literal):
        return False
    for i in range(len(literal)):  # noqa: SIM110 - a loop numba compiles
        if buf[start + i] != literal[i]:
            return False
    return True


@nb.njit(cache=True, nogil=True)
def _ns(buf: Any, p: int, n: int) -> tuple[int, int, bool]:
    """A µs number's ns (digits past the third decimal cut), where it ends, whether it parsed."""
    negative = buf[p] == 45
    if negative:
        p += 1
    whole = 0
    q = p
    while q < n and 48 <= buf[q] <= 57:
        whole = whole * 10 + (buf[q] - 48)
        q += 1
    if q == p:
        return 0, q, False
    frac = 0
    digits = 0
    if q < n and buf[q] == 46:
        q += 1
        while q < n and 48 <= buf[q] <= 57:
            if digits < 3:
                frac = frac * 10 + (buf[q] - 48)
            digits += 1
            q += 1
    while digits < 3:
        frac *= 10
        digits += 1
    if q < n and (buf[q] == 101 or buf[q] == 69):
        return 0, q, False  # an exponent: not handled here
    value = whole * 1000 + frac
    return (-value if negative else value), q, True


@nb.njit(cache=True, nogil=True)
def scan(buf: Any, depth: int, keys: Any, kernel: Any, name_start: Any, name_end: Any,
         ts: Any, dur: Any, corr: Any) -> tuple[int, int]:  # fmt: skip
    """Fill the columns from ``buf`` (starting at ``depth``); (events, numbers not parsed)."""
    k_cat, k_name, k_ts, k_dur, k_args, k_corr, v_kernel = keys
    n = len(buf)
    i = 0
    event = -1
    key_start = key_end = 0
    expect_key = in_args = False
    count = bad = 0
    while i < n:
        c = buf[i]
        if c == QUOTE:
            start = j = i + 1
            while True:
                b = buf[j]
                if b == QUOTE:
                    break
                j += 2 if b == BACKSLASH else 1
            if expect_key:
                key_start, key_end, expect_key = start, j, False
            elif depth == EVENT_DEPTH and event >= 0:
                if _equals(buf, key_start, key_end, k_cat):
                    kernel[event] = _equals(buf, start, j, v_kernel)
                elif _equals(buf, key_start, key_end, k_name):
                    name_start[event], name_end[event] = start, j
            i = j + 1
            continue
        if c == COLON:
            i += 1
            while buf[i] == 32 or buf[i] == 10 or buf[i] == 13 or buf[i] == 9:
                i += 1
            first = buf[i]
            if event >= 0 and (first == 45 or 48 <= first <= 57):
                if depth == EVENT_DEPTH and _equals(buf, key_start, key_end, k_ts):
                    ts[event], i, ok = _ns(buf, i, n)
                    bad += not ok
                elif depth == EVENT_DEPTH and _equals(buf, key_start, key_end, k_dur):
                    dur[event], i, ok = _ns(buf, i, n)
                    bad += not ok
                elif depth == ARGS_DEPTH and in_args and _equals(buf, key_start, key_end, k_corr):
                    value = 0
                    while 48 <= buf[i] <= 57:
                        value = value * 10 + (buf[i] - 48)
                        i += 1
                    corr[event] = value
            continue
        if c == OPEN:
            depth += 1
            expect_key = True
            if depth == EVENT_DEPTH:
                event = count
                count += 1
                if count > len(ts):
                    return count, bad  # out of room: the caller gives more
                kernel[event] = False
                ts[event] = dur[event] = corr[event] = -1
            elif depth == ARGS_DEPTH and _equals(buf, key_start, key_end, k_args):
                in_args = True
        elif c == CLOSE:
            depth -= 1
            if depth == EVENT_DEPTH:
                in_args = False
        elif c == OPEN_LIST:
            depth += 1
        elif c == CLOSE_LIST:
            depth -= 1
        elif c == COMMA and (depth == EVENT_DEPTH or (depth == ARGS_DEPTH and in_args)):
            expect_key = True
        i += 1
    return count, bad


KEYS = tuple(
    np.frombuffer(k, dtype=np.uint8).copy()
    for k in (b"cat", b"name", b"ts", b"dur", b"args", b"correlation", b"kernel")
)


def scan_part(buf: np.ndarray, offset: int, depth: int, capacity: int) -> dict[str, Any]:
    """The columns of ``buf[offset:]``; name offsets are in ``buf``."""
    columns = [np.zeros(capacity, np.bool_)] + [np.zeros(capacity, np.int64) for _ in range(5)]
    count, bad = scan(buf[offset:], depth, KEYS, *columns)
    if count > capacity:
        return scan_part(buf, offset, depth, 2 * count)
    names = ("kernel", "name_start", "name_end", "ts", "dur", "corr")
    part: dict[str, Any] = {n: c[:count] for n, c in zip(names, columns, strict=True)}
    part["name_start"] += offset
    part["name_end"] += offset
    return {**part, "events": count, "bad": bad}


def kernel_figures(parts: list[dict[str, Any]], data: mmap.mmap) -> tuple[int, int, int]:
    """(kernels, their ns, distinct names): names read from the file only for kernels."""
    names = set()
    for part in parts:
        k = part["kernel"]
        for s, e in zip(part["name_start"][k].tolist(), part["name_end"][k].tolist(), strict=True):
            names.add(data[s:e])
    count = sum(int(p["kernel"].sum()) for p in parts)
    total = sum(int(p["dur"][p["kernel"]].sum()) for p in parts)
    return count, total, len(names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--check-with", help="a traceview executable to compare kernel totals")
    args = parser.parse_args()
    with args.trace.open("rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    buf = np.frombuffer(data, dtype=np.uint8)
    size = len(buf)
    start = time.perf_counter()
    scan_part(buf[: 1 << 16], 0, 0, 1 << 10)  # compiled, or loaded from numba's cache
    print(f"compile or cache load: {time.perf_counter() - start:.2f} s")
    # Two halves cut between events: the second starts inside the array (depth 2).
    middle = data.find(b"\n  },\n  {", size // 2) + len(b"\n  },")
    capacity = size // 150  # events: a rescan with more room when too small
    for run in range(args.runs):
        start = time.perf_counter()
        whole = [scan_part(buf, 0, 0, capacity)]
        one = time.perf_counter() - start
        start = time.perf_counter()
        with ThreadPoolExecutor(2) as pool:
            halves = list(
                pool.map(lambda p: scan_part(*p), [(buf[:middle], 0, 0, capacity),
                                                   (buf, middle, 2, capacity)])
            )  # fmt: skip
        two = time.perf_counter() - start
        figures = kernel_figures(whole, data)
        assert figures == kernel_figures(halves, data)
        print(f"run {run + 1}: 1 thread {one:.3f} s ({size / one / 1e6:.0f} MB/s), "
              f"2 threads {two:.3f} s ({size / two / 1e6:.0f} MB/s); events "
              f"{whole[0]['events']}, not parsed {whole[0]['bad']}; kernels {figures[0]}, "
              f"{figures[1]} ns, {figures[2]} names")  # fmt: skip
    if args.check_with:
        out = subprocess.run(
            [args.check_with, "kernels", str(args.trace), "-q", "-f", "json", "--top", "0"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        totals = json.loads(out.stdout)["totals"]
        print(f"traceview kernels: {totals['count']} kernels, {totals['total_us']} µs, "
              f"{totals['distinct']} names")  # fmt: skip


if __name__ == "__main__":
    main()

"""A big trace made of a real one: its event array repeated until the file reaches a size.

    python benchmarks/repeat_trace.py SOURCE(.json|.json.gz) OUT.json --size 500MB

The header and the keys after the array are the source's, as written; the events are the
source's text, repeated as they are (timestamps not shifted: the copies overlap in time), so
the numbers keep their layout (e.g. the epoch-ns ``1712195495505582.988`` of
hta__ns_resolution...). For reading speed on a real layout, not for the analyses' answers.
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_read import parse_size

_START = re.compile(rb'"traceEvents"\s*:\s*\[')


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("source", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--size", type=parse_size, default=parse_size("500MB"))
    args = p.parse_args(argv)
    opener = gzip.open if args.source.suffix == ".gz" else open
    with opener(args.source, "rb") as f:
        text = f.read()
    start = _START.search(text)
    if start is None:
        sys.exit(f"{args.source}: no traceEvents array")
    end = text.rindex(b"]", start.end(), _array_end(text, start.end()) + 1)
    head, body, tail = text[: start.end()], text[start.end() : end].strip(), text[end:]
    copies = max(1, (args.size - len(head) - len(tail)) // (len(body) + 2))
    with open(args.out, "wb") as out:
        out.write(head + b"\n")
        for i in range(copies):
            out.write(body if i == 0 else b",\n" + body)
        out.write(b"\n" + tail)
    print(f"{args.out}: {copies} copies of {len(body) / 1e6:.1f} MB of events", file=sys.stderr)
    return 0


def _array_end(text: bytes, pos: int) -> int:
    """The offset of the ``]`` closing the array whose items start at ``pos``."""
    depth, i, n = 1, pos, len(text)
    while i < n:
        c = text[i]
        if c == 0x22:  # a string: skip it, escapes included
            i += 1
            while text[i] != 0x22:
                i += 2 if text[i] == 0x5C else 1
        elif c in b"[{":
            depth += 1
        elif c in b"]}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    sys.exit("the event array does not end")


if __name__ == "__main__":
    sys.exit(main())

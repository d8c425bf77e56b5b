"""How fast can msgspec decode a trace's events, whatever traceview then does with them?

Decodes the events of the first ``--mb`` MB of a plain-JSON trace (one span, one core) with
the reader's fast decoder and with smaller structs: no ``args`` at all (the floor: msgspec
still parses what it skips), ``args`` as ``msgspec.Raw``, and the three ``args`` fields of
Nov 23. ``ts`` and ``dur`` are typed as the reader types them for this trace: raw text where
timestamps need exact decoding (sub-µs digits at epoch scale), else numbers. Prints
process-time medians.

    python benchmarks/decode_floor.py /tmp/bench/h200-big.json --mb 150 --runs 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from traceview.read import decode

_HEAD: list[tuple[str, Any, Any]] = [
    ("ph", str, ""),
    ("cat", str, ""),
    ("name", str, ""),
    ("pid", int | str | None, None),
    ("tid", int | str | None, None),
]
_NUMBERS = [("ts", float | int | None, None), ("dur", float | int | None, None)]
_RAW_NUMBERS = [("ts", msgspec.Raw, decode.RAW_NULL), ("dur", msgspec.Raw, decode.RAW_NULL)]


class Nov23Args(msgspec.Struct, gc=False):
    correlation: int | None = None
    device: int | str | None = None
    stream: int | str | None = None


def _event(args: Any, exact: bool) -> Any:
    fields = [*_HEAD, *(_RAW_NUMBERS if exact else _NUMBERS)]
    fields += [] if args is None else [("args", args, None)]
    return msgspec.defstruct("Event", fields, gc=False)


def _span(path: Path, size: int) -> bytes:
    """The complete events of the first ``size`` bytes, as one JSON array."""
    with path.open("rb") as f:
        data = f.read(size)
    start = data.index(b"[", data.index(b'"traceEvents"'))
    end = data.rindex(b"}", 0, data.rindex(b"{"))  # the last event that is whole
    return data[start : end + 1] + b"]"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("trace", type=Path, help="a plain-JSON kineto trace")
    p.add_argument("--mb", type=int, default=150, help="how much of its start to decode")
    p.add_argument("--runs", type=int, default=5)
    args = p.parse_args()
    span = _span(args.trace, args.mb << 20)
    exact = decode._EXACT_TS.search(span) is not None  # as the reader decides, per span
    decoders = {
        "traceview, plain args": decode._decoder(exact, decode.PLAIN, False),
        "traceview, + allocator": decode._decoder(exact, decode.MEMORY, False),
    }
    for name, struct in [
        ("Nov 23 args (3 fields)", Nov23Args),
        ("args as msgspec.Raw", msgspec.Raw),
        ("no args (the floor)", None),
    ]:
        decoders[name] = msgspec.json.Decoder(list[_event(struct, exact)])  # type: ignore[misc]
    times: dict[str, list[float]] = {name: [] for name in decoders}
    for _ in range(args.runs):  # alternated, so that load falls on each alike
        for name, decoder in decoders.items():
            start = time.process_time()
            events = decoder.decode(span)
            times[name].append(time.process_time() - start)
            del events
    mb, count = len(span) / 1e6, len(decoders["no args (the floor)"].decode(span))
    kind = "exact ts/dur (raw text)" if exact else "ts/dur as numbers"
    print(f"{args.trace.name}: {mb:.0f} MB, {count} events, {kind}")
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"  {name:<24} {median:6.3f} s  {mb / median:5.0f} MB/s per core")
    return 0


if __name__ == "__main__":
    sys.exit(main())

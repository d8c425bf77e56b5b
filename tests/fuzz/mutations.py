"""Both readers on many damaged inputs: the compiled scanner (traceview._core) and the Python
reader must accept and reject the same chunks and files with the same columns, counts and
errors (tests/real/test_reader_mutations.py runs a few thousand of these in the suite).

    .venv/bin/python tests/fuzz/mutations.py [--cases 100000] [--seed 43]

A quarter of the chunk cases damage one value inside ``args`` (reader_paths.args_damage: bad
numbers, broken escapes, control characters, invalid UTF-8). Prints how many cases ran, how
many the scanner itself converted, refused (Python path) or both rejected as errors, and
every mismatch (exit status 1 if any).
"""

from __future__ import annotations

import argparse
import gzip
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conftest import SHARED_TRACES
from reader_paths import (
    args_damage,
    both_chunk_reads,
    both_reads,
    differences,
    mutations,
    seed_chunks,
    small_trace,
)

from traceview import _core
from traceview.columns.collect import scan_rule
from traceview.read.decode import needs_exact

SEEDS = [
    "hta__trace_compare__base__base.json.gz",
    "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.json.gz",
    "kineto__resnet50_profiler_api_nw0.json.gz",
    "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "tracelens__inference__vllm_decode_full__graph_execution.json.gz",
    "hta__mtia_inference_trace__mtia_inference_rank_0.json.gz",
    "h200/train.json.gz",
    "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz",  # python frames
]
FILE_SHARE = 20  # one case in this many is a whole damaged file (slower: a file each)
ARGS_SHARE = 4  # one chunk case in this many is one args value damaged (reader_paths.args_damage)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=43)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    texts = {n: gzip.decompress((SHARED_TRACES / n).read_bytes()) for n in SEEDS}
    chunks = [
        (chunk, needs_exact(text[: 1 << 20]))
        for text in texts.values()
        for chunk in seed_chunks(text, size=6)[:40]
    ]
    traces = [small_trace(text, keep=10) for text in texts.values()]
    # A file of its own: another run (same seed) writing the same name races with this one.
    scratch = tempfile.TemporaryDirectory(prefix="traceview-fuzz-")
    path = Path(scratch.name) / "damaged.json"
    counts = {"cases": 0, "scanned": 0, "refused": 0, "rejected": 0, "mismatches": 0}
    scan = _core.scan_chunk
    started = time.monotonic()
    try:
        while counts["cases"] < args.cases:
            n = counts["cases"]
            if n % FILE_SHARE == 0:
                damaged = mutations(rng.choice(traces), 1, rng)[0]
                path.write_bytes(damaged)
                keep = {"keep_cpu": n % 2 == 0, "frames": n % 5 == 0}
                compiled, python = both_reads(path, partial=n % 3 == 0, **keep)
            else:
                seed, exact = rng.choice(chunks)
                aimed = args_damage(seed) if n % ARGS_SHARE == 1 else []
                damaged = rng.choice(aimed) if aimed else mutations(seed, 1, rng)[0]
                keep_cpu, keep_frames = n % 2 == 0, n % 3 == 0
                rule = scan_rule(keep_cpu or keep_frames)
                result = scan(damaged, exact, keep_cpu or keep_frames, rule, keep_frames)
                counts["refused" if "refused" in result else "scanned"] += 1
                compiled, python = both_chunk_reads(damaged, exact, keep_cpu, keep_frames)
            counts["rejected"] += isinstance(python, str)
            if differences(compiled, python):
                counts["mismatches"] += 1
                why = differences(compiled, python)
                print(f"MISMATCH case {n}: {why!r:.300} in {damaged[:300]!r}", flush=True)
            counts["cases"] += 1
            if counts["cases"] % 10_000 == 0:
                print(counts, f"{time.monotonic() - started:.0f} s", flush=True)
    finally:
        scratch.cleanup()
    print("done", counts, f"{time.monotonic() - started:.0f} s")
    return 1 if counts["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())

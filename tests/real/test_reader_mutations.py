"""Damaged traces through both readers: the compiled one (traceview._core) and the Python one
accept and reject the same inputs, with the same columns, counts and errors. Cuts at every
offset of a small real trace; flipped, inserted and deleted bytes (some inside the ``args``
values the scanner skips) in chunks of real traces and in whole files. tests/fuzz/mutations.py
runs the same comparisons at a larger scale."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest
from conftest import SHARED_TRACES
from reader_paths import (
    COMPILED,
    both_chunk_reads,
    both_reads,
    differences,
    mutations,
    seed_chunks,
    small_trace,
)

from traceview.read.decode import needs_exact

pytestmark = [
    pytest.mark.skipif(not COMPILED, reason="the compiled core is not installed"),
    pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="../shared/traces is absent"),
]
SEEDS = [
    "hta__trace_compare__base__base.json.gz",  # kineto 1.x, µs integers
    "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.json.gz",  # ns fractions, epoch
    "kineto__resnet50_profiler_api_nw0.json.gz",  # 2021 kineto, float µs
    "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",  # ROCm
    "tracelens__h100__gaunernst_bert-small-uncased__1016001.json.gz",  # python frames
]


def _text(name: str) -> bytes:
    return gzip.decompress((SHARED_TRACES / name).read_bytes())


def test_cuts_at_every_offset(tmp_path: Path) -> None:
    trace = small_trace(_text(SEEDS[0]))
    path = tmp_path / "cut.json"
    accepted = 0
    for cut in range(1, len(trace)):
        path.write_bytes(trace[:cut])
        keep = {"keep_cpu": cut % 2 == 0, "keep_frames": cut % 5 == 0}
        compiled, python = both_reads(path, partial=cut % 3 != 0, **keep)
        assert not differences(compiled, python), cut
        accepted += not isinstance(compiled, str)
    assert accepted > len(trace) // 4  # --partial reads the events a cut leaves


@pytest.mark.parametrize("name", SEEDS, ids=lambda n: n.split("__")[1])
def test_mutated_chunks(name: str) -> None:
    text = _text(name)
    chunks = seed_chunks(text, size=12)[:6]
    exact = needs_exact(text[: 1 << 20])
    rng = random.Random(name)
    cases = [m for chunk in chunks for m in mutations(chunk, 80, rng)]
    assert len(cases) >= 240
    refused_or_failed = 0
    for n, chunk in enumerate(cases):
        compiled, python = both_chunk_reads(chunk, exact, n % 2 == 0, keep_frames=n % 3 == 0)
        assert not differences(compiled, python), (n, chunk)
        refused_or_failed += isinstance(compiled, str)
    assert refused_or_failed  # damage that is an error is among them


def test_mutated_files(tmp_path: Path) -> None:
    rng = random.Random(43)
    path = tmp_path / "damaged.json"
    for name in SEEDS:
        trace = small_trace(_text(name), keep=10)
        for n, damaged in enumerate(mutations(trace, 75, rng)):
            path.write_bytes(damaged)
            keep = {"keep_cpu": n % 2 == 1, "keep_frames": n % 3 == 0}
            compiled, python = both_reads(path, partial=n % 4 == 0, **keep)
            assert not differences(compiled, python), (name, n)

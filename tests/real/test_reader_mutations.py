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
    args_damage,
    both_chunk_reads,
    both_reads,
    differences,
    event_spans,
    mutations,
    seed_chunks,
    small_trace,
)

from traceview import _core
from traceview.columns.collect import scan_rule
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
H200 = "h200/train.json.gz"  # kineto 2.x, torch 2.11, ns fractions


def _text(name: str) -> bytes:
    return gzip.decompress((SHARED_TRACES / name).read_bytes())


def test_cuts_at_every_offset(tmp_path: Path) -> None:
    trace = small_trace(_text(SEEDS[0]))
    path = tmp_path / "cut.json"
    accepted = 0
    for cut in range(1, len(trace)):
        path.write_bytes(trace[:cut])
        keep = {"keep_cpu": cut % 2 == 0, "frames": cut % 5 == 0}
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
            keep = {"keep_cpu": n % 2 == 1, "frames": n % 3 == 0}
            compiled, python = both_reads(path, partial=n % 4 == 0, **keep)
            assert not differences(compiled, python), (name, n)


def _compare(cases: list[bytes], exact: bool) -> dict[str, int]:
    """Each chunk through both readers (CPU rows kept in every other case): equal results
    asserted; how many the scanner converted itself, refused, and both rejected."""
    counts = {"scanned": 0, "refused": 0, "rejected": 0}
    for n, chunk in enumerate(cases):
        keep_cpu = n % 2 == 0
        refused = "refused" in _core.scan_chunk(chunk, exact, keep_cpu, scan_rule(keep_cpu))
        counts["refused" if refused else "scanned"] += 1
        compiled, python = both_chunk_reads(chunk, exact, keep_cpu)
        assert not differences(compiled, python), (n, differences(compiled, python), chunk)
        counts["rejected"] += isinstance(python, str)
    return counts


@pytest.mark.parametrize("name", [*SEEDS, H200], ids=lambda n: n.split("__")[1] if "__" in n else n)
def test_damage_inside_args_values(name: str) -> None:
    """Each number and string inside the args of GPU activities, runtime calls and the rest
    (the values the scanner skips unread, and those it converts) damaged in turn: bad or odd
    numbers (exponents, overflow, leading zeros, NaN), broken or unpaired \\u escapes, raw
    control characters and invalid UTF-8 in strings."""
    text = _text(name)
    exact = needs_exact(text[: 1 << 20])
    chunks = seed_chunks(text, size=4)[:3]
    rng = random.Random(name)
    cases = [case for chunk in chunks for case in args_damage(chunk)]
    cases = rng.sample(cases, min(len(cases), 400))
    counts = _compare(cases, exact)
    # Damage the scanner takes itself (valid JSON), refuses, and both reject, among them.
    assert counts["scanned"] and counts["refused"] and counts["rejected"], counts


def test_deleted_and_inserted_bytes_at_every_offset() -> None:
    """A kernel, a runtime call and a CPU op of a modern trace: each byte deleted in turn, and
    at each offset a byte of JSON's own (or a control character) inserted."""
    text = _text(H200)
    spans = event_spans(text)
    picked = []
    for needle in (b'"cat": "kernel"', b'"cat": "cuda_runtime"', b'"cat": "cpu_op"'):
        picked.append(next(s for s in spans if needle in text[s[0] : s[1]]))
    chunk = b",\n  ".join(text[a:b] for a, b in sorted(picked))
    tokens = [
        b'"',
        b",",
        b"}",
        b"{",
        b"]",
        b":",
        b"\\",
        b"0",
        b"-",
        b".",
        b"e",
        b" ",
        b"\x00",
        b"\xff",
    ]
    cases = [chunk[:i] + chunk[i + 1 :] for i in range(len(chunk))]
    cases += [chunk[:i] + tokens[i % len(tokens)] + chunk[i:] for i in range(len(chunk) + 1)]
    counts = _compare(cases, exact=needs_exact(text[: 1 << 20]))
    assert counts["scanned"] > len(chunk) // 4 and counts["rejected"], counts


@pytest.mark.parametrize("number", ["1e400", "-1.5e309", "1" + "0" * 400 + ".5"])
def test_a_float_out_of_range_in_a_skipped_value_reads_alike(number: str) -> None:
    """msgspec rejects a float past f64's range, so the Python reader decodes that whole chunk
    the slow way (which writes the shape texts compactly): the scanner hands it over too,
    even where the number is only skipped (a runtime call's grid). Found by
    tests/fuzz/mutations.py (case 42633 of seed 43)."""
    events = [
        '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.5,'
        ' "dur": 2, "args": {"Input Dims": [[128, 128], []], "Input type": ["float", ""]}}',
        '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,'
        f' "ts": 2.5, "dur": 1, "args": {{"correlation": 7, "grid": [{number}, 1, 1]}}}}',
    ]
    chunk = ", ".join(events).encode()
    for keep_cpu, frames in ((True, False), (True, True), (False, False)):
        compiled, python = both_chunk_reads(chunk, False, keep_cpu, frames)
        assert not differences(compiled, python), (keep_cpu, frames)


COMM_SEEDS = [
    "hta__nccl_parser_config__nccl_data.json.gz",  # record_param_comms ops and NCCL kernels
    "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.json.gz",
]


def _comm_chunks(text: bytes, each: int = 2) -> list[bytes]:
    """Chunks of five events around the first ``each`` CPU ops and the first ``each``
    kernels carrying a collective's metadata (and the runtime calls beside them)."""
    spans = event_spans(text)
    carrying = [i for i, (a, b) in enumerate(spans) if b'"Collective name"' in text[a:b]]
    picked: list[int] = []
    for cat in (b'"cpu_op"', b'"kernel"'):
        picked += [i for i in carrying if cat in text[spans[i][0] : spans[i][1]]][:each]
    assert picked, "the seed has events carrying a collective's metadata"
    return [text[spans[max(i - 2, 0)][0] : spans[min(i + 2, len(spans) - 1)][1]] for i in picked]


def test_a_triton_op_s_grid_text() -> None:
    """torch.compile <= 2.4 wrote ``"grid": "grid(100,)"`` on each Triton ``cpu_op``: a text
    the decoder surely takes, so such a chunk is scanned (a launch field of any other kind on
    a CPU row sends it to the Python path); with each args value damaged, both read alike."""
    text = _text("hta__triton_example__triton_example.json.gz")
    spans = event_spans(text)
    at = next(i for i, (a, b) in enumerate(spans) if b'"grid": "grid(' in text[a:b])
    chunk = text[spans[max(at - 2, 0)][0] : spans[min(at + 2, len(spans) - 1)][1]]
    exact = needs_exact(text[: 1 << 20])
    assert "refused" not in _core.scan_chunk(chunk, exact, True, scan_rule(True))
    listed = chunk.replace(b'"grid": "grid(100,)"', b'"grid": [100, 1, 1]')
    assert "refused" in _core.scan_chunk(listed, exact, True, scan_rule(True))
    counts = _compare([chunk, listed, *args_damage(chunk)], exact)
    assert counts["scanned"] and counts["refused"] and counts["rejected"], counts


@pytest.mark.parametrize("name", COMM_SEEDS, ids=lambda n: n.split("__")[1])
def test_collective_metadata_chunks(name: str) -> None:
    """A chunk holding a collective's metadata is scanned (its carrying rows' args decoded
    on the Python side), and reads as the Python path reads it: as it is, with each args
    value damaged in turn, and with bytes flipped, inserted and deleted."""
    text = _text(name)
    exact = needs_exact(text[: 1 << 20])
    chunks = _comm_chunks(text)
    for keep_cpu in (False, True):
        for chunk in chunks:
            assert "refused" not in _core.scan_chunk(chunk, exact, keep_cpu, scan_rule(keep_cpu))
            compiled, python = both_chunk_reads(chunk, exact, keep_cpu)
            assert not isinstance(compiled, str) and not differences(compiled, python)
            assert compiled["comms"]["key"][1][0] >= 1  # the carrying row of the five
    rng = random.Random(name)
    cases = [case for chunk in chunks for case in args_damage(chunk)]
    cases = rng.sample(cases, min(len(cases), 500))
    cases += [m for chunk in chunks for m in mutations(chunk, 40, rng)]
    counts = _compare(cases, exact)
    assert counts["scanned"] and counts["refused"] and counts["rejected"], counts

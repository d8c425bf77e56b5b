"""Fuzzing: mutated real traces never raise anything but TraceviewError.

Bounded for CI: a fixed number of hypothesis examples over a few small seed traces.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from conftest import ROOT, SHARED_TRACES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traceview.analyses.core.steps import step_table
from traceview.analyses.gaps import GapOptions, analyse_gaps
from traceview.analyses.kernels import KernelOptions, analyse_kernels
from traceview.columns.parallel import collect_events
from traceview.errors import DATA_ERROR, TraceviewError
from traceview.read.reader import TraceReader

SEED_NAMES = [
    "hta__trace_compare__base__base.json.gz",
    "kineto__docs_after_fix_trace.json.gz",
    "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
]
TOKENS = [b"{", b"}", b"[", b"]", b'"', b"\\", b",", b":", b"\n", b"NaN", b"-inf", b"\xff",
          b"\\ud800", b"99999999999999999999999", b"null", b'"ts": "x"', b"},{", b"1e400",
          b"1e999999999", b"-99999999999999999", b"123456789012345678901234567890.5"]  # fmt: skip


def seeds() -> list[bytes]:
    found = [
        gzip.decompress(p.read_bytes()) for n in SEED_NAMES if (p := SHARED_TRACES / n).exists()
    ]
    found += [p.read_bytes() for p in sorted((ROOT / "fixtures" / "edge").glob("*.json"))[:6]]
    return found


SEEDS = seeds()
mutation = st.tuples(
    st.sampled_from(["flip", "delete", "insert", "truncate", "duplicate"]),
    st.floats(0, 1),
    st.integers(1, 64),
    st.sampled_from(TOKENS),
)


def mutate(data: bytes, steps: list[tuple[str, float, int, bytes]]) -> bytes:
    for kind, where, size, token in steps:
        at = int(where * len(data))
        if kind == "flip" and data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([data[at] ^ (1 << (size % 8))]) + data[at + 1 :]
        elif kind == "delete":
            data = data[:at] + data[at + size :]
        elif kind == "insert":
            data = data[:at] + token + data[at:]
        elif kind == "truncate":
            data = data[:at]
        else:
            data = data[:at] + data[at : at + size] + data[at:]
    return data


def analyse(path: Path, partial: bool) -> None:
    events = collect_events(TraceReader(path, partial=partial, block_size=512), keep_cpu=True)
    analyse_kernels(events, KernelOptions(top=0))
    analyse_gaps(events, GapOptions())
    step_table(events)


@pytest.mark.skipif(not SEEDS, reason="no seed traces")
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.sampled_from(range(len(SEEDS))) if SEEDS else st.just(0),
    steps=st.lists(mutation, min_size=1, max_size=4),
    compress=st.sampled_from(["plain", "gzip", "gzip-then-mutate"]),
    partial=st.booleans(),
)
def test_mutated_traces_fail_only_with_traceview_errors(
    tmp_path: Path, seed: int, steps: list, compress: str, partial: bool
) -> None:
    data = SEEDS[seed]
    if compress == "plain":
        data = mutate(data, steps)
    elif compress == "gzip":
        data = gzip.compress(mutate(data, steps), mtime=0)
    else:
        data = mutate(gzip.compress(data, mtime=0), steps)
    path = tmp_path / "fuzz.json"
    path.write_bytes(data)
    try:
        analyse(path, partial)
    except TraceviewError as e:
        # Bad data, never a usage error; the one line names the file it is about.
        assert e.exit_code == DATA_ERROR, e.message
        assert e.message.startswith(f"{path}: "), e.message

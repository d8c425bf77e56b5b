"""Each point's innermost and outermost containing op (analyses.core.oplinks._find_ops)
against brute force, on random CPU rows in blocks of every size: ops in start order (the
sweep), out of it (the merge), ties on start, end and name, instants, many threads, points
before and after every op."""

from __future__ import annotations

import numpy as np
import pytest

from traceview.analyses.core import oplinks
from traceview.columns.cpu_rows import NO_SHAPE, OP, ArrayRows, CpuRows, rows


def _case(seed: int, n: int, in_order: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CPU rows on a few threads (a few runtime calls among the ops), points on them."""
    rng = np.random.default_rng(seed)
    threads = 1 + seed % 6
    thread = rng.integers(0, threads, n).astype(np.int32)
    ts = np.sort(rng.integers(0, 8 * n, n)).astype(np.int64)
    end = ts + rng.integers(0, 40, n)
    end[:: max(n // 5, 1)] += 4 * n  # long ops over many later ones
    end[::9] = ts[::9]  # instants
    ts[1::7] = ts[::7][: len(ts[1::7])]  # ties on start
    end[1::7] = np.maximum(end[1::7], ts[1::7])
    order = np.arange(n) if in_order else rng.permutation(n)
    correlation = np.where(rng.random(n) < 0.1, rng.integers(1, 99, n), OP).astype(np.int64)
    table = rows(
        thread=thread[order],
        name=rng.integers(0, 4, n).astype(np.int32),
        ts=ts[order],
        end=end[order],
        correlation=correlation,
        shape=rng.integers(-1, 4, n).astype(np.int32),
    )
    m = n // 2
    point_thread = rng.integers(-1, threads + 1, m).astype(np.int32)
    point_time = rng.integers(-5, 8 * n + 50, m).astype(np.int64)
    return table, point_thread, point_time


def _brute(
    table: np.ndarray, rank: np.ndarray, thread: np.ndarray, time: np.ndarray, inner: bool
) -> list[tuple[int, int]]:
    out = []
    ops = [(i, r) for i, r in enumerate(table.tolist()) if r[4] == OP]
    for t, p in zip(thread.tolist(), time.tolist(), strict=True):
        held = [(i, r) for i, r in ops if r[0] == t and r[2] <= p <= r[3]]
        if not held:
            out.append((oplinks.NO_OP, NO_SHAPE))
            continue
        if inner:  # largest ts, smallest dur, smallest name, first in the file
            key = min(held, key=lambda e: (-e[1][2], e[1][3] - e[1][2], rank[e[1][1]], e[0]))
        else:  # smallest ts, largest dur, smallest name, first in the file
            key = min(held, key=lambda e: (e[1][2], e[1][2] - e[1][3], rank[e[1][1]], e[0]))
        out.append((key[1][1], key[1][5]))
    return out


@pytest.mark.parametrize("in_order", [True, False])
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("size", [1, 3, 16, 1 << 16])
def test_innermost_and_outermost_are_the_brute_forces(seed: int, size: int, in_order: bool) -> None:
    table, thread, time = _case(seed, 240, in_order)
    rank = np.array([2, 0, 3, 1])
    cpu = CpuRows(tuple(ArrayRows(table[i : i + size]) for i in range(0, len(table), size)))
    m = len(time)
    inner = (np.full(m, oplinks.NO_OP), np.full(m, NO_SHAPE))
    outer = (np.full(m, oplinks.NO_OP), np.full(m, NO_SHAPE))
    oplinks._find_ops(cpu, None, rank, oplinks._Points(thread, time), inner, outer)
    for found, want in ((inner, True), (outer, False)):
        got = list(zip(found[0].tolist(), found[1].tolist(), strict=True))
        assert got == _brute(table, rank, thread, time, want), want


def test_the_merge_and_many_threads_answer_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ops carried past the bound and more threads than one mask each: the merge and the
    grouping by one sort give the sweep's answers."""
    table, thread, time = _case(5, 300, True)
    rank = np.array([0, 1, 2, 3])
    cpu = CpuRows(tuple(ArrayRows(table[i : i + 16]) for i in range(0, len(table), 16)))
    m = len(time)
    answers = []
    for carried, few in ((1 << 16, 4), (1, 4), (1 << 16, 0), (0, 0)):
        monkeypatch.setattr(oplinks, "_CARRIED", carried)
        monkeypatch.setattr(oplinks, "_FEW_THREADS", few)
        inner = (np.full(m, oplinks.NO_OP), np.full(m, NO_SHAPE))
        oplinks._find_ops(cpu, None, rank, oplinks._Points(thread, time), inner, None)
        answers.append(inner[0].tolist())
    assert answers[1:] == answers[:1] * 3
    assert answers[0] == [name for name, _ in _brute(table, rank, thread, time, True)]

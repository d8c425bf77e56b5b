"""The progress bar counts decompressed bytes of a gzip trace, and a read in two processes moves
from the start rather than jumping to the middle where the main process begins."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from conftest import load_generator

from traceview.columns.parallel import collect_events
from traceview.read.reader import TraceReader

generate = load_generator()


def _progress(path: Path, parallel: bool, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every (done, total) the reader reported; asserts the read was split when asked."""
    monkeypatch.setenv("TRACEVIEW_PARALLEL_MIN_BYTES", "1" if parallel else str(1 << 60))
    monkeypatch.setenv("TRACEVIEW_SPLIT", "fork")  # a big gzip trace is read on threads else
    calls: list[tuple[int, int]] = []
    reader = TraceReader(path, block_size=64 << 10, on_progress=lambda *a: calls.append(a))
    events = collect_events(reader)
    assert (events.read.resume_at is not None) == parallel
    return calls


def _trace(tmp_path: Path, compressed: bool) -> tuple[Path, int]:
    plain = tmp_path / "t.json"
    generate.write_trace(plain, steps=8, seed=5, layout="kineto")
    size = plain.stat().st_size
    if not compressed:
        return plain, size
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(plain.read_bytes()))
    return path, size


def test_gzip_progress_counts_decompressed_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, size = _trace(tmp_path, compressed=True)
    calls = _progress(path, False, monkeypatch)
    assert path.stat().st_size * 3 < size  # the bar would be 3× too slow in file bytes
    done, total = calls[-1]
    assert done == total and abs(total - size) <= size // 100
    assert all(d <= t for d, t in calls)


@pytest.mark.parametrize("compressed", [False, True])
def test_parallel_read_starts_at_zero_and_grows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compressed: bool
) -> None:
    path, _ = _trace(tmp_path, compressed)
    calls = _progress(path, True, monkeypatch)
    fractions = [d / t for d, t in calls]
    # The main process begins at the middle (old bar: 50% at once); here its first report
    # comes after the 1 MB it searches for a boundary, a lot of this small trace.
    assert fractions[0] < 0.45
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


def test_the_bar_keeps_its_speed_while_the_estimate_drifts(monkeypatch: pytest.MonkeyPatch) -> None:
    """rich resets a task's speed samples whenever its total changes: a gzip estimate that
    moves by 0.1% at each update must not (the bar showed ``?`` for the speed all along)."""
    from traceview.render import output

    monkeypatch.setattr(output.sys.stderr, "isatty", lambda: True)
    clock = iter(range(1, 100))
    monkeypatch.setattr(output.time, "monotonic", lambda: float(next(clock)))
    bar = output.ByteProgress(None, enabled=True)
    with bar as update:
        for i in range(1, 6):
            update(i * 100_000, 1_000_000 + i * 1000)
        assert bar._progress is not None and bar._task is not None
        task = bar._progress.tasks[0]
        assert task.total == 1_001_000 and task.completed == 500_000
        assert len(task._progress) == 5  # all the samples the speed is estimated from

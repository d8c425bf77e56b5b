"""``source`` on small made-up traces: the definitions (self, total, recursion, calls,
backward through flows) and hostile frames (parent id cycles, missing parents, overlaps,
10^6 frames, markup in names): a note, never a crash or a quadratic walk."""

from __future__ import annotations

import gc
import json
import random
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from traceview.analyses import source_tables
from traceview.analyses.core import stacks as stacks_module
from traceview.analyses.core.devices import NO_LAUNCH
from traceview.analyses.core.stacks import NO_FRAME, build_stacks, innermost
from traceview.analyses.source import (
    NO_LAUNCH_FOUND,
    OUTSIDE,
    SourceOptions,
    SourceReport,
    analyse_source,
)
from traceview.analyses.source_tables import MAX_PATH, instance_times, module_rows
from traceview.app.reading import read_trace
from traceview.options import ReadOptions

US = 1000  # ns


def frame(
    name: str, ts: float, dur: float, pid: int = 1, tid: int = 1, **args: Any
) -> dict[str, Any]:
    return {"ph": "X", "cat": "python_function", "name": name, "pid": pid, "tid": tid,
            "ts": ts, "dur": dur, "args": args}  # fmt: skip


def launch(corr: int, ts: float, tid: int = 1) -> dict[str, Any]:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid,
            "ts": ts, "dur": 0.5, "args": {"correlation": corr}}  # fmt: skip


def kernel(corr: int, dur: float, name: str = "k", ts: float = 1000) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts + corr,
            "dur": dur, "args": {"correlation": corr, "device": 0, "stream": 7}}  # fmt: skip


def analysed(tmp_path: Path, events: list[dict[str, Any]], stacks: bool = True) -> SourceReport:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    read = read_trace(path, ReadOptions(cache=False, quiet=True), frames=True, remember=False)
    return analyse_source(read, SourceOptions(stacks=stacks))


def _by_frame(report: SourceReport) -> dict[str, tuple[int, int, int, int]]:
    return {r.frame: (r.self_ns, r.total_ns, r.kernels, r.calls) for r in report.frames}


def test_self_total_recursion_and_calls(tmp_path: Path) -> None:
    events = [
        frame("a.py(1): main", 0, 100),
        frame("a.py(5): rec", 10, 80),
        frame("a.py(5): rec", 20, 30),  # recursion: counted once in total
        frame("a.py(9): leaf", 25, 5),
        frame("a.py(9): leaf", 60, 5),  # a second call, no kernel
        launch(1, 26), kernel(1, 7),  # in leaf
        launch(2, 40), kernel(2, 11),  # in the inner rec
        launch(3, 90), kernel(3, 13),  # in main, after rec
        launch(4, 150), kernel(4, 17),  # outside every frame
        kernel(5, 19),  # no launch in the trace
    ]  # fmt: skip
    report = analysed(tmp_path, events)
    assert _by_frame(report) == {
        "a.py(1): main": (13 * US, 31 * US, 3, 1),
        "a.py(5): rec": (11 * US, 18 * US, 2, 2),
        "a.py(9): leaf": (7 * US, 7 * US, 1, 2),
    }
    assert report.kernel_ns == 67 * US and report.attributed_ns == 31 * US
    assert report.unattributed == {OUTSIDE: 17 * US, NO_LAUNCH_FOUND: 19 * US}
    folded = {line.frames: line.ns for line in report.stacks}
    assert folded[("a.py(1): main", "a.py(5): rec", "a.py(5): rec", "a.py(9): leaf", "k")] == 7 * US
    assert folded[(f"[{OUTSIDE}]", "k")] == 17 * US


def test_a_launch_at_a_frame_end_is_outside_it(tmp_path: Path) -> None:
    events = [frame("f.py(1): f", 0, 10), frame("f.py(2): g", 10, 10), launch(1, 10), kernel(1, 3)]
    assert _by_frame(analysed(tmp_path, events))["f.py(2): g"][:2] == (3 * US, 3 * US)


def test_backward_kernels_follow_the_flow_to_the_forward_stack(tmp_path: Path) -> None:
    fwd, bwd = 1, 2  # threads
    events = [
        frame("m.py(1): step", 0, 100, tid=fwd),
        frame("nn.Module: Net_0", 1, 50, tid=fwd),
        frame("m.py(7): forward", 2, 40, tid=fwd),
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": fwd, "ts": 5, "dur": 4},
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 42, "pid": 1, "tid": fwd, "ts": 5},
        launch(1, 6, fwd), kernel(1, 10),
        {"ph": "X", "cat": "cpu_op", "name": "MmBackward0", "pid": 1, "tid": bwd, "ts": 200,
         "dur": 20},
        {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 42, "pid": 1, "tid": bwd, "ts": 200,
         "bp": "e"},
        launch(2, 205, bwd), kernel(2, 30),
        launch(3, 230, bwd), kernel(3, 5),  # after the backward op: no flow holds it
    ]  # fmt: skip
    report = analysed(tmp_path, events)
    forward = {r.frame: (r.self_ns, r.total_ns, r.backward_ns) for r in report.frames}
    assert forward["m.py(7): forward"] == (40 * US, 40 * US, 30 * US)
    assert forward["m.py(1): step"] == (0, 40 * US, 30 * US)
    assert [(m.path, m.forward_ns, m.backward_ns) for m in report.modules] == [
        ("Net_0", 10 * US, 30 * US)
    ]
    assert report.backward_ns == 30 * US and report.unattributed == {OUTSIDE: 5 * US}
    assert ("m.py(1): step", "nn.Module: Net_0", "m.py(7): forward", "[backward]", "k") in {
        line.frames for line in report.stacks
    }


def test_parent_id_cycles_and_missing_parents_only_make_a_note(tmp_path: Path) -> None:
    events = [
        frame("c.py(1): a", 0, 100, **{"Python id": 1, "Python parent id": 2}),
        frame("c.py(2): b", 10, 50, **{"Python id": 2, "Python parent id": 1}),
        frame("c.py(3): c", 20, 10, **{"Python id": 3, "Python parent id": 3}),  # itself
        frame("c.py(4): d", 70, 10, **{"Python id": 4, "Python parent id": 99}),  # missing
        frame("c.py(5): e", 71, 5, **{"Python id": "x", "Python parent id": [1]}),  # junk
        launch(1, 25), kernel(1, 3),
        launch(2, 72), kernel(2, 4),
    ]  # fmt: skip
    report = analysed(tmp_path, events)
    assert _by_frame(report)["c.py(3): c"] == (3 * US, 3 * US, 1, 1)
    assert _by_frame(report)["c.py(1): a"][1] == 7 * US
    assert len(report.notes) == 1 and "'Python parent id'" in report.notes[0]
    assert report.notes[0].startswith("2 python frames")  # a's parent is b; c names itself


def test_frames_overlapping_without_nesting_are_cut_and_noted(tmp_path: Path) -> None:
    events = [
        frame("o.py(1): a", 0, 10),
        frame("o.py(2): b", 5, 10),  # starts inside a, ends after it
        launch(1, 7), kernel(1, 3),
        launch(2, 12), kernel(2, 4),  # in b's part beyond a: cut away
    ]  # fmt: skip
    report = analysed(tmp_path, events)
    assert report.notes[0].startswith("1 python frames overlap another without nesting")
    assert _by_frame(report)["o.py(2): b"][:2] == (3 * US, 3 * US)
    assert sum(r.self_ns for r in report.frames) + report.unattributed_ns == report.kernel_ns


def test_names_with_markup_stay_data(tmp_path: Path) -> None:
    from traceview.render.source import folded

    name = "[bold red]x[/bold red] <script>; evil\nline"
    events = [frame(name, 0, 10), launch(1, 2), kernel(1, 3, name="k;[b]")]
    report = analysed(tmp_path, events)
    assert report.frames[0].frame == name
    assert list(folded(report)) == [
        r"[bold red]x[/bold red] <script>, evil\nline;k,[b] 3000" + "\n"
    ]


def _chain(n: int) -> tuple[np.ndarray, ...]:
    """n frames each inside the one before (the deepest stack), on one thread."""
    ts = np.arange(n, dtype=np.int64)
    return np.zeros(n, np.int64), ts % 7, ts, 2 * n - ts


def test_a_million_nested_frames_in_linear_time() -> None:
    def run(n: int) -> float:
        thread, name, ts, end = _chain(n)
        start = time.process_time()
        stacks = build_stacks(thread, name, ts, end)
        at = innermost(
            stacks, np.zeros(1000, np.int64), np.arange(1000, dtype=np.int64) * (n // 1000)
        )
        times = instance_times(stacks, np.arange(n), np.zeros(n, bool), np.ones(n, np.int64))
        times.totals(np.arange(n))
        assert (at != NO_FRAME).all() and stacks.depth[-1] == n - 1
        return time.process_time() - start

    run(1000)  # warm
    gc.collect()
    gc.disable()  # its passes scale with every object alive, not with the work measured
    try:
        # in turns, the least of three each: a burst of other work (other test workers on
        # the cores and their caches) falls on both sizes, and on one run of three at most
        pairs = [(run(250_000), run(1_000_000)) for _ in range(3)]
        small, big = min(p[0] for p in pairs), min(p[1] for p in pairs)
    finally:
        gc.enable()
    # 4x the frames: at most 2.83² = 8x the time (test_linear_time's bound twice), not 16x
    assert big < 8 * small


def test_deep_module_paths_are_capped() -> None:
    n = 10_000
    thread, name, ts, end = _chain(n)
    names = [f"nn.Module: M_{i}" for i in range(7)]
    stacks = build_stacks(thread, name, ts, end)
    times = instance_times(stacks, np.arange(n), np.zeros(n, bool), np.ones(n, np.int64))
    rows = module_rows(stacks, names, times)
    assert max(r.path.count("/") for r in rows) <= MAX_PATH
    assert any(r.path.startswith("…/") for r in rows)


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_trace_without_frames_says_how_to_record_them(tmp_path: Path, fmt: str) -> None:
    from conftest import run_cli

    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": [launch(1, 2), kernel(1, 3)]}))
    r = run_cli("source", str(path), "--no-cache", "-f", fmt)
    assert r.returncode == 0, r.stderr
    if fmt == "table":
        assert r.stdout.count("\n") == 1 and "with_stack=True" in r.stdout
        assert "traceview record --stack" in r.stdout
    else:
        data = json.loads(r.stdout)
        assert data["totals"]["unattributed_us"] == data["totals"]["kernel_time_us"] == 3.0
        assert data["frames"] == [] and data["modules"] == [] and not data["has_stacks"]


def _random_frames(rng: random.Random, nested: bool) -> tuple[np.ndarray, ...]:
    """Frames on three threads with few names: nested ones (children inside their parent,
    touching its ends, of no length, equal windows), else any windows (most overlap)."""
    rows: list[tuple[int, int, int, int]] = []

    def grow(thread: int, lo: int, hi: int, depth: int) -> None:
        at = lo
        while at <= hi and depth < 6 and rng.random() < 0.7:
            start = rng.randint(at, hi)
            end = rng.choice([start, hi, rng.randint(start, hi)])
            rows.append((thread, rng.randrange(4), start, end))
            if rng.random() < 0.2:
                rows.append((thread, rng.randrange(4), start, end))  # the same window
            grow(thread, start, end, depth + 1)
            at = end if rng.random() < 0.3 else end + 1  # the next may start at its end

    for thread in range(3):
        if nested:
            grow(thread, 0, 200, 0)
        else:
            for _ in range(rng.randrange(30)):
                start = rng.randrange(100)
                rows.append((thread, rng.randrange(4), start, start + rng.randrange(40)))
    rng.shuffle(rows)
    columns = list(zip(*rows, strict=True)) or [(), (), (), ()]
    return tuple(np.array(c, dtype=np.int64) for c in columns)


@pytest.mark.parametrize("passes", [1, 3, 1 << 20])
@pytest.mark.parametrize("nested", [True, False])
def test_vectorised_nesting_is_the_stack_walk(
    nested: bool, passes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """build_stacks nests frames that nest without its per-frame walk: every field is the
    walk's, on random nestings (and on overlapping frames, which the walk takes), with its
    searches a pass of 1, 3 or every frame at a time."""
    monkeypatch.setattr(stacks_module, "_PASS", passes)
    fast_paths = 0
    for seed in range(300):
        frames = _random_frames(random.Random(seed), nested)
        fast = build_stacks(*frames)
        fast_paths += stacks_module._nest_nested(*_preorder(*frames)) is not None
        with monkeypatch.context() as m:
            m.setattr(stacks_module, "_nest_nested", lambda *a: None)
            walk = build_stacks(*frames)
        for field in fields(walk):
            got, want = getattr(fast, field.name), getattr(walk, field.name)
            assert np.array_equal(got, want), (seed, field.name)
    assert (fast_paths >= 290) if nested else (fast_paths < 200)


def _preorder(
    thread: np.ndarray, name: np.ndarray, ts: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, ...]:
    order = stacks_module.lex_order((-end, ts, thread))
    return thread[order], name[order], ts[order], end[order]


@pytest.mark.parametrize("points", [3, 1 << 18])
@pytest.mark.parametrize("nested", [True, False])
def test_innermost_is_the_deepest_frame_holding_the_point(
    nested: bool, points: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """innermost against its definition, frame by frame: of the frames of the point's thread
    with ts ≤ point < end (cut ones as cut), the deepest; NO_FRAME when none. Points at
    every start and end, and between, on random nestings and on overlapping frames, 3 or
    all at a time."""
    monkeypatch.setattr(stacks_module, "_POINTS", points)
    for seed in range(200):
        rng = random.Random(seed)
        stacks = build_stacks(*_random_frames(rng, nested))
        times = sorted({*stacks.ts.tolist(), *stacks.end.tolist(), -1, 250})
        points = [(t, x + d) for t in range(4) for x in times for d in (-1, 0, 1)]
        points += [(-1, 5), (0, NO_LAUNCH), (2, NO_LAUNCH)]  # no thread, no launch
        thread = np.array([t for t, _ in points], dtype=np.int64)
        at = np.array([x for _, x in points], dtype=np.int64)
        want = []
        for t, x in points:
            holding = [
                f
                for f in range(len(stacks))
                if stacks.thread[f] == t and stacks.ts[f] <= x < stacks.end[f]
            ]
            want.append(max(holding, key=lambda f: stacks.depth[f]) if holding else NO_FRAME)
        assert innermost(stacks, thread, at).tolist() == want, seed


@pytest.mark.parametrize(("passes", "packed"), [(3, True), (1 << 18, True), (1 << 18, False)])
@pytest.mark.parametrize("nested", [True, False])
def test_stack_ids_by_depth_are_the_preorder_walks(
    nested: bool, passes: int, packed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each frame's stack, ids made a depth at a time (the frames put in depth order 3 or
    all at a time; each level's pairs numbered by a packed sort or by np.unique), names the
    same chain as the ids of a walk in preorder (whose numbering differs); one id per
    distinct chain."""
    monkeypatch.setattr(source_tables, "_PASS", passes)
    if not packed:
        monkeypatch.setattr(source_tables, "packed_order", lambda *_: None)
    for seed in range(200):
        stacks = build_stacks(*_random_frames(random.Random(seed), nested))
        names = [f"f{i}" for i in range(int(stacks.name.max(initial=0)) + 1)]
        by_depth = source_tables._stack_ids(stacks)
        walk = source_tables._stack_ids_in_preorder(stacks)

        assert _chains(by_depth, names) == _chains(walk, names), seed
        assert len(by_depth[1]) == len(walk[1]) == len(set(_chains(walk, names)))


def _chains(
    ids: tuple[np.ndarray, list[int], list[int]], names: list[str]
) -> list[tuple[str, ...]]:
    of, parent, name = ids
    return [source_tables._chain(int(s), parent, name, names, {}) for s in of]


@pytest.mark.parametrize("pack_bits", [0, 62])
def test_folded_groups_are_the_sorted_distinct_triples(
    pack_bits: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folded stacks' rows grouped by (stack or reason, backward mark, kernel), packed
    into one key or sorted as columns: the runs of a plain sort of the triples, rows in
    order within a run."""
    monkeypatch.setattr(source_tables, "_PACK_BITS", pack_bits)
    for seed in range(100):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(0, 40))
        key = rng.integers(-5, 6, n).astype(np.int64)
        mark = rng.random(n) < 0.5
        kernel = rng.integers(0, 4, n).astype(np.int32)
        order, heads = source_tables._grouped(key, mark, kernel)
        triples = list(zip(key.tolist(), mark.tolist(), kernel.tolist(), strict=True))
        want = sorted(range(n), key=lambda i: triples[i])
        assert order.tolist() == want, seed
        starts = [i for i in range(n) if i == 0 or triples[want[i]] != triples[want[i - 1]]]
        assert heads.tolist() == starts, seed


@pytest.mark.parametrize("passes", [1, 3, 1 << 20])
@pytest.mark.parametrize("nested", [True, False])
def test_frames_in_preorder_are_taken_as_they_are(
    nested: bool, passes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Frames already in preorder (the columns given, not copied) nest as the same frames
    shuffled do; frames are found in preorder exactly when lex_order leaves them in place
    (checked 1, 3 or all at a time)."""
    monkeypatch.setattr(stacks_module, "_PASS", passes)
    for seed in range(200):
        frames = _random_frames(random.Random(seed), nested)
        in_place = np.array_equal(
            stacks_module.lex_order((-frames[3], frames[2], frames[0])), np.arange(len(frames[0]))
        )
        assert stacks_module._in_preorder(frames[0], frames[2], frames[3]) == in_place, seed
        ordered = _preorder(*frames)
        assert stacks_module._in_preorder(ordered[0], ordered[2], ordered[3]), seed
        shuffled, given = build_stacks(*frames), build_stacks(*ordered)
        assert given.ts is ordered[2]  # not copied
        assert given.row.tolist() == list(range(len(given)))
        for field in fields(given):
            if field.name != "row":
                got, want = getattr(given, field.name), getattr(shuffled, field.name)
                assert np.array_equal(got, want), (seed, field.name)


def test_first_of_name_with_ids_too_wide_to_pack() -> None:
    """Name ids negative or too wide for a (name, position) key are made dense first: the
    same first-of-name as their dense ids give."""
    for seed in range(50):
        frames = _random_frames(random.Random(seed), True)
        stacks = build_stacks(*frames)
        wide = stacks.name.astype(np.int64) * (2**61) - 5  # negative and too wide
        assert np.array_equal(
            stacks_module._first_of_name(wide, stacks.after), stacks.first_of_name
        ), seed

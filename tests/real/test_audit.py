"""``traceview audit`` tested by construction: real traces damaged in known ways (seeded,
tests/audit_damage.py) must report exactly those counts and times, and nothing else; the
unmodified shared traces report only what is truly there (each finding checked by hand once,
pinned below), and the plain counts of tests/reference.py agree on every trace."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import audit_damage
import pytest
import reference
from conftest import ROOT, SHARED_TRACES, RealTrace, run_cli

from traceview.analyses.audit import CHECKS, FIGURES, Audit, audit
from traceview.analyses.core.step_markers import step_phases
from traceview.app.reading import read_trace
from traceview.options import ReadOptions

H200 = SHARED_TRACES / "h200"
TRAIN, GRAPHS = H200 / "train.json.gz", H200 / "graphs.json.gz"
DEMO = ROOT / "fixtures" / "demo.json.gz"  # two devices


def _audit(path: Path, partial: bool = False) -> Audit:
    """What ``traceview audit`` works out, read as the command reads (no cache)."""
    options = ReadOptions(partial=partial, quiet=True, cache=False)
    events = read_trace(path, options, keep_cpu=True, phases=True, remember=False, warn=False)
    return audit(events)


def _figures(a: Audit) -> dict[str, tuple[str, int | None]]:
    return {n: (f.trust, f.bound_ns) for n, f in a.figures.items()}


_BASE: dict[Path, Audit] = {}


def _case(source: Path, damage: str, seed: int) -> Any:
    return pytest.param(source, damage, seed, id=f"{source.name.split('.')[0]}-{damage}-{seed}")


def _base(path: Path) -> Audit:
    if path not in _BASE:
        _BASE[path] = _audit(path)
    return _BASE[path]


@pytest.mark.parametrize(
    ("source", "damage", "seed"),
    [
        _case(TRAIN, "kernels", 1),
        _case(TRAIN, "kernels", 2),
        _case(TRAIN, "launches", 3),
        _case(TRAIN, "runtime", 4),
        _case(TRAIN, "step-end", 5),
        _case(TRAIN, "step", 12),
        _case(TRAIN, "negative", 13),
        _case(TRAIN, "zero", 14),
        _case(TRAIN, "far", 15),
        _case(TRAIN, "warnings", 16),
        _case(TRAIN, "overflow", 20),
        _case(DEMO, "shift", 17),
        _case(DEMO, "kernels", 18),
        _case(DEMO, "launches", 19),
        _case(TRAIN, "shift", 6),
        _case(TRAIN, "drift", 7),
        _case(TRAIN, "tail", 8),
        _case(TRAIN, "truncate", 9),
        _case(GRAPHS, "graph", 10),
        _case(GRAPHS, "graph-first", 11),
    ],
)
def test_damage_is_reported_exactly(source: Path, damage: str, seed: int, tmp_path: Path) -> None:
    if not source.exists():
        pytest.skip(f"{source} is absent")
    damaged = tmp_path / f"{damage}.json.gz"
    expected = audit_damage.damage(source, damaged, damage, seed)
    before, after = _base(source), _audit(damaged, expected.partial)
    old = {c.id: c for c in before.checks}
    for c in after.checks:
        o = old[c.id]
        if damage == "truncate":
            break  # a cut file loses everything after the cut: only its own parts are known
        assert c.count - o.count == expected.count.get(c.id, 0), (c.id, c.count, o.count)
        want_time = expected.time_ns.get(c.id, 0)
        if want_time is not None:
            assert c.time_ns - o.time_ns == want_time, c.id
        if c.id in expected.approx_time_ns:
            want = expected.approx_time_ns[c.id]
            assert abs(c.time_ns - want) <= 0.15 * want, (c.time_ns, want)
        for step in expected.steps.get(c.id, []):
            assert step in c.steps
    found = {c.id: {p.what: p.count for p in c.parts} for c in after.checks}
    olds = {c.id: {p.what: p.count for p in c.parts} for c in before.checks}
    for check, parts in expected.parts.items():
        for what, n in parts.items():
            assert found[check][what] - olds[check].get(what, 0) == n, (check, what)
    untrusting = {"kernels", "truncate", "graph", "graph-first", "negative", "far", "overflow"}
    assert after.untrusted == (damage in untrusting)
    if damage in ("runtime", "tail", "warnings"):  # nothing a figure depends on was lost
        assert _figures(after) == _figures(before)


def test_damage_script_is_seeded(tmp_path: Path) -> None:
    if not TRAIN.exists():
        pytest.skip(f"{TRAIN} is absent")
    a = audit_damage.damage(TRAIN, tmp_path / "a.json.gz", "kernels", 11)
    b = audit_damage.damage(TRAIN, tmp_path / "b.json.gz", "kernels", 11)
    assert a == b
    assert (tmp_path / "a.json.gz").read_bytes() != b""


# Each finding on the unmodified shared traces, checked by hand once (docs/audit.md says what
# each is). A trace not listed has none.
PINNED: dict[str, dict[str, int]] = {
    # ProfilerStep#2 (49 µs) is the range open when profiling stopped: no launch in it
    "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto": {"truncated": 1},
    # kineto's ERROR line: gpuGetDeviceCount failed with code 35
    "hta__mtia_inference_trace__mtia_inference_rank_0": {"profiler-warning": 1},
    # 3 cudaMemsetAsync calls with no memset activity; Record counts: Out-of-range = 4181
    "hta__nccl_parser_config__nccl_data": {"launch-without-gpu": 3, "profiler-warning": 1},
    # 235 cudaMemsetAsync calls with no memset activity; Record counts: Out-of-range = 3829
    "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102": {
        "launch-without-gpu": 235,
        "profiler-warning": 1,
    },
    # an edited trace: 3 of 5 runtime calls kept; 4 activities after the first launched one
    # have none, 12 before it
    "hta__trace_compare__base__base": {"gpu-without-launch": 4, "launched-before-trace": 12},
    "kineto__resnet50_profiler_api_nw0": {"launched-before-trace": 733},
    # 61 before the first launched activity, 3 numbered below every call (3 µs after it)
    "param__dlrm_8rank_worker1": {"launched-before-trace": 64},
    "param__dlrm_8rank_worker3": {"launched-before-trace": 64},
    # B200: 74 bmm kernels start ~1 µs before the previous kernel on stream 7 ends
    "tracelens__b200__eager_trace": {"stream-overlap": 74},
    # 22 cudaMemsetAsync calls with no memset activity
    "tracelens__h100__gaunernst_bert-small-uncased__1016001": {"launch-without-gpu": 22},
    "tracelens__mi300__resnet_act_checkpoint": {"launched-before-trace": 968},
}
PINNED_H200 = {"train": {"launched-before-trace": 619}, "graphs": {"launched-before-trace": 26}}


def _found(a: Audit) -> dict[str, int]:
    return {c.id: c.count for c in a.found}


def test_unmodified_shared_traces(real_trace: RealTrace) -> None:
    name = real_trace.path.name.removesuffix(".json.gz")
    a = real_trace.derived("audit", lambda: audit(step_phases(real_trace.events)))
    assert _found(a) == PINNED.get(name, {})
    assert [c.id for c in a.checks if c.id in CHECKS] == [c.id for c in a.checks]


@pytest.mark.parametrize("name", ["train", "graphs", "decode", "eager", "compiled2"])
def test_unmodified_h200_traces(name: str) -> None:
    path = H200 / f"{name}.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    assert _found(_audit(path)) == PINNED_H200.get(name, {})


_LAUNCH = re.compile(r"^(?:cuda|cu|hip)\w*(?:LaunchKernel|GraphLaunch|Memcpy|Memset)\w*$")


def _plain(raw: list[dict[str, Any]]) -> tuple[int, int]:
    """Launch calls whose id no GPU activity carries; GPU activities on a stream that start
    before the latest end among earlier ones of that stream — counted event by event."""
    gpu = [e for e in raw if reference.gpu_kind(e) is not None and e.get("ph") == "X"]
    ran = {e["args"].get("correlation") for e in gpu if isinstance(e.get("args"), dict)}
    calls = [
        e for e in raw
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in reference.RUNTIME_CATEGORIES
        and isinstance(e.get("args"), dict) and e["args"].get("correlation") is not None
        and _LAUNCH.match(str(e.get("name", "")))
    ]  # fmt: skip
    lost = sum(1 for e in calls if e["args"]["correlation"] not in ran)
    by_stream: dict[Any, list[tuple[int, int]]] = {}
    for e in gpu:
        args = e.get("args") or {}
        key = (args.get("device"), args.get("stream"))
        by_stream.setdefault(key, []).append(reference.interval_ns(e))
    overlaps = 0
    for spans in by_stream.values():
        latest = None
        for start, end in sorted(spans):
            if latest is not None and start < latest and end > start:
                overlaps += 1
            latest = end if latest is None else max(latest, end)
    return lost, overlaps


def test_plain_counts_agree(real_trace: RealTrace) -> None:
    """launch-without-gpu (every part but graph replays) and stream-overlap, against a
    plain count on every shared trace."""
    if not len(real_trace.events.gpu.ts):
        pytest.skip("no GPU activity: the launch checks do not run")
    a = real_trace.derived("audit", lambda: audit(step_phases(real_trace.events)))
    checks = {c.id: c for c in a.checks}
    lost, overlaps = _plain(real_trace.raw)
    if "launch-without-gpu" in checks:
        c = checks["launch-without-gpu"]
        graph = {p.what: p.count for p in c.parts}["kernels missing from graph replays"]
        assert c.count - graph == lost
    assert checks["stream-overlap"].count == overlaps


def test_cli_exit_codes_and_json(tmp_path: Path) -> None:
    if not TRAIN.exists():
        pytest.skip(f"{TRAIN} is absent")
    r = run_cli("audit", str(TRAIN), "-f", "json", "-q")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {c["id"] for c in doc["checks"]} == set(CHECKS)
    for c in doc["checks"]:
        assert set(c) >= {"id", "severity", "count", "time_us", "steps", "examples"}
        assert len(c["examples"]) <= 5
    before = next(c for c in doc["checks"] if c["id"] == "launched-before-trace")
    assert before["count"] == 619 and before["steps"] == [3]
    assert all(e["ts_us"] is not None for e in before["examples"])
    busy = doc["figures"]["busy_pct"]
    assert busy["trust"] == "approximate" and busy["bound_us"] == pytest.approx(17943.938)
    assert doc["figures"]["step_time"] == {"trust": "exact", "bound_us": 0.0, "reason": ""}
    damaged = tmp_path / "lost.json.gz"
    audit_damage.damage(TRAIN, damaged, "kernels", 1)
    r = run_cli("audit", str(damaged), "-q", "-o", str(tmp_path / "out.txt"))
    assert r.returncode == 1, r.stderr
    assert "UNTRUSTED" in (tmp_path / "out.txt").read_text()
    r = run_cli("audit", str(tmp_path / "missing.json.gz"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    cut = tmp_path / "cut.json.gz"  # no --partial needed: a cut file is a finding here
    audit_damage.damage(TRAIN, cut, "truncate", 9)
    r = run_cli("audit", str(cut), "-q", "-f", "json")
    assert r.returncode == 1, r.stderr
    truncated = next(c for c in json.loads(r.stdout)["checks"] if c["id"] == "truncated")
    assert {p["what"]: p["count"] for p in truncated["parts"]}["file cut before its end"] == 1


def test_a_step_missing_from_the_numbering(tmp_path: Path) -> None:
    """A trace whose ProfilerStep numbers skip one (every range of step 4 gone, CPU and GPU):
    audit names the step with no window of its own, and summary carries on."""
    if not GRAPHS.exists():
        pytest.skip(f"{GRAPHS} is absent")
    doc = json.loads(gzip.decompress(GRAPHS.read_bytes()))
    events = doc["traceEvents"]
    doc["traceEvents"] = [e for e in events if e.get("name") != "ProfilerStep#4"]
    assert len(doc["traceEvents"]) < len(events)
    holed = tmp_path / "holed.json"
    holed.write_text(json.dumps(doc))
    r = run_cli("audit", str(holed), "-q", "-f", "json")
    assert r.returncode in (0, 1), r.stderr
    truncated = next(c for c in json.loads(r.stdout)["checks"] if c["id"] == "truncated")
    assert {p["what"]: p["count"] for p in truncated["parts"]}["steps missing their CPU range"] == 1
    example = next(e for e in truncated["examples"] if e["detail"] == "no CPU range")
    assert example["step"] == 4 and example["ts_us"] is None
    r = run_cli("summary", str(holed), "-q", "-f", "json")
    assert r.returncode == 0, r.stderr


def test_diff_warns_when_trust_differs(tmp_path: Path) -> None:
    if not TRAIN.exists():
        pytest.skip(f"{TRAIN} is absent")
    drifted = tmp_path / "drift.json.gz"
    audit_damage.damage(TRAIN, drifted, "drift", 7)
    r = run_cli("diff", str(TRAIN), str(drifted), "-q")
    assert "trust differs" in r.stderr
    assert "step time exact in the base, approximate in the new" in r.stderr
    r = run_cli("diff", str(TRAIN), str(TRAIN), "-q")
    assert r.returncode == 0 and "trust" not in r.stderr


def test_summary_of_a_phase_carries_the_whole_traces_trust() -> None:
    """--phase keeps one phase's GPU work: its other launches must not read as lost."""
    sglang = SHARED_TRACES / "tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz"
    if not sglang.exists():
        pytest.skip(f"{sglang} is absent")
    r = run_cli("summary", str(sglang), "--phase", "decode", "-f", "json", "--no-cache", "-q")
    assert r.returncode == 0, r.stderr
    trust = json.loads(r.stdout)["trust"]
    assert {n: f["trust"] for n, f in trust.items()} == dict.fromkeys(trust, "exact")
    assert _audit(sglang).figures == {n: _figure(f) for n, f in trust.items()}


def _figure(f: dict[str, Any]) -> Any:
    from traceview.analyses.audit import Figure

    bound = None if f["bound_us"] is None else round(f["bound_us"] * 1000)
    return Figure(f["trust"], bound, f["reason"])


_ORDER = ("exact", "approximate", "untrusted")


def _mfu_from_its_basis(figures: dict[str, Any], checks: dict[str, Any]) -> dict[str, Any]:
    """MFU's verdict as docs/audit.md defines it, from step time's and op attribution's: the
    worse trust, the reasons giving it, the bound of each finding once (here: the GPU time of
    the launched-before-trace and gpu-without-launch findings, the only ones these traces have)."""
    basis = [figures["step_time"], figures["op_attribution"]]
    trust = max((f["trust"] for f in basis), key=_ORDER.index)
    reasons = {r for f in basis if f["trust"] == trust for r in f["reason"].split("; ") if r}
    bound = sum(checks[i]["time_us"] for i in ("launched-before-trace", "gpu-without-launch"))
    return {"trust": trust, "bound_us": bound, "reasons": reasons}


def _mfu_seen(figure: dict[str, Any]) -> dict[str, Any]:
    reasons = set(figure["reason"].split("; "))
    return {"trust": figure["trust"], "bound_us": figure["bound_us"], "reasons": reasons}


def test_mfu_has_the_verdict_of_what_it_is_built_on(tmp_path: Path) -> None:
    """train has an MFU value: its verdict is the worse of step time's (exact) and op
    attribution's (± 17.9 ms, work launched before the trace); with launch calls deleted, GPU
    work without a launch moves both, and MFU's bound counts it once."""
    if not TRAIN.exists():
        pytest.skip(f"{TRAIN} is absent")
    lost = tmp_path / "lost.json.gz"
    audit_damage.damage(TRAIN, lost, "launches", 3)
    for path in (TRAIN, lost):
        r = run_cli("audit", str(path), "-f", "json", "-q", "--no-cache")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        checks = {c["id"]: c for c in doc["checks"]}
        mfu = doc["figures"]["mfu"]
        want = _mfu_from_its_basis(doc["figures"], checks)
        assert _mfu_seen(mfu) == {**want, "bound_us": pytest.approx(want["bound_us"])}
        summary = json.loads(run_cli("summary", str(path), "-f", "json", "-q").stdout)
        assert summary["mfu"]["value"] is not None
        assert summary["trust"] == doc["figures"]
    assert mfu["trust"] == "approximate"  # the damaged trace's: both findings, each once
    assert mfu["bound_us"] == doc["figures"]["op_attribution"]["bound_us"]
    assert doc["figures"]["step_time"]["trust"] == "approximate"
    r = run_cli("audit", str(TRAIN), "-q")
    assert "op attribution, MFU" in r.stdout
    train = run_cli("summary", str(TRAIN), "-q").stdout
    assert re.search(r"^trust .* op attribution, MFU \(± 17.9 ms from work launched", train, re.M)


def test_no_mfu_no_verdict() -> None:
    """graphs recorded no shapes: no MFU value, so no ``mfu`` figure in audit or summary."""
    if not GRAPHS.exists():
        pytest.skip(f"{GRAPHS} is absent")
    summary = json.loads(run_cli("summary", str(GRAPHS), "-f", "json", "-q").stdout)
    assert summary["mfu"]["value"] is None
    doc = json.loads(run_cli("audit", str(GRAPHS), "-f", "json", "-q").stdout)
    assert set(doc["figures"]) == set(summary["trust"]) == set(FIGURES)
    assert "MFU" not in run_cli("audit", str(GRAPHS), "-q").stdout

"""Serving steps and phases on the real serving traces, against a plain computation.

The phases found per trace, with the marker evidence (what the trace records):
- tracelens__inference__sglang_decode__…: one step, the user annotation
  ``step[DECODE bs=32]`` (SGLang; its ``execute_32_context_0(…)_generation_32(…)`` range
  around it loses to SGLang's own marker): decode, batch 32, tokens 32.
- tracelens__inference__vllm_decode_full__…: one step, the user annotation
  ``execute_32_context_0(sq0…)_generation_32(sq32…)`` (context 0, generation 32): decode,
  batch 32, 32 query tokens; its ``gpu_model_runner.py(3380): execute_model`` frame lies
  inside it and loses to it.
- h200/decode.json.gz (HF ``generate``): ProfilerStep#1-3, one ``generate`` each, so the
  ProfilerSteps are the steps; no marker words, and no per-forward range (recorded without
  ``with_stack``/``with_modules``): the phase comes from its shape, the 1,152 SDPA calls per
  step with query lengths 128 (the prompt: prefill) and 1 (each new token): mixed.
- tracelens__b200__eager_trace (gpt-oss under vLLM): one step, the user annotation
  ``execute_context_1(888_788544)_generation_0(0)`` (context 1, generation 0): prefill,
  batch 1, 888 tokens; its ``gpu_model_runner.py(2907): execute_model`` frame and
  ``nn.Module: GptOssForCausalLM_0`` forward lose to it. Its attention kernels agree: 36
  TensorRT-LLM ``fmhaSm100aKernel_…PersistentContext`` (context phase: the prefill family).
- must not fire: h200/train.json.gz (backward ops: training, unknown), h200/graphs.json.gz
  (compiled, no SDPA call: unknown).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import reference as ref
from conftest import SHARED_TRACES, run_cli

import traceview

B200 = SHARED_TRACES / "tracelens__b200__eager_trace.json.gz"
SGLANG = SHARED_TRACES / "tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz"
VLLM = SHARED_TRACES / "tracelens__inference__vllm_decode_full__graph_execution.json.gz"
H200 = SHARED_TRACES / "h200"


def needs(path: Path) -> Any:
    return pytest.mark.skipif(not path.is_file(), reason=f"{path.name} is absent")


def marker_windows(raw: list[ref.Event], pattern: str) -> list[tuple[str, int, int]]:
    """(name, start, end) of the CPU ranges whose whole name matches, by start: plainly."""
    found = [
        (ref.event_name(e), *ref.interval_ns(e))
        for e in raw
        if e.get("ph") == "X" and re.fullmatch(pattern, ref.event_name(e))
        and str(e.get("cat", "")).lower() in ("user_annotation", "python_function", "cpu_op")
    ]  # fmt: skip
    return sorted(found, key=lambda f: f[1])


def kernels_launched_in(raw: list[ref.Event], start: int, end: int) -> list[ref.Event]:
    """Kernels whose launch (else own start) lies in [start, end]."""
    launches = ref.launch_ts_by_correlation(raw)
    out = []
    for e in ref.gpu_events(raw):
        corr = e.get("args", {}).get("correlation")
        at = launches.get(corr, ref.interval_ns(e)[0])
        if start <= at <= end:
            out.append(e)
    return out


@pytest.mark.parametrize(
    ("path", "pattern", "want"),
    [
        pytest.param(SGLANG, r"step\[DECODE bs=32\]", ("decode", 32, 32), marks=needs(SGLANG)),
        pytest.param(
            VLLM,
            r"execute_32_context_0\(sq0[^()]*\)_generation_32\(sq32[^()]*\)",
            ("decode", 32, 32),
            marks=needs(VLLM),
        ),
        pytest.param(
            B200,
            r"execute_context_1\(888_788544\)_generation_0\(0\)",
            ("prefill", 1, 888),
            marks=needs(B200),
        ),
    ],
    ids=["sglang", "vllm", "b200"],
)
def test_serving_markers_are_the_steps(path: Path, pattern: str, want: tuple[Any, ...]) -> None:
    _, raw = ref.load_trace(path)
    windows = marker_windows(raw, pattern)
    assert len(windows) == 1
    rows = traceview.open(path, cache=False).steps().rows
    assert [(r.name, r.cpu_start_ns, r.cpu_end_ns) for r in rows] == windows
    assert [(r.phase, r.batch, r.tokens) for r in rows] == [want]
    for r, (_, start, end) in zip(rows, windows, strict=True):
        kernels = kernels_launched_in(raw, start, end)
        assert (r.kernels, r.kernel_time_ns) == (len(kernels), sum(map(ref.dur_ns, kernels)))
        assert r.degenerate is None


@needs(VLLM)
def test_the_vllm_execute_model_frame_is_kept_and_inside_the_execute_range() -> None:
    _, raw = ref.load_trace(VLLM)
    frames = marker_windows(raw, r"vllm/v1/worker/gpu_model_runner\.py\(\d+\): execute_model")
    (outer,) = marker_windows(raw, r"execute_\d+_context_\d+\(.*\)_generation_\d+\(.*\)")
    assert len(frames) == 1 and outer[1] <= frames[0][1] and frames[0][2] <= outer[2]
    events = traceview.open(VLLM, cache=False)._read()
    assert frames[0][0] in set(events.names)  # the frame is read: the vLLM marker can match


@needs(H200 / "decode.json.gz")
def test_hf_generate_steps_are_mixed_from_their_sdpa_query_lengths() -> None:
    path = H200 / "decode.json.gz"
    _, raw = ref.load_trace(path)
    windows = ref.step_windows(raw)
    queries: dict[int, set[int]] = defaultdict(set)
    for e in raw:
        if ref.event_name(e) == "aten::scaled_dot_product_attention":
            at = ref.interval_ns(e)[0]
            q = json.loads(json.dumps(e["args"]["Input Dims"], default=int))[0][-2]
            for step, (start, end, _) in windows.items():
                if start <= at <= end:
                    queries[step].add(q)
    assert dict(queries) == {1: {1, 128}, 2: {1, 128}, 3: {1, 128}}
    rows = traceview.open(path, cache=False).steps().rows
    assert [(r.name, r.phase) for r in rows] == [(f"ProfilerStep#{n}", "mixed") for n in (1, 2, 3)]


@pytest.mark.parametrize("name", ["train.json.gz", "graphs.json.gz"])
def test_no_phase_where_the_trace_says_none(name: str) -> None:
    path = H200 / name
    if not path.is_file():
        pytest.skip(f"{name} is absent")
    rows = traceview.open(path, cache=False).steps().rows
    assert rows and {r.phase for r in rows} == {"unknown"}


@needs(SGLANG)
def test_phase_decode_keeps_the_decode_steps_kernels() -> None:
    _, raw = ref.load_trace(SGLANG)
    ((_, start, end),) = marker_windows(raw, r"step\[DECODE bs=32\]")
    kernels = kernels_launched_in(raw, start, end)
    r = run_cli("kernels", str(SGLANG), "--phase", "decode", "-f", "json", "--no-cache", "-q")
    assert r.returncode == 0, r.stderr
    totals = json.loads(r.stdout)["totals"]
    assert totals["total_us"] == pytest.approx(ref.us(sum(map(ref.dur_ns, kernels))))
    r = run_cli("summary", str(SGLANG), "--phase", "prefill", "--no-cache", "-q")
    assert r.returncode == 2 and r.stderr == (
        "traceview: error: --phase prefill: no prefill step in this trace (phases found: decode)\n"
    )


@needs(VLLM)
def test_summary_per_phase_figures_match_a_plain_sum() -> None:
    _, raw = ref.load_trace(VLLM)
    ((_, start, end),) = marker_windows(raw, r"execute_\d+_context_\d+\(.*\)_generation_\d+\(.*\)")
    kernels = kernels_launched_in(raw, start, end)
    by_name: dict[str, int] = defaultdict(int)
    for e in kernels:
        by_name[ref.event_name(e)] += ref.dur_ns(e)
    r = run_cli("summary", str(VLLM), "-f", "json", "--no-cache", "-q")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    (decode,) = out["phases"]
    assert decode["phase"] == "decode" and decode["steps"] == 1
    # The GPU ran behind the CPU (CUDA-graph replays queued by a 2.4 ms CPU step): the step
    # time is the GPU's period, for the first step its window (docs/metrics.md "Step time").
    launches = ref.launch_ts_by_correlation(raw)
    busy = [
        ref.interval_ns(e)
        for e in raw
        if ref.gpu_kind(e) is not None
        and ref.dur_ns(e) > 0
        and ref._in_step(e, (start, end, "cpu"), launches)
    ]
    first, last = min(a for a, _ in busy), max(b for _, b in busy)
    assert end - start < last - first
    assert decode["median_step_us"] == pytest.approx(ref.us(last - first))
    assert decode["kernel_time_us"] == pytest.approx(ref.us(sum(by_name.values())))
    replayed = ref.graph_replayed(raw)  # positions among the trace's kernels
    graph = {id(k) for i, k in enumerate(ref.gpu_events(raw, ("kernel",))) if i in replayed}
    graph_ns = sum(ref.dur_ns(e) for e in kernels if id(e) in graph)
    assert 0 < graph_ns < sum(by_name.values())
    assert decode["graph_kernel_pct"] == pytest.approx(100 * graph_ns / sum(by_name.values()))
    top = sorted(by_name.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    assert [(k["name"], k["gpu_time_us"]) for k in decode["top_kernels"]] == [
        (name, pytest.approx(ref.us(ns))) for name, ns in top
    ]
    assert out["steady_state"] is None  # one step: no run of 2
    assert out["degenerate_steps"] == []


@needs(SGLANG)
@pytest.mark.parametrize("command", ["summary", "gaps", "ops"])
def test_phase_is_taken_by_summary_gaps_and_ops(command: str) -> None:
    r = run_cli(command, str(SGLANG), "--phase", "decode", "-f", "json", "--no-cache", "-q")
    assert r.returncode == 0, r.stderr
    r = run_cli(command, str(SGLANG), "--phase", "mixed", "--no-cache", "-q")
    assert r.returncode == 2 and "no mixed step in this trace" in r.stderr


@needs(SGLANG)
def test_phase_takes_one_trace() -> None:
    r = run_cli("kernels", str(SGLANG), str(VLLM), "--phase", "decode", "--no-cache", "-q")
    assert r.returncode == 2
    assert r.stderr == "traceview: error: --phase: takes one trace, not a run of several\n"


@pytest.mark.parametrize(
    ("path", "want"),
    [
        pytest.param(B200, "prefill", marks=needs(B200)),  # fmha…PersistentContext
        pytest.param(SGLANG, "decode", marks=needs(SGLANG)),  # paged_attention_ll4mi_…
        pytest.param(H200 / "train.json.gz", None, marks=needs(H200 / "train.json.gz")),
        pytest.param(VLLM, None, marks=needs(VLLM)),  # kernel_unified_attention_3d: both
    ],
    ids=["b200", "sglang", "train", "vllm"],
)
def test_attention_kernel_families_tell_a_phase(path: Path, want: str | None) -> None:
    """The kernel-family rule on its own, over the whole trace (the marker words win in
    the serving traces, and agree where they exist)."""
    from traceview.analyses.core.step_markers import _families

    events = traceview.open(path, cache=False)._read()
    assert _families(events).phase(-(2**62), 2**62) == want

"""Issue #36 on the modern H200 traces whose right answers are known (../shared/traces/h200,
README there): categories, precision, hints, op rates, energy periods and kernel names. Each
figure is checked against a deliberately simple computation on the raw events."""

from __future__ import annotations

import csv
import gzip
import itertools
import json
import statistics
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import reference as ref
from conftest import SHARED_TRACES
from typer.testing import CliRunner

from traceview.analyses.energy import integrate, sampling_period
from traceview.cli import app

H200 = SHARED_TRACES / "h200"
needs_h200 = pytest.mark.skipif(not H200.is_dir(), reason="../shared/traces/h200 is absent")


@cache
def raw(name: str) -> tuple[dict[str, Any], ...]:
    """The trace's events, as json.load gives them."""
    with gzip.open(H200 / name) as f:
        return tuple(json.load(f)["traceEvents"])


@cache
def cli_json(*args: str) -> dict[str, Any]:
    """``traceview <args> -f json`` on a trace of ../shared/traces/h200 (or, named with its
    folder, of ../shared/traces), parsed."""
    command, trace, *rest = args
    path = SHARED_TRACES / trace if "/" in trace else H200 / trace
    r = CliRunner().invoke(app, [command, str(path), "-f", "json", "--no-cache", *rest])
    assert r.exit_code == 0, r.output
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def kernel_us(name: str, *parts: str) -> float:
    """Summed duration (µs) of the kernels whose name contains every one of ``parts``."""
    return sum(
        float(e["dur"])
        for e in raw(name)
        if e.get("cat") == "kernel" and all(p in e["name"] for p in parts)
    )


def category_us(trace: str, category: str) -> float:
    device = cli_json("summary", trace)["devices"][0]
    return sum(c["gpu_time_us"] for c in device["categories"] if c["category"] == category)


@needs_h200
def test_train_optimizer_is_the_fused_adamw() -> None:
    fused = kernel_us("train.json.gz", "multi_tensor_apply_kernel", "FusedAdamMathFunctor")
    step_count = kernel_us("train.json.gz", "multi_tensor_apply_kernel", "BinaryOpScalarFunctor")
    optimizer = category_us("train.json.gz", "optimizer")
    assert 8_000 < fused <= optimizer <= 12_000
    assert optimizer == pytest.approx(fused + step_count, abs=0.01)


@needs_h200
def test_decode_has_no_optimizer() -> None:
    assert category_us("decode.json.gz", "optimizer") == 0
    assert category_us("graphs.json.gz", "optimizer") == 0  # cudagraph input copies


@needs_h200
def test_cudnn_attention_kernels_are_attention() -> None:
    """cuDNN's ``convert_dq_to_16bits`` under ``aten::_cudnn_attention_backward``: not a conv."""
    convert = kernel_us("train.json.gz", "convert_dq_to_16bits")
    assert convert > 0
    assert category_us("train.json.gz", "convolution") == 0
    assert category_us("train.json.gz", "attention") >= convert + kernel_us(
        "train.json.gz", "cudnn_generated_fort_native_sdpa"
    )


# ---- op rates: work counted once when ops nest; rates above the peak flagged ----------------

H200_PROPS = [{"id": 0, "name": "NVIDIA H200", "computeMajor": 9, "computeMinor": 0, "numSms": 132}]


def _op(name: str, ts: int, dur: int, dims: list[list[int]], dtype: str) -> dict[str, Any]:
    n = len(dims)
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": {"Input Dims": dims, "Input type": [dtype] * n}}  # fmt: skip


def _kernel_of(ts: int, correlation: int, dur: float = 1.0) -> list[dict[str, Any]]:
    return [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
         "ts": ts, "dur": 1, "args": {"correlation": correlation}},
        {"ph": "X", "cat": "kernel", "name": f"gemm_{correlation}", "pid": 0, "tid": 7,
         "ts": 1000 + ts, "dur": dur, "args": {"correlation": correlation, "device": 0,
                                               "stream": 7}},
    ]  # fmt: skip


def _ops_json(tmp_path: Path, events: list[dict[str, Any]], *args: str) -> dict[str, Any]:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"deviceProperties": H200_PROPS, "traceEvents": events}))
    r = CliRunner().invoke(app, ["ops", str(path), "-f", "json", "--no-cache", "--top", "0", *args])
    assert r.exit_code == 0, r.output
    out: dict[str, Any] = json.loads(r.stdout)
    return out


def test_nested_gemm_ops_count_their_flops_once(tmp_path: Path) -> None:
    """An autocast fp32 addmm wrapping a bf16 addmm, and a linear wrapping an addmm: each
    GEMM's FLOPs once, in the dtype of the op that launched the kernel."""
    mm = [[64], [32, 128], [128, 64]]
    events = [
        _op("aten::addmm", 0, 100, mm, "float"),
        _op("aten::addmm", 10, 50, mm, "c10::BFloat16"),
        *_kernel_of(20, 1),
        _op("aten::linear", 200, 100, [[32, 128], [64, 128], [64]], "float"),
        _op("aten::addmm", 210, 50, mm, "c10::BFloat16"),
        *_kernel_of(220, 2),
    ]
    one = 2 * 32 * 64 * 128
    leaf = {r["name"]: r for r in _ops_json(tmp_path, events)["ops"]}
    assert (leaf["aten::addmm"]["calls"], leaf["aten::addmm"]["kernels"]) == (3, 2)
    assert leaf["aten::addmm"]["flops"] == 2 * one
    assert leaf["aten::addmm"]["dtype"] == "c10::BFloat16"
    top = {r["name"]: r for r in _ops_json(tmp_path, events, "--level", "top")["ops"]}
    assert (top["aten::addmm"]["flops"], top["aten::linear"]["flops"]) == (one, one)
    assert top["aten::linear"]["dtype"] == top["aten::addmm"]["dtype"] == "c10::BFloat16"


def test_back_to_back_gemm_calls_both_count(tmp_path: Path) -> None:
    """A call that starts where the previous one ends is its sibling, not its child."""
    mm = [[32, 128], [128, 64]]
    events = [
        _op("aten::mm", 0, 10, mm, "c10::BFloat16"),
        *_kernel_of(2, 1),
        _op("aten::mm", 10, 10, mm, "c10::BFloat16"),
        *_kernel_of(12, 2),
    ]
    for level in ("leaf", "top"):
        (row,) = _ops_json(tmp_path, events, "--level", level)["ops"]
        assert row["flops"] == 2 * (2 * 32 * 64 * 128), level


def test_a_rate_above_the_peak_is_flagged(tmp_path: Path) -> None:
    big = [[8192, 8192], [8192, 8192]]  # 1.1 PFLOP in 1 µs: far above the bf16 peak
    events = [_op("aten::mm", 0, 100, big, "c10::BFloat16"), *_kernel_of(20, 1)]
    doc = _ops_json(tmp_path, events)
    (row,) = doc["ops"]
    assert row["tflops_per_s"] == pytest.approx(2 * 8192**3 / 1e-6 / 1e12)  # in 1 µs
    assert row["above_peak"] is True
    assert any(n.startswith("aten::mm: ") and "above the 989.5 TFLOP/s" in n for n in doc["notes"])
    path = tmp_path / "t.json"
    r = CliRunner().invoke(app, ["ops", str(path), "--no-cache"], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    assert "(above peak)" in r.stdout
    small = [_op("aten::mm", 0, 100, [[64, 64], [64, 64]], "c10::BFloat16"), *_kernel_of(20, 1)]
    (row,) = _ops_json(tmp_path, small)["ops"]
    assert row["above_peak"] is False


@needs_h200
@pytest.mark.parametrize("level", ["leaf", "top"])
def test_train_addmm_flops_are_the_bf16_calls(level: str) -> None:
    """train.json.gz: autocast's fp32 addmm wraps a bf16 addmm of the same shapes; the row's
    FLOPs are 2·M·N·K once per GEMM, in bf16, below the H200's bf16 peak."""
    calls = [
        e for e in raw("train.json.gz") if e.get("cat") == "cpu_op" and e["name"] == "aten::addmm"
    ]
    bf16 = [e for e in calls if set(e["args"]["Input type"][:3]) == {"c10::BFloat16"}]
    assert 0 < len(bf16) < len(calls)
    want = sum(
        2 * e["args"]["Input Dims"][1][0] * e["args"]["Input Dims"][2][1]
        * e["args"]["Input Dims"][1][1]
        for e in bf16
    )  # fmt: skip
    doc = cli_json("ops", "train.json.gz", "--top", "0", "--level", level)
    row = next(r for r in doc["ops"] if r["name"] == "aten::addmm")
    assert row["flops"] == want
    assert row["dtype"] == "c10::BFloat16"
    assert row["tflops_per_s"] < doc["device"]["peak_tflops_per_s"]["bf16"]
    assert not row["above_peak"]


@needs_h200
@pytest.mark.parametrize("trace", ["train", "decode", "eager", "compiled2", "graphs"])
def test_no_op_rate_above_the_peak_on_the_h200_traces(trace: str) -> None:
    for level in ("leaf", "top"):
        doc = cli_json("ops", f"{trace}.json.gz", "--top", "0", "--level", level)
        peaks = doc["device"]["peak_tflops_per_s"]
        for row in doc["ops"]:
            assert not row["above_peak"], (level, row["name"])
            if row["tflops_per_s"] is not None:
                assert row["dtype"] is not None, (level, row["name"])
                assert row["tflops_per_s"] <= max(peaks.values())


# ---- hints: each fires on a real trace that has its problem and not on one without ----------

HINT_CASES = [
    ("low-precision", "graphs.json.gz", True),  # sm80_xmma_gemm_f32f32…ffma
    ("low-precision", "train.json.gz", False),  # bf16 tensor-core GEMMs under autocast
    ("low-precision", "decode.json.gz", False),  # gemmSN<float…> under BFloat16 ops
    ("pinned-memory", "../kineto__resnet50_profiler_api_nw0.json.gz", True),
    ("pinned-memory", "train.json.gz", False),  # pinned already
    ("pinned-memory", "decode.json.gz", False),  # 9 pageable copies, 7.6 µs
    ("host-stall", "train.json.gz", True),
    ("host-stall", "decode.json.gz", False),
    ("host-stall", "compiled2.json.gz", False),
    ("gemm-alignment", "train.json.gz", True),  # N = 50257
    ("gemm-alignment", "eager.json.gz", False),  # 1024 / 4096 wide
    ("gemm-alignment", "decode.json.gz", False),  # M = 4 is a batch, not a pad
    ("fused-attention", "../hta__timeline_analysis__sampled_rank-0.json.gz", True),
    ("fused-attention", "train.json.gz", False),  # SDPA on cuDNN
    ("cuda-graphs", "decode.json.gz", True),
    ("cuda-graphs", "graphs.json.gz", False),  # 216 of 248 kernels from 6 replays
    ("cuda-graphs", "../tracelens__inference__vllm_decode_full__graph_execution.json.gz", False),
    (
        "cuda-graphs",
        "../tracelens__inference__sglang_decode__sglang_Qwen3-8B_decode.json.gz",
        False,
    ),
    ("dataloader", "../kineto__resnet50_profiler_api_nw0.json.gz", True),
    ("dataloader", "train.json.gz", False),  # its loader is not annotated: host-stall
    ("overlap-communication", "../param__dlrm_8rank_worker0.json.gz", True),
    ("overlap-communication", "train.json.gz", False),
    ("fused-norm", "train.json.gz", False),  # fused LayerNorm kernels
    ("cpu-bound", "train.json.gz", True),  # steps 5-10: ~25 µs gaps, 12-28% of each step
    ("cpu-bound", "graphs.json.gz", False),  # one replay a step, the GPU behind the CPU
    ("cpu-bound", "decode.json.gz", False),  # cuda-graphs names that host wait
]


@needs_h200
@pytest.mark.parametrize(("rule", "trace", "fires"), HINT_CASES)
def test_hint_on_real_traces(rule: str, trace: str, fires: bool) -> None:
    if trace.startswith("../"):  # a trace of ../shared/traces itself
        trace = f"./{trace.removeprefix('../')}"
        if not (SHARED_TRACES / trace).is_file():
            pytest.skip(f"{trace} is absent")
    doc = cli_json("summary", trace)
    hints = {h["rule"]: h for h in doc["hints"]}
    assert (rule in hints) is fires, sorted(hints)
    for h in hints.values():
        assert set(h) == {"rule", "title", "evidence", "action", "doc", "stake_us", "rank"}
        assert h["doc"] == f"docs/hints.md#{h['rule']}"
    ranked = sorted(doc["findings"], key=lambda f: f["rank"])
    assert [f["rank"] for f in ranked] == list(range(1, len(hints) + 1))
    stakes = [f["stake_us"] for f in ranked if f["stake_us"] is not None]
    assert stakes == sorted(stakes, reverse=True)  # the most time at stake first
    assert {f["rule"]: f["rank"] for f in ranked} == {r: h["rank"] for r, h in hints.items()}


@needs_h200
def test_train_host_stall_is_the_two_loader_waits() -> None:
    """Two gaps of ~22 ms between the fused AdamW kernel and the next pinned H2D copy, in
    ProfilerStep#5 and #8, with no cpu_op over most of them: checked on the raw events."""
    events = raw("train.json.gz")
    launches = {
        e["args"]["correlation"]: float(e["ts"])
        for e in events
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    gpu = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["name"], e["args"]["correlation"])
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    )
    ops = [
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in events
        if e.get("cat") in ("cpu_op", "user_annotation") and "ProfilerStep" not in e["name"]
    ]
    steps = {
        e["name"]: (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in events
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    }
    stalls = []
    for (_, end, before, _), (start, _, after, correlation) in itertools.pairwise(gpu):
        if start - end > 10_000 and "FusedAdam" in before and after.startswith("Memcpy HtoD"):
            launch = launches[correlation]  # the host held the copy's launch back till here
            covered = sum(max(0.0, min(b, launch) - max(a, end)) for a, b in ops)
            stalls.append((launch, launch - end - covered))
    assert len(stalls) == 2
    assert all(uncovered > 20_000 for _, uncovered in stalls)  # µs, ops overlapping counted
    in_steps = sorted(n for t, _ in stalls for n, (a, b) in steps.items() if a <= t <= b)
    assert in_steps == ["ProfilerStep#5", "ProfilerStep#8"]
    hint = next(
        h for h in cli_json("summary", "train.json.gz")["hints"] if h["rule"] == "host-stall"
    )
    assert hint["evidence"].startswith("2 device gaps held ")
    assert "in ProfilerStep #5, #8 (2 of 8 steps)" in hint["evidence"]
    assert "between aten::_fused_adamw_ and aten::copy_" in hint["evidence"]


def _host_held_gaps(name: str) -> tuple[list[tuple[float, float, float]], dict[str, Any]]:
    """The device gaps of a one-device trace as (start, end, host wait) in µs, worked out
    plainly from the raw events (docs/metrics.md "Devices"); the CPU ProfilerStep windows."""
    events = raw(name)
    launches: dict[int, float] = {}
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            c = e["args"]["correlation"]
            launches[c] = min(launches.get(c, float("inf")), float(e["ts"]))
    gpu = sorted(
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]), e["args"].get("correlation"))
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and float(e["dur"]) > 0
    )
    gaps, end = [], gpu[0][1]
    for start, stop, correlation in gpu[1:]:
        if start > end:
            launch = launches.get(correlation, end)
            gaps.append((end, start, min(max(launch - end, 0.0), start - end)))
        end = max(end, stop)
    steps = {
        int(e["name"].removeprefix("ProfilerStep#")): (float(e["ts"]), float(e["ts"]) + e["dur"])
        for e in events
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    }
    return gaps, steps


@needs_h200
def test_train_cpu_bound_names_the_steps_where_the_cpu_falls_behind() -> None:
    """Short host-held gaps (below the host-stall floor) summed per step: the steps where
    they reach 10% of the step in 20 gaps or more are named, the GPU-bound ones not; with
    host-stall the hints account for at least 90% of the host wait."""
    gaps, steps = _host_held_gaps("train.json.gz")
    lengths = sorted(b - a for a, b in steps.values())
    floor = max(0.25 * lengths[(len(lengths) - 1) // 2], 1000.0)
    held = {n: [w for a, _, w in gaps if 0 < w < floor and s <= a + w <= e]
            for n, (s, e) in steps.items()}  # fmt: skip
    share = {n: sum(w) / (steps[n][1] - steps[n][0]) for n, w in held.items()}
    bound = sorted(n for n, w in held.items() if len(w) >= 20 and share[n] >= 0.10)
    assert bound == [5, 6, 7, 8, 9, 10]
    assert share[3] < 0.05 and share[4] < 0.05  # GPU-bound steps: not named
    doc = cli_json("summary", "train.json.gz")
    hints = {h["rule"]: h for h in doc["hints"]}
    hint = hints["cpu-bound"]
    stake = sum(sum(held[n]) for n in bound)
    assert hint["stake_us"] == pytest.approx(stake, abs=1.0)
    count = sum(len(held[n]) for n in bound)
    assert hint["evidence"].startswith(f"{count:,} host-held gaps shorter than a stall")
    assert "in ProfilerStep #5, #6, #7, #8, #9, #10 (6 of 8 steps)" in hint["evidence"]
    assert "launched by aten::copy_" in hint["evidence"]
    assert 'torch.compile(mode="reduce-overhead")' in hint["action"]
    host_wait = sum(w for _, _, w in gaps)
    assert doc["devices"][0]["host_wait_us"] == pytest.approx(host_wait, abs=1.0)
    explained = hint["stake_us"] + hints["host-stall"]["stake_us"]
    assert explained >= 0.90 * host_wait  # 132.6 of 138.7 ms


@needs_h200
def test_train_gemm_alignment_names_the_vocabulary() -> None:
    align = kernel_us("train.json.gz", "_align1") + kernel_us("train.json.gz", "_align2")
    gemm = category_us("train.json.gz", "gemm")
    assert align >= 0.05 * gemm
    hint = next(
        h for h in cli_json("summary", "train.json.gz")["hints"] if h["rule"] == "gemm-alignment"
    )
    assert f"{align / 1000:,.1f} ms of {gemm / 1000:,.1f} ms GEMM time" in hint["evidence"]
    assert "at stake (an upper bound" in hint["evidence"]
    # the LM head: forward, and both backward GEMMs, every one an aten::mm on 50257
    vocab = {
        json.dumps(e["args"]["Input Dims"])
        for e in raw("train.json.gz")
        if e.get("name") == "aten::mm" and "50257" in json.dumps(e["args"].get("Input Dims"))
    }
    assert len(vocab) == 3
    assert (
        f"3 GEMM(s) with M/N/K = 50257 (not a multiple of 8) {align / 1000:,.1f} ms"
        in (hint["evidence"])
    )
    for dims in ("8192×768·768×50257", "8192×50257·50257×768", "50257×8192·8192×768"):
        assert dims in hint["evidence"]
    assert "50304 (of 64)" in hint["action"]
    finding = next(
        f for f in cli_json("summary", "train.json.gz")["findings"] if f["rule"] == "gemm-alignment"
    )
    assert finding["rank"] == 1 and finding["finding"].startswith("3 GEMMs with M/N/K = 50257")


@needs_h200
def test_decode_pageable_copies_do_not_matter() -> None:
    """The reason pinned-memory stays silent on decode: its pageable copies are < 1%."""
    events = raw("decode.json.gz")
    pageable = sum(
        float(e["dur"]) for e in events if e.get("cat") == "gpu_memcpy" and "Pageable" in e["name"]
    )
    window = cli_json("summary", "decode.json.gz")["devices"][0]["window_us"]
    assert 0 < pageable < 0.01 * window


# ---- energy: the sampling period is how often the reading changes ------------------------------


def test_sampling_period_is_the_refresh_interval() -> None:
    """Rows every 10 ns; the reading changes at 100, 200, 300, 400 and then holds: refresh
    100 ns, and past 400 + 2·100 the held reading is stale."""
    t = np.arange(0, 2001, 10, dtype=np.int64)
    mw = np.select([t < 100, t < 200, t < 300, t < 400], [1, 2, 3, 4], 5).astype(np.int64)
    assert sampling_period(t, mw) == (10, 100)
    result = integrate(np.array([0]), np.array([2000]), t, mw)
    assert (result.period_ns, result.row_interval_ns) == (100, 10)
    assert result.coverage_pct == pytest.approx(100 * 600 / 2000)
    flat = np.full(len(t), 7, dtype=np.int64)  # never changes: the row interval
    assert sampling_period(t, flat) == (10, 10)


def _power_intervals(log: str) -> tuple[float, float]:
    """(row, refresh) median intervals in ms of GPU 0's power.draw.instant in an nvidia-smi
    CSV, parsed with the csv module."""
    from datetime import datetime

    with open(H200 / log, newline="") as f:
        rows = list(csv.reader(f, skipinitialspace=True))
    column = rows[0].index("power.draw.instant [W]")
    times, values = [], []
    for row in rows[1:]:
        if row[1] == "0":
            stamp = datetime.strptime(row[0], "%Y/%m/%d %H:%M:%S.%f")
            times.append(stamp.timestamp() * 1000)
            values.append(row[column])
    changes = [t for i, t in enumerate(times) if i and values[i] != values[i - 1]]
    return (
        statistics.median(b - a for a, b in itertools.pairwise(times)),
        statistics.median(b - a for a, b in itertools.pairwise(changes)),
    )


@needs_h200
@pytest.mark.parametrize(("trace", "log"), [("train", "power1.csv"), ("graphs", "power2.csv")])
def test_energy_periods_on_the_h200_logs(trace: str, log: str) -> None:
    row, refresh = _power_intervals(log)
    assert row == pytest.approx(20, abs=1) and refresh == pytest.approx(100, abs=5)
    r = CliRunner().invoke(
        app,
        ["energy", str(H200 / f"{trace}.json.gz"), "--power", str(H200 / log), "--power-tz",
         "UTC", "-f", "json", "--no-cache"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    (device,) = json.loads(r.stdout)["devices"]
    assert device["row_interval_ms"] == pytest.approx(row, abs=1e-6)
    assert device["refresh_interval_ms"] == pytest.approx(refresh, abs=1e-6)
    assert f"power sampled every {refresh:.1f} ms" in r.stderr
    short = "is shorter than one power sampling period" in r.stderr
    assert short is (device["window_us"] / 1000 < refresh)  # graphs: 6.7 ms; train: 641 ms
    assert short is (trace == "graphs")


# ---- names: every table of kernels tells colliding short names apart as `kernels` does -------


@needs_h200
def test_unique_and_energy_tell_colliding_names_apart_as_kernels_does() -> None:
    shown = {
        k["name"]: k["short_name"]
        for k in cli_json("kernels", "train.json.gz", "--top", "0")["kernels"]
    }
    gemms = [n for n in shown if "cutlass::Kernel2<" in n]
    assert len(gemms) >= 3 and len({shown[n] for n in gemms}) == len(gemms)
    for k in cli_json("unique", "train.json.gz", "--top", "0")["kernels"]:
        if k["kind"] == "kernel":
            assert k["short_name"] == shown[k["name"]], k["name"]
    r = CliRunner().invoke(
        app,
        ["energy", str(H200 / "train.json.gz"), "--power", str(H200 / "power1.csv"),
         "--power-tz", "UTC", "--top", "0", "--no-cache"],
        env={"COLUMNS": "300"},
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    for name in gemms:  # each GEMM on its own line of the table, under its own name
        assert sum(line.endswith(f"  {shown[name]}") for line in r.stdout.splitlines()) == 1


def test_colliding_names_in_a_unique_table(tmp_path: Path) -> None:
    events = [
        {"ph": "X", "cat": "kernel", "name": f"void k<{t}>(int)", "pid": 0, "tid": 7,
         "ts": 10 * i, "dur": 5, "args": {"device": 0, "stream": 7}}
        for i, t in enumerate(["float", "double"])
    ]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    r = CliRunner().invoke(app, ["unique", str(path), "--no-cache", "-f", "json"])
    assert r.exit_code == 0, r.output
    assert sorted(k["short_name"] for k in json.loads(r.stdout)["kernels"]) == [
        "k<double>",
        "k<float>",
    ]


# ---- gap causes: launch latency is not a wait for other work -----------------------------------


@needs_h200
def test_decode_idle_after_the_launch_is_launch_latency_not_gpu_wait() -> None:
    """decode: every gap is held by the host and then, after each launch, ~13 µs of launch
    latency; nothing waits on another stream, an event or a copy (one stream)."""
    gaps = ref.device_gaps(list(raw("decode.json.gz")))
    ((_, device),) = gaps.items()
    latency = sum(g["launch_latency_ns"] for g in device["gaps"])
    wait = sum(g["host_wait_ns"] for g in device["gaps"])
    idle = sum(g["end_ns"] - g["start_ns"] for g in device["gaps"])
    got = cli_json("gaps", "decode.json.gz")["devices"][0]
    assert got["launch_latency_us"] == pytest.approx(latency / 1000, abs=0.01)
    assert got["host_wait_us"] == pytest.approx(wait / 1000, abs=0.01)
    assert 340_000 < got["launch_latency_us"] < 350_000  # ≈ 346 ms
    assert got["gpu_wait_us"] == pytest.approx((idle - wait - latency) / 1000, abs=0.01)
    assert got["gpu_wait_us"] < 0.002 * got["idle_us"]  # ≈ 0


def _clipped(intervals: list[tuple[float, float]], a: float, b: float) -> float:
    """The length of the union of ``intervals`` inside [a, b], by a plain sweep."""
    total, reach = 0.0, a
    for s, e in sorted(intervals):
        s, e = max(s, reach), min(e, b)
        if e > s:
            total += e - s
            reach = e
    return total


@needs_h200
def test_train_step_breakdown_adds_up_and_shows_the_stalls() -> None:
    """Per step (its CPU window), the busy union and the host-wait stretches of the device
    gaps inside it, summed plainly: the report's per-step split matches, its parts add up
    to the window, and steps 5 and 8 hold the most host wait."""
    from traceview.analyses.core.common import work_out
    from traceview.analyses.step_breakdown import step_breakdown
    from traceview.app.commands import ReadOptions, read_trace

    events = read_trace(H200 / "train.json.gz", ReadOptions(quiet=True), keep_cpu=True)
    shared = work_out(events)
    rows = step_breakdown(events, shared.step_rows, shared.category, shared.gaps).rows
    gaps, steps = _host_held_gaps("train.json.gz")
    busy = [
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in raw("train.json.gz")
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and float(e["dur"]) > 0
    ]
    held = [(a, a + w) for a, _, w in gaps if w > 0]
    assert [r.step for r in rows] == sorted(steps)
    for r in rows:
        a, b = steps[r.step]
        parts = (r.compute_ns, r.communication_ns, r.memcpy_memset_ns, r.host_wait_ns)
        assert sum(parts) + r.other_idle_ns == r.window_ns
        assert r.window_ns / 1000 == pytest.approx(b - a, abs=0.01)
        assert (r.window_ns - r.host_wait_ns - r.other_idle_ns) / 1000 == pytest.approx(
            _clipped(busy, a, b), abs=0.5
        )
        assert r.host_wait_ns / 1000 == pytest.approx(_clipped(held, a, b), abs=0.5)
    stalls = sorted(rows, key=lambda r: -r.host_wait_ns)[:2]
    assert sorted(r.step for r in stalls) == [5, 8]

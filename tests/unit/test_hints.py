"""Each hint rule fires on a trace built to show its problem and stays silent on one without it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from traceview.analyses import hints
from traceview.analyses.summary import overview
from traceview.columns.parallel import collect_events
from traceview.read.reader import TraceReader

Events = list[dict[str, Any]]


class Trace:
    """A tiny kineto trace: CPU ops on thread 1, launches, kernels on device 0 stream 7."""

    def __init__(self, compute_major: int = 8) -> None:
        self.events: Events = []
        self.correlation = 0
        self.header = {
            "deviceProperties": [{"id": 0, "name": "GPU", "computeMajor": compute_major}]
        }

    def op(self, name: str, ts: float, dur: float, cat: str = "cpu_op", **args: Any) -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1,
                            "ts": ts, "dur": dur, "args": args})  # fmt: skip

    def kernel(
        self, name: str, launch: float, ts: float, dur: float, cat: str = "kernel", stream: int = 7
    ) -> None:
        self.correlation += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                            "pid": 1, "tid": 1, "ts": launch, "dur": 1,
                            "args": {"correlation": self.correlation}})  # fmt: skip
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream,
                            "ts": ts, "dur": dur, "args": {"correlation": self.correlation,
                            "device": 0, "stream": stream}})  # fmt: skip

    def hints(self, tmp_path: Path) -> dict[str, hints.Hint]:
        path = tmp_path / "t.json"
        path.write_text(json.dumps({**self.header, "traceEvents": self.events}))
        view = overview(collect_events(TraceReader(path), keep_cpu=True))
        return {h.rule: h for h in view.hints}

    def rules(self, tmp_path: Path) -> set[str]:
        return set(self.hints(tmp_path))


def unfused_attention(t: Trace, fused: bool) -> None:
    for i in range(3):
        base = 1000 * i
        if fused:
            t.op("aten::_scaled_dot_product_flash_attention", base, 50)
            t.kernel("flash_fwd_kernel", base + 1, base + 100, 300)
            continue
        t.op("aten::bmm", base, 10)
        t.kernel("ampere_h16816gemm_128x128", base + 1, base + 100, 100)
        t.op("aten::_softmax", base + 20, 10)
        t.kernel("void softmax_warp_forward<float>", base + 21, base + 200, 50)
        t.op("aten::bmm", base + 40, 10)
        t.kernel("ampere_h16816gemm_128x128", base + 41, base + 250, 100)


def unfused_norm(t: Trace, fused: bool) -> None:
    for i in range(3):
        base = 1000 * i
        if fused:
            t.op("aten::native_layer_norm", base, 10)
            t.kernel("vectorized_layer_norm_kernel", base + 1, base + 20, 30)
            continue
        for j, op in enumerate(
            ("aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul")
        ):
            t.op(op, base + 10 * j, 5)
            t.kernel("vectorized_elementwise_kernel", base + 10 * j + 1, base + 100 + 10 * j, 5)


def fp32_gemm(t: Trace, fused: bool) -> None:
    name = "ampere_bf16_s16816gemm_bf16_128x128" if fused else "ampere_sgemm_128x128_nt"
    for i in range(3):
        t.op("aten::mm", 1000 * i, 10)
        t.kernel(name, 1000 * i + 1, 1000 * i + 50, 400)


def launch_bound(t: Trace, fused: bool) -> None:
    """Short kernels launched 40 µs apart (CPU bound), or launched ahead (queued)."""
    for i in range(200):
        launch = 40 * i if not fused else i
        t.kernel("vectorized_elementwise_kernel", launch, 40 * i + 5, 5)


def data_loader(t: Trace, fused: bool) -> None:
    for i in range(3):
        base = 10_000 * i
        t.kernel("ampere_sgemm_128x128_nt", base, base + 10, 1000)
        if not fused:
            t.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", base + 1100,
                 7000, cat="user_annotation")  # fmt: skip
        t.kernel("cutlass_gemm", base + 8200 if not fused else base + 20, base + 8300, 1000)


def exposed_comm(t: Trace, fused: bool) -> None:
    for i in range(3):
        base = 1000 * i
        t.kernel("ampere_sgemm", base, base + 10, 500)
        start = base + 20 if fused else base + 520  # overlapped by the GEMM, or after it
        t.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", base + 1, start, 400, stream=9)


def htod_copies(t: Trace, fused: bool) -> None:
    for i in range(3):
        t.kernel("ampere_sgemm", 100 * i, 100 * i + 10, 50)
        if not fused:
            t.kernel("Memcpy HtoD (Pageable -> Device)", 100 * i + 1, 100 * i + 70, 20,
                     cat="gpu_memcpy")  # fmt: skip


def host_stall(t: Trace, fused: bool) -> None:
    """A 5 ms wait for the next launch between two ops: bare, or covered by a CPU op."""
    for i in range(3):
        base = 10_000 * i
        t.op("aten::mm", base, 10)
        t.kernel("ampere_sgemm", base + 1, base + 20, 1000)
        if fused:  # the host's time between the ops is in ops (till the next iteration)
            t.op("aten::randint", base + 30, 6000)
            t.op("aten::randint", base + 6070, 3920)
        t.op("aten::copy_", base + 6050, 10)
        t.kernel("Memcpy HtoD (Pinned -> Device)", base + 6051, base + 6100, 5, cat="gpu_memcpy")


def host_bound_steps(t: Trace, fused: bool) -> None:
    """3 ProfilerSteps of 30 kernels of 50 µs, each launched 15 µs after the one before
    ends (the CPU behind: 450 µs of 2.1 ms per step), or all launched ahead (queued)."""
    for i in range(3):
        base = 2100 * i
        t.op(f"ProfilerStep#{i}", base, 2100, cat="user_annotation")
        for j in range(30):
            start = base + 70 * j + 5
            t.op("aten::mul", (base + j if fused else start - 5), 2)
            t.kernel("vectorized_elementwise_kernel", base + j if fused else start - 5, start, 50)


def misaligned_gemm(t: Trace, fused: bool) -> None:
    """An LM head on a vocabulary of 50257 (align1 kernels), or padded to 50304."""
    vocab, align = (50304, "align8") if fused else (50257, "align1")
    for i in range(3):
        t.op("aten::mm", 1000 * i, 10, **{"Input Dims": [[8192, 768], [768, vocab]],
             "Input type": ["c10::BFloat16", "c10::BFloat16"]})  # fmt: skip
        t.kernel(f"cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_{align}", 1000 * i + 1,
                 1000 * i + 50, 400)  # fmt: skip


def _allocations(t: Trace, total: int, reserved: int) -> None:
    """A kernel, and allocations on device 0 (80 GiB) rising to ``total`` under ``reserved``."""
    t.header["deviceProperties"][0]["totalGlobalMem"] = 80 << 30
    t.kernel("ampere_sgemm", 0, 10, 50)
    for i in range(1, 5):
        t.events.append({"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1,
                         "tid": 1, "ts": 10 * i, "args": {"Device Type": 1, "Device Id": 0,
                         "Bytes": total // 4, "Addr": i << 20, "Total Allocated": total * i // 4,
                         "Total Reserved": reserved}})  # fmt: skip


def near_the_limit(t: Trace, fused: bool) -> None:
    """Peak reserved 74 GiB of 80 (92.5%) for 70 allocated, or 60 GiB (75%) for 50: the
    reserve within 30% of the allocated peak either way."""
    _allocations(t, (50 if fused else 70) << 30, (60 if fused else 74) << 30)


def fragmented(t: Trace, fused: bool) -> None:
    """At the peak 13 (or 12) GiB reserved for 10 GiB allocated: +30% fires, +20% does not."""
    _allocations(t, 10 << 30, (12 if fused else 13) << 30)


CASES: list[tuple[str, Callable[[Trace, bool], None]]] = [
    ("memory-headroom", near_the_limit),
    ("memory-headroom", fragmented),
    ("fused-attention", unfused_attention),
    ("fused-norm", unfused_norm),
    ("low-precision", fp32_gemm),
    ("cuda-graphs", launch_bound),
    ("dataloader", data_loader),
    ("overlap-communication", exposed_comm),
    ("pinned-memory", htod_copies),
    ("host-stall", host_stall),
    ("cpu-bound", host_bound_steps),
    ("gemm-alignment", misaligned_gemm),
]


@pytest.mark.parametrize(("rule", "build"), CASES, ids=[f"{r}-{b.__name__}" for r, b in CASES])
def test_rule_fires_on_its_problem_only(
    rule: str, build: Callable[[Trace, bool], None], tmp_path: Path
) -> None:
    problem, fine = Trace(), Trace()
    build(problem, False)
    build(fine, True)
    assert rule in problem.rules(tmp_path)
    assert rule not in fine.rules(tmp_path)


def test_no_tensor_cores_no_precision_hint(tmp_path: Path) -> None:
    old = Trace(compute_major=6)
    fp32_gemm(old, False)
    assert "low-precision" not in old.rules(tmp_path)


def test_no_scan_for_the_data_loader_when_the_host_waits_cannot_reach_the_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = Trace()
    data_loader(t, False)
    assert "dataloader" in t.rules(tmp_path)
    t.kernel("ampere_sgemm_long", 30_000, 30_010, 1_000_000)  # the 21 ms of waits: below 5%

    def no_scan(*args: Any) -> None:
        raise AssertionError("the CPU rows were scanned")

    monkeypatch.setattr(hints, "cpu_contexts", no_scan)
    assert "dataloader" not in t.rules(tmp_path)


def test_every_rule_has_a_case_and_a_doc() -> None:
    documented = Path(__file__).parents[2].joinpath("docs", "hints.md").read_text()
    rules = {rule for rule, _ in CASES}
    assert len(rules) == len(hints.RULES)
    for rule in rules:
        assert f"\n## {rule}\n" in documented


def _bf16_mm(t: Trace, kernel: str, dtype: str = "c10::BFloat16") -> None:
    for i in range(3):
        t.op("aten::mm", 1000 * i, 10, **{"Input Dims": [[1024, 1024], [1024, 1024]],
             "Input type": [dtype, dtype]})  # fmt: skip
        t.kernel(kernel, 1000 * i + 1, 1000 * i + 50, 400)


@pytest.mark.parametrize(
    ("kernel", "dtype", "fires"),
    [
        # bf16 tensor-core kernels with an fp32 accumulator (s1688): not fp32 GEMMs
        ("cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align8", None, False),
        # the op's input types decide over a name that looks like an sgemm
        ("void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4, true>", "c10::BFloat16", False),
        ("cublasGemmSmallNParams", None, False),  # not an sgemm, whatever its letters
        ("nvjet_sm90_tst_128x256_64x4_1x2_h_bz_coopA_TNT", "float", True),
        ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_ffma", None, True),
        ("sm80_xmma_gemm_tf32f32_tf32f32_f32_nn", "float", False),  # TF32 already
    ],
)  # fmt: skip
def test_precision_comes_from_the_op_then_the_name(
    kernel: str, dtype: str | None, fires: bool, tmp_path: Path
) -> None:
    t = Trace(compute_major=9)
    if dtype is None:
        for i in range(3):
            t.op("aten::mm", 1000 * i, 10)
            t.kernel(kernel, 1000 * i + 1, 1000 * i + 50, 400)
    else:
        _bf16_mm(t, kernel, dtype)
    assert ("low-precision" in t.rules(tmp_path)) is fires


def test_small_pageable_copies_or_pinned_ones_give_no_pinned_memory_hint(tmp_path: Path) -> None:
    pinned, tiny = Trace(), Trace()
    for i in range(3):
        pinned.kernel("ampere_sgemm", 100 * i, 100 * i + 10, 50)
        pinned.kernel("Memcpy HtoD (Pinned -> Device)", 100 * i + 1, 100 * i + 70, 20,
                      cat="gpu_memcpy")  # fmt: skip
    for i in range(300):
        tiny.kernel("ampere_sgemm", 100 * i, 100 * i + 10, 80)
    tiny.kernel("Memcpy HtoD (Pageable -> Device)", 1, 30_000, 2, cat="gpu_memcpy")
    assert "pinned-memory" not in pinned.rules(tmp_path)
    assert "pinned-memory" not in tiny.rules(tmp_path)  # 2 µs of a 30 ms window


def test_host_stall_evidence_names_the_ops_and_the_share(tmp_path: Path) -> None:
    t = Trace()
    host_stall(t, False)
    hint = t.hints(tmp_path)["host-stall"]
    # 3 waits for the copy's launch (6,051 − 1,020 µs, 1 µs of it in aten::copy_) and 2 for
    # the next iteration's (10,001 − 6,105 µs, 1 µs in aten::mm): 22,880 µs of 26,085 µs
    assert hint.evidence.startswith(
        "5 device gaps held 22.9 ms (87.7% of the device window) by host time that no CPU op"
        " or sync call covers (the longest 5.0 ms), in a trace without steps;"
    )
    assert "between aten::mm and aten::copy_" in hint.evidence
    assert hint.as_dict()["doc"] == "docs/hints.md#host-stall"


def test_cpu_bound_names_the_steps_the_gaps_and_the_ops(tmp_path: Path) -> None:
    t = Trace()
    host_bound_steps(t, False)
    hint = t.hints(tmp_path)["cpu-bound"]
    # 29 gaps of 20 µs per step, 15 µs of each before the launch; the first step's first
    # kernel starts the window, every later step's first gap (from the step before) counts
    assert hint.stake_ns == (29 + 30 + 30) * 15_000
    assert hint.evidence.startswith("89 host-held gaps shorter than a stall (median 15.0 µs)")
    assert "in ProfilerStep #0, #1, #2 (3 of 3 steps)" in hint.evidence
    assert "launched by aten::mul 1.3 ms" in hint.evidence
    assert "CUDA graphs" in hint.action and "larger batches" in hint.action


def test_gemm_alignment_names_the_dimension_and_the_padded_size(tmp_path: Path) -> None:
    t = Trace()
    misaligned_gemm(t, False)
    hint = t.hints(tmp_path)["gemm-alignment"]
    assert "1 GEMM(s) with N = 50257 (not a multiple of 8) 1.2 ms: aten::mm" in hint.evidence
    assert "no aligned GEMM in the trace to compare with" in hint.evidence
    assert hint.stake_ns is not None and "an upper bound" in hint.evidence
    assert hint.action.startswith("pad 50257 to 50264 (a multiple of 8) or 50304 (of 64)")


def test_a_hint_needs_a_material_share_of_the_window(tmp_path: Path) -> None:
    """The same fp32 GEMMs, alone or beside 100x their time of other work."""
    t = Trace(compute_major=9)
    fp32_gemm(t, False)
    assert "low-precision" in t.rules(tmp_path)
    t.kernel("vectorized_elementwise_kernel", 5000, 5000, 200_000)
    assert "low-precision" not in t.rules(tmp_path)

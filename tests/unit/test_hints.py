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

    def op(self, name: str, ts: float, dur: float, cat: str = "cpu_op") -> None:
        self.events.append({"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1,
                            "ts": ts, "dur": dur})  # fmt: skip

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

    def rules(self, tmp_path: Path) -> set[str]:
        path = tmp_path / "t.json"
        path.write_text(json.dumps({**self.header, "traceEvents": self.events}))
        view = overview(collect_events(TraceReader(path), keep_cpu=True))
        return {h.rule for h in view.hints}


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

"""Model FLOPs, MFU and tokens per step (docs/metrics.md "Model FLOPs and MFU"): on
h200/train.json.gz (GPT-2 small: 12 layers, d = 768, 12 heads, vocab 50257, batch 8 × 1024,
bf16) against the analytic count and against a plain sum over the raw events; where shapes are
missing or cover too little of the GPU time, MFU is not printed and the output says why."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import reference as ref
from conftest import SHARED_TRACES, RealTrace
from typer.testing import CliRunner

from traceview.analyses.core.devices import launch_times
from traceview.analyses.core.steps import Window, step_table
from traceview.analyses.ops import model_flops
from traceview.cli import app

H200 = SHARED_TRACES / "h200"
needs_h200 = pytest.mark.skipif(not H200.is_dir(), reason="../shared/traces/h200 is absent")

# GPT-2 small as recorded in train.json.gz.
LAYERS, D, HEADS, VOCAB, BATCH, SEQ = 12, 768, 12, 50257, 8, 1024
TOKENS = BATCH * SEQ
# Forward GEMMs: per layer QKV 6·T·d², projection 2·T·d², MLP 16·T·d²; the LM head 2·T·d·V.
FORWARD_GEMM = LAYERS * 24 * TOKENS * D * D + 2 * TOKENS * D * VOCAB
# Attention's two matmuls, dense: 4·B·H·S²·(d/H) a layer forward.
FORWARD_ATTENTION = LAYERS * 4 * BATCH * HEADS * SEQ * SEQ * (D // HEADS)
# Backward = 2 × forward.
STEP_FLOPS = 3 * FORWARD_GEMM + 3 * FORWARD_ATTENTION


def _run(*args: str) -> Any:
    r = CliRunner().invoke(app, [*args, "--no-cache"])
    assert r.exit_code == 0, r.output
    return r.stdout


@cache
def _json(command: str, name: str) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(_run(command, str(H200 / name), "-f", "json"))
    return out


def test_the_analytic_count_is_the_issue_s() -> None:
    assert pytest.approx(6.07e12, rel=1e-3) == 3 * FORWARD_GEMM
    assert pytest.approx(9.28e11, rel=1e-3) == 3 * FORWARD_ATTENTION
    assert pytest.approx(7.00e12, rel=1e-3) == STEP_FLOPS


@needs_h200
def test_train_model_flops_per_step_are_the_analytic_count() -> None:
    steps = _json("steps", "train.json.gz")["steps"]
    assert len(steps) == 8
    for s in steps:
        assert s["model_flops"] == STEP_FLOPS  # exactly: every GEMM and attention counted once
        assert s["tokens"] == TOKENS and s["tokens_source"] == "aten::embedding indices"
        assert s["tflops_per_s"] == pytest.approx(STEP_FLOPS / (s["step_time_us"] * 1e-6) / 1e12)
        assert s["mfu"] == pytest.approx(s["tflops_per_s"] / 989.5)
        assert s["flops_coverage"] >= 0.8


@needs_h200
def test_train_flops_match_a_plain_sum_over_the_raw_events() -> None:
    """Per step: the innermost GEMM / attention calls (a call holding another on its thread is
    a wrapper), their FLOPs from the shapes by hand, summed by the step holding their start."""
    _, raw = ref.load_trace(H200 / "train.json.gz")
    windows = ref.step_windows(raw)
    calls = [e for e in raw if e.get("cat") == "cpu_op" and _flops(e) is not None]
    by_thread: dict[Any, list[Any]] = defaultdict(list)
    for e in calls:
        by_thread[e["tid"]].append(ref.interval_ns(e))
    per_step: dict[int, int] = defaultdict(int)
    for e in calls:
        start, end = ref.interval_ns(e)
        inner = [
            (a, b)
            for a, b in by_thread[e["tid"]]
            if start <= a and b <= end and (a, b) != (start, end)
        ]
        if inner:
            continue
        step = next(n for n, (a, b, _) in windows.items() if a <= start <= b)
        per_step[step] += _flops(e) or 0
    got = {s["step"]: s["model_flops"] for s in _json("steps", "train.json.gz")["steps"]}
    assert got == dict(per_step)


def _flops(e: dict[str, Any]) -> int | None:
    """The model FLOPs of the op calls train.json.gz has, by hand."""
    dims = e.get("args", {}).get("Input Dims")
    name = e["name"]
    if not dims:
        return None
    if name == "aten::mm":
        (m, k), (_, n) = dims[0], dims[1]
        return 2 * m * n * k
    if name == "aten::addmm":
        (m, k), (_, n) = dims[1], dims[2]
        return 2 * m * n * k
    if name in ("aten::scaled_dot_product_attention", "aten::_scaled_dot_product_cudnn_attention",
                "aten::_cudnn_attention_forward"):  # fmt: skip
        b, h, s, d = dims[0]
        return 4 * b * h * s * dims[1][2] * d
    if name in ("aten::_scaled_dot_product_cudnn_attention_backward",
                "aten::_cudnn_attention_backward"):  # fmt: skip
        b, h, s, d = dims[1]
        return 8 * b * h * s * dims[2][2] * d
    return None


@needs_h200
def test_train_summary_mfu() -> None:
    mfu = _json("summary", "train.json.gz")["mfu"]
    steps = _json("steps", "train.json.gz")["steps"]
    seconds = sum(s["step_time_us"] for s in steps) / 1e6
    assert mfu["value"] == pytest.approx(len(steps) * STEP_FLOPS / seconds / 989.5e12)
    assert mfu["peak_tflops_per_s"] == 989.5 and mfu["peak_source"] == "table"
    assert mfu["dtype"] == "bf16" and mfu["coverage"] >= 0.8
    assert mfu["model_flops_per_step"] == STEP_FLOPS
    assert mfu["tokens_per_s"] == pytest.approx(len(steps) * TOKENS / seconds)
    assert "no causal discount" in mfu["convention"] and mfu["why_not"] is None
    text = _run("summary", str(H200 / "train.json.gz"))
    line = next(x for x in text.splitlines() if x.startswith("mfu "))
    tokens = f"{mfu['tokens_per_s']:,.0f}"
    assert line.startswith(
        f"mfu      MFU {100 * mfu['value']:.2f}% (bf16 peak 989.5 TFLOP/s, table), "
        f"7.00 TFLOP a step, {tokens} tokens/s, coverage {100 * mfu['coverage']:.2f}%; "
        f"{mfu['tflops_per_s']:,.1f} TFLOP/s achieved, tokens from aten::embedding indices"
    )


@needs_h200
def test_peaks_file_replaces_the_table() -> None:
    # A --peaks file that gives this GPU half the bf16 peak doubles MFU, and is named.
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        peaks = Path(d) / "peaks.json"
        peaks.write_text(
            json.dumps({"devices": [{"names": ["NVIDIA H200"], "tflops": {"bf16": 494.75}}]})
        )
        out = json.loads(
            _run("summary", str(H200 / "train.json.gz"), "-f", "json", "--peaks", str(peaks))
        )
    table = _json("summary", "train.json.gz")["mfu"]
    assert out["mfu"]["peak_source"] == "--peaks file"
    assert out["mfu"]["value"] == pytest.approx(2 * table["value"])


@needs_h200
def test_no_shapes_no_mfu() -> None:
    """graphs.json.gz recorded no shapes: no MFU, and the output says why."""
    mfu = _json("summary", "graphs.json.gz")["mfu"]
    assert mfu["value"] is None and "record_shapes=True" in mfu["why_not"]
    text = _run("summary", str(H200 / "graphs.json.gz"))
    assert "mfu      not given: no shapes recorded" in text
    assert "MFU " not in text
    steps = _json("steps", "graphs.json.gz")
    assert all(s["mfu"] is None and s["model_flops"] is None for s in steps["steps"])
    assert any("MFU not given" in n for n in steps["notes"])


class _Trace:
    """A hand-built kineto trace: one ProfilerStep, ops on one thread, kernels on device 0."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.correlation = 0

    def op(self, name: str, ts: float, dur: float, **args: Any) -> None:
        self.events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
                            "ts": ts, "dur": dur, "args": args})  # fmt: skip

    def kernel(self, name: str, launch: float, ts: float, dur: float) -> None:
        self.correlation += 1
        self.events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                            "pid": 1, "tid": 1, "ts": launch, "dur": 1,
                            "args": {"correlation": self.correlation}})  # fmt: skip
        self.events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7,
                            "ts": ts, "dur": dur, "args": {"correlation": self.correlation,
                            "device": 0, "stream": 7}})  # fmt: skip

    def write(self, path: Path) -> Path:
        self.events.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1",
                            "pid": 1, "tid": 1, "ts": 0, "dur": 1000, "args": {}})  # fmt: skip
        header = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}
        path.write_text(json.dumps({**header, "traceEvents": self.events}))
        return path


MM = {"Input Dims": [[1024, 1024], [1024, 1024]], "Input type": ["c10::BFloat16"] * 2}


def test_nested_calls_count_once(tmp_path: Path) -> None:
    """An autocast addmm wrapping a bf16 addmm, linear → addmm and the math SDPA path → two
    bmm count once each; a position embedding looks up fewer tokens than the token one."""
    t = _Trace()
    addmm = {"Input Dims": [[1024], [2048, 1024], [1024, 1024]],
             "Input type": ["float"] * 3}  # fmt: skip
    t.op("aten::addmm", 10, 50, **addmm)
    t.op("aten::addmm", 20, 30, **{**addmm, "Input type": ["c10::BFloat16"] * 3})
    t.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 25, 100, 50)
    t.op("aten::linear", 100, 50, **{"Input Dims": [[2, 1024, 1024], [1024, 1024], [1024]],
                                     "Input type": ["c10::BFloat16"] * 3})  # fmt: skip
    t.op("aten::addmm", 110, 30, **{**addmm, "Input type": ["c10::BFloat16"] * 3})
    t.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 115, 200, 50)
    qkv = [[4, 8, 256, 64]] * 3
    t.op("aten::scaled_dot_product_attention", 200, 100,
         **{"Input Dims": qkv, "Input type": ["c10::BFloat16"] * 3})  # fmt: skip
    t.op("aten::bmm", 210, 10, **{"Input Dims": [[32, 256, 64], [32, 64, 256]],
                                  "Input type": ["c10::BFloat16"] * 2})  # fmt: skip
    t.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 215, 300, 20)
    t.op("aten::bmm", 250, 10, **{"Input Dims": [[32, 256, 256], [32, 256, 64]],
                                  "Input type": ["c10::BFloat16"] * 2})  # fmt: skip
    t.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 255, 330, 20)
    t.op("aten::embedding", 400, 5, **{"Input Dims": [[50257, 768], [4, 256]],
                                       "Input type": ["float", "long int"]})  # fmt: skip
    t.op("aten::embedding", 410, 5, **{"Input Dims": [[1024, 768], [1, 256]],
                                       "Input type": ["float", "long int"]})  # fmt: skip
    path = t.write(tmp_path / "t.json")
    (step,) = json.loads(_run("steps", str(path), "-f", "json"))["steps"]
    gemm = 2 * 2048 * 1024 * 1024
    attention = 4 * 4 * 8 * 256 * 256 * 64  # the two bmm: 2 × 2·32·256·256·64
    assert step["model_flops"] == 2 * gemm + attention
    assert step["tokens"] == 4 * 256 and step["tokens_source"] == "aten::embedding indices"
    assert step["flops_coverage"] == 1.0


def test_low_coverage_is_not_printed(tmp_path: Path) -> None:
    """90% of the kernel time in GEMMs launched by an op without a FLOPs rule: the FLOPs are
    known for 10% of it, so no MFU, and the output says why."""
    t = _Trace()
    t.op("my_lib::fused_gemm", 10, 20)
    for i in range(3):  # three kernels: no single one makes the step degenerate
        t.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 15 + i, 100 + 300 * i, 300)
    t.op("aten::mm", 50, 20, **MM)
    t.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 55, 1000, 100)
    path = t.write(tmp_path / "t.json")
    out = json.loads(_run("summary", str(path), "-f", "json"))["mfu"]
    assert out["value"] is None and out["coverage"] == pytest.approx(0.1)
    assert "below 80%" in out["why_not"]
    text = _run("summary", str(path))
    assert "mfu      not given: model FLOPs known for only 10.0% of the kernel time" in text
    (step,) = json.loads(_run("steps", str(path), "-f", "json"))["steps"]
    assert step["mfu"] is None and step["model_flops"] == 2 * 1024**3
    # The same trace with the op's shapes known elsewhere: an aten::mm of all of it prints.
    t = _Trace()
    t.op("aten::mm", 10, 20, **MM)
    for i in range(3):
        t.kernel("sm90_xmma_gemm_bf16bf16_bf16f32", 15 + i, 100 + 300 * i, 300)
    path = t.write(tmp_path / "u.json")
    out = json.loads(_run("summary", str(path), "-f", "json"))["mfu"]
    assert out["value"] is not None and out["coverage"] == 1.0


def test_coverage_in_slices_is_the_members_figures(
    real_trace: RealTrace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``_coverage`` a few GPU rows at a time (steps' memory) gives the figures of the
    steps' members: on the trace's steps, and on windows back to back whose shared ends
    are launch points (such a point is in both)."""
    events = real_trace.events
    if not len(events.gpu.ts):
        pytest.skip("no GPU rows")
    found = model_flops.linked(events)
    launch = launch_times(events, found.links.launch)
    points = np.unique(launch)
    cuts = points[:: max(len(points) // 6, 1)].tolist()
    kinds = [
        [Window(r.cpu_start_ns, r.cpu_end_ns, r.gpu_only) for r in step_table(events)],
        [Window(a, b, False) for a, b in itertools.pairwise(cuts)],
        [Window(a, b, True) for a, b in itertools.pairwise(cuts)],
    ]
    for windows in kinds:
        if not windows or not model_flops._in_slices(events, windows):
            continue
        known = model_flops.known_rows(events, found.links, found.category)
        args = (events, known, windows, launch)
        monkeypatch.setattr(model_flops, "_SLICE_ROWS", 7)
        assert np.array_equal(model_flops.known_rows(events, found.links, found.category), known)
        sliced = model_flops._coverage(*args)
        monkeypatch.setattr(model_flops, "_in_slices", lambda *_: False)
        whole = model_flops._coverage(*args)
        monkeypatch.undo()
        assert [a.tolist() for a in sliced] == [a.tolist() for a in whole]


def test_calls_counted_later_are_the_calls_counted_at_once(real_trace: RealTrace) -> None:
    """``linked(count=False)`` keeps the model-FLOPs ops' rows as gathered (summary counts
    them once it has let go of the runtime calls): counted, they are ``linked``'s calls; the
    rows are given once."""
    events = real_trace.events
    at_once = model_flops.linked(events).calls
    found = model_flops.linked(events, count=False)
    assert isinstance(found.calls, model_flops.Picked)
    later = found.counted(events)
    assert isinstance(at_once, model_flops.Calls)
    assert later.ts.tolist() == at_once.ts.tolist()
    assert later.pair.tolist() == at_once.pair.tolist()
    assert (later.works, later.shapes) == (at_once.works, at_once.shapes)
    with pytest.raises(RuntimeError, match="taken already"):
        found.counted(events)

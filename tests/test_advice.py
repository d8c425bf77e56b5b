"""Issue #36 on the modern H200 traces whose right answers are known (../shared/traces/h200,
README there): categories, precision, hints, op rates, energy periods and kernel names. Each
figure is checked against a deliberately simple computation on the raw events."""

from __future__ import annotations

import gzip
import json
from functools import cache
from typing import Any

import pytest
from conftest import SHARED_TRACES
from typer.testing import CliRunner

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
    """``traceview <args> -f json`` on a trace of ../shared/traces/h200, parsed."""
    command, trace, *rest = args
    r = CliRunner().invoke(app, [command, str(H200 / trace), "-f", "json", "--no-cache", *rest])
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

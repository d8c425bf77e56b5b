"""FLOPs and bytes of op calls: hand-computed on shapes from the real traces, and the formulas
against deliberately simple ones (tests/reference.py) on random shapes."""

from __future__ import annotations

import json

import reference as ref
from hypothesis import given
from hypothesis import strategies as st

from traceview.analyses.ops.flops import op_work

BF16 = '"c10::BFloat16"'


def _work(name: str, dims: object, types: list[str], concrete: object = None) -> object:
    raw = json.dumps(concrete).encode() if concrete is not None else b""
    return op_work(name, json.dumps(dims).encode(), json.dumps(types).encode(), raw)


def test_mm_from_the_field_notes() -> None:
    # aten::mm [[8944,1024],[1024,1024]] bf16 (FIELD-NOTES.md): 2·M·N·K, (MK+KN+MN)·2 bytes.
    work = _work("aten::mm", [[8944, 1024], [1024, 1024]], ["c10::BFloat16"] * 2)
    assert work is not None
    assert work.flops == 2 * 8944 * 1024 * 1024 == 18_756_927_488
    assert work.bytes == (8944 * 1024 + 1024 * 1024 + 8944 * 1024) * 2 == 38_731_776


def test_real_trace_shapes_by_hand() -> None:
    # tracelens h100 bert: addmm [[512], [141, 512], [512, 512]] bf16.
    addmm = _work("aten::addmm", [[512], [141, 512], [512, 512], [], []],
                  ["c10::BFloat16"] * 3 + ["Scalar"] * 2, ["", "", "", "1", "1"])  # fmt: skip
    assert addmm is not None
    assert (addmm.flops, addmm.bytes) == (73_924_608, 2 * (72_192 + 262_144 + 72_192 + 512))
    # The same trace's SDPA: [1, 8, 141, 64] bf16, is_causal False: 4·B·H·Nq·Nkv·d.
    sdpa = _work(
        "aten::scaled_dot_product_attention",
        [[1, 8, 141, 64]] * 3 + [[]] * 5,
        ["c10::BFloat16"] * 3 + ["", "Scalar", "Scalar", "", "Scalar"],
        ["", "", "", "", "0.", "False", "", "False"],
    )
    assert sdpa is not None
    assert (sdpa.flops, sdpa.bytes) == (40_716_288, 4 * 72_192 * 2)
    # tracelens mi300 resnet: conv2d [[10, 64, 56, 56], [64, 64, 3, 3]] stride 1, pad 1.
    conv = _work(
        "aten::conv2d",
        [[10, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], []],
        ["c10::BFloat16", "c10::BFloat16", "", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
        ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"],
    )
    assert conv is not None
    assert conv.flops == 2 * 10 * 64 * 64 * 3 * 3 * 56 * 56 == 2_312_110_080
    # hta mi250 minitoy: mm [[128, 5], [5, 128]] float.
    mm = _work("aten::mm", [[128, 5], [5, 128]], ["float", "float"])
    assert mm is not None and (mm.flops, mm.bytes) == (163_840, (640 + 640 + 16_384) * 4)


def test_unknown_is_none_never_guessed() -> None:
    assert _work("aten::mm", [[4, 3], [5, 6]], ["float", "float"]) is None  # K differs
    assert _work("aten::mm", [[4, 3], [3, 6]], ["Scalar", "float"]) is None  # no size
    assert _work("aten::relu", [[4, 3]], ["float"]) is None
    # Causal or not unknown (no Concrete Inputs): no FLOPs.
    assert _work("aten::_scaled_dot_product_flash_attention", [[1, 2, 3, 4]] * 3,
                 ["float"] * 3) is None  # fmt: skip
    conv = [[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []]
    assert _work("aten::conv2d", conv, ["float", "float"]) is None  # stride unknown
    assert op_work("aten::mm", b"[[1, 2], [2", b'["float"]', b"") is None


def test_causal_halves() -> None:
    args = ([[2, 4, 16, 8]] * 3 + [[]] * 4, ["c10::Half"] * 3 + ["Scalar"] * 4)
    full = _work("aten::_scaled_dot_product_flash_attention", *args, ["", "", "", "0.", "False",
                 "False", "0.1"])  # fmt: skip
    half = _work("aten::_scaled_dot_product_flash_attention", *args, ["", "", "", "0.", "True",
                 "False", "0.1"])  # fmt: skip
    assert full is not None and half is not None
    assert full.flops == 4 * 2 * 4 * 16 * 16 * 8 == 2 * half.flops
    assert full.bytes == half.bytes


sizes = st.integers(min_value=1, max_value=9)


@given(st.lists(sizes, min_size=1, max_size=3), st.lists(sizes, min_size=1, max_size=3),
       sizes, sizes, sizes, st.sampled_from(["float", "c10::BFloat16"]))  # fmt: skip
def test_matmul_against_numpy_shapes(
    batch_a: list[int], batch_b: list[int], m: int, k: int, n: int, dtype: str
) -> None:
    batch_b = batch_b[-len(batch_a) :]  # broadcastable: equal or 1
    batch_b = [x if i % 2 else 1 for i, x in enumerate(batch_b)]
    batch_a = batch_a[-len(batch_b) :]
    batch_a = [y if b == 1 else b for y, b in zip(batch_a, batch_b, strict=True)]
    a, b = [*batch_a, m, k], [*batch_b, k, n]
    work = _work("aten::matmul", [a, b], [dtype, dtype])
    want = ref.op_flops_bytes("aten::matmul", {"Input Dims": [a, b], "Input type": [dtype] * 2})
    assert work is not None and want is not None
    assert (work.flops, work.bytes) == want


@given(sizes, sizes, sizes, sizes, st.booleans())
def test_gemms_against_reference(b: int, m: int, k: int, n: int, bias: bool) -> None:
    t = ["float"] * 3
    cases = {
        "aten::mm": [[m, k], [k, n]],
        "aten::addmm": [[n], [m, k], [k, n], [], []],
        "aten::bmm": [[b, m, k], [b, k, n]],
        "aten::linear": [[b, m, k], [n, k], [n] if bias else []],
    }
    for name, dims in cases.items():
        work = _work(name, dims, t)
        assert work is not None
        want = ref.op_flops_bytes(name, {"Input Dims": dims, "Input type": t})
        assert (work.flops, work.bytes) == want, name


@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 4), st.integers(3, 12),
       st.integers(3, 12), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2),
       st.integers(1, 2), st.integers(1, 2))  # fmt: skip
def test_conv2d_against_counted_positions(
    batch: int, groups: int, per_group: int, h: int, w: int, r: int, s: int, pad: int,
    stride: int, dil: int,
) -> None:  # fmt: skip
    channels, k = groups * per_group, groups * 2
    dims = [[batch, channels, h, w], [k, per_group, r, s], [], [], [], [], []]
    concrete = ["", "", "", f"[{stride}, {stride}]", f"[{pad}, {pad}]", f"[{dil}, {dil}]",
                str(groups)]  # fmt: skip
    work = _work("aten::conv2d", dims, ["float"] * 2, concrete)
    want = ref.op_flops_bytes(
        "aten::conv2d", {"Input Dims": dims, "Input type": ["float"], "Concrete Inputs": concrete}
    )
    assert want is not None
    if want[0] == 0:  # no window position fits: no output
        assert work is None
        return
    assert work is not None
    assert (work.flops, work.bytes) == want


def _model(name: str, dims: object, types: list[str], concrete: object = None) -> object:
    from traceview.analyses.ops.flops import model_work

    raw = json.dumps(concrete).encode() if concrete is not None else b""
    return model_work(name, json.dumps(dims).encode(), json.dumps(types).encode(), raw)


def test_model_flops_conventions() -> None:
    """Model FLOPs (docs/metrics.md "Model FLOPs and MFU"): attention dense whatever the
    causal flag, backward 2× forward (q at 1, heads first or sequence first); a convolution's
    backward 2× its forward."""
    q = [4, 8, 256, 64]  # [B, H, S, D]
    dense = 4 * 4 * 8 * 256 * 256 * 64
    causal = ["", "", "", "", "0.", "True", "", "False"]
    sdpa = _model("aten::scaled_dot_product_attention", [q] * 3, ["c10::BFloat16"] * 3, causal)
    assert sdpa is not None and sdpa.flops == dense  # no causal discount
    ops_view = _work("aten::scaled_dot_product_attention", [q] * 3, ["c10::BFloat16"] * 3, causal)
    assert ops_view is not None and ops_view.flops == dense // 2  # ops counts what runs
    back = _model("aten::_scaled_dot_product_flash_attention_backward",
                  [q] * 5, ["c10::BFloat16"] * 5)  # fmt: skip
    assert back is not None and back.flops == 2 * dense
    seq_first = [4, 256, 8, 64]  # [B, S, H, D]
    flash = _model("aten::_flash_attention_backward", [seq_first] * 5, ["c10::Half"] * 5)
    assert flash is not None and (flash.flops, flash.dtype) == (2 * dense, "c10::Half")
    conv = _model(
        "aten::convolution_backward",
        [[10, 64, 56, 56], [10, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], [], [], [], []],
        ["c10::BFloat16"] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", ""],
        ["", "", "", "[64]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", ""],
    )
    assert conv is not None and conv.flops == 2 * 2_312_110_080
    assert _model("aten::add", [[4], [4]], ["float"] * 2) is None  # no matmul work: no rule

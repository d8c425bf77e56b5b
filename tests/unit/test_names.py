"""Short kernel names."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview.analyses.core import names
from traceview.analyses.core.names import demangled, display_names, short_name, short_names

CASES = [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3>)", "at::native::vectorized_elementwise_kernel"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>("
     "float, float const*, float*)",
     "at::native::(anonymous namespace)::vectorized_layer_norm_kernel"),
    ("ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_tn"),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
     "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
    ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)"),
    ("Memset (Device)", "Memset (Device)"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>("
     "cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4::Params)", "cutlass::Kernel2"),
    ("std::enable_if<!(false), void>::type internal::gemvx::kernel<int, float>(cublasGemvParamsEx"
     "<int, float>)", "internal::gemvx::kernel"),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<F>(at::"
     "TensorIteratorBase&, F const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<F>(at::"
     "TensorIteratorBase&, F const&)::{lambda(int)#1})", "at::native::elementwise_kernel"),
    ("triton_poi_fused_add_mul_0", "triton_poi_fused_add_mul_0"),
    ("void foo<(char)60>(int) const", "foo"),
    ("unbalanced<a(b)", "unbalanced<a(b)"),
    ("", ""),
]  # fmt: skip


@pytest.mark.parametrize(("name", "short"), CASES)
def test_short_name(name: str, short: str) -> None:
    assert short_name(name) == short


# Text made of what the parser looks at, so brackets nest, balance and fail to balance often.
_PIECES = st.sampled_from(
    ["<", ">", "(", ")", " ", "::", "-", "->", "operator", " const", "void ", "a", "f", "int", ","]
)


@settings(max_examples=2000, deadline=None)
@given(pieces=st.lists(_PIECES, max_size=24))
def test_short_name_matches_the_character_by_character_reference(pieces: list[str]) -> None:
    name = "".join(pieces)
    assert short_name.__wrapped__(name) == _reference_short_name(name)


def test_short_name_of_the_cases_matches_the_reference() -> None:
    for name, _ in CASES:
        assert short_name.__wrapped__(name) == _reference_short_name(name)
    assert short_names([n for n, _ in CASES]) == [s for _, s in CASES]


def _reference_short_name(name: str) -> str:
    """short_name as it was written first, a Python step per character: the reference."""
    bare = _ref_without_templates(name)
    if bare is None:
        return name
    function = _ref_function_name(bare)
    if function is not None:
        return function
    return bare.strip() if bare != name else name


def _ref_without_templates(name: str) -> str | None:
    """The name with every <...> removed; None if the angle brackets do not balance."""
    out: list[str] = []
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<" and not name.startswith("operator", max(0, i - 8)):
            depth += 1
        elif ch == ">" and depth and name[i - 1 : i] != "-":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out) if depth == 0 else None


def _ref_function_name(text: str) -> str | None:
    """``ns::f`` from ``[void|type] ns::f(args) [const]``; None if ``text`` is no call."""
    text = text.rstrip().removesuffix(" const").rstrip()
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            head = text[:i]
            break
    else:
        return None
    if not head or head[-1] in " (":
        return None
    tokens = _ref_top_level_tokens(head.removeprefix("void "))
    if len(tokens) == 1 or "::" in tokens[-1]:  # one word, or a return type then ns::name
        return tokens[-1]
    return None  # prose with a parenthesised remark, e.g. "Memcpy HtoD (Pageable -> Device)"


def _ref_top_level_tokens(text: str) -> list[str]:
    """Split ``text`` at spaces that are not inside parentheses."""
    tokens: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == " " and depth == 0:
            if current:
                tokens.append("".join(current))
            current = []
        else:
            current.append(ch)
    if current:
        tokens.append("".join(current))
    return tokens


# Real names: the demo's cutlass kernels and kineto__resnet50_profiler_api_nw0's convolutions.
CUTLASS = [
    f"void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_{t}_align4>("
    f"cutlass_80_tensorop_s1688gemm_{t}_align4::Params)"
    for t in ("128x128_32x3_nn", "128x128_32x3_tn", "256x128_32x3_nt")
]
CONV = [
    f"void implicit_convolve_sgemm<float, float, {a}, 1, false, true, true>(int, int, int, "
    "float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, "
    "float, float, int, float const*, float const*, bool, int, int)"
    for a in ("1024, 5, 5, 3, 3, 3", "1024, 6, 7, 3, 3, 5", "128, 5, 5, 3, 3, 3")
]
ELEMENTWISE = [
    "void at::native::vectorized_elementwise_kernel<2, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>"
    ", at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "at::detail::Array<char*, 3>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::"
    "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::"
    "operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::"
    "GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()"
    "() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)",
]
K = "at::native::vectorized_elementwise_kernel"


def test_display_names_keep_just_the_template_arguments_that_differ() -> None:
    shown = display_names([*CUTLASS, *CONV, *ELEMENTWISE, "ampere_sgemm_128x64_tn"])
    assert [shown[n] for n in CUTLASS] == [
        "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>",
        "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_tn_align4>",
        "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_256x128_32x3_nt_align4>",
    ]
    assert [shown[n] for n in CONV] == [
        "implicit_convolve_sgemm<…, 1024, 5, …>",
        "implicit_convolve_sgemm<…, 1024, 6, …>",
        "implicit_convolve_sgemm<…, 128, 5, …>",
    ]
    assert [shown[n] for n in ELEMENTWISE] == [
        f"{K}<2, CUDAFunctor_add<float>, …>",
        f"{K}<4, CUDAFunctor_add<float>, …>",
        f"{K}<4, CUDAFunctor_add<BFloat16>, …>",
        f"{K}<4, GeluCUDAKernelImpl()::{{lambda(float)#1}}, …>",
    ]
    assert shown["ampere_sgemm_128x64_tn"] == "ampere_sgemm_128x64_tn"  # alone: its short name


def test_a_name_without_a_collision_keeps_its_short_name() -> None:
    assert display_names([CUTLASS[0], ELEMENTWISE[0]]) == {
        CUTLASS[0]: "cutlass::Kernel2",
        ELEMENTWISE[0]: K,
    }


def test_names_the_arguments_cannot_tell_apart_get_a_stable_number() -> None:
    """Same template arguments, other parameters: ``#k`` by full name, whatever the order."""
    names = ["void k<int>(float)", "void k<int>(int)", "k(double)"]
    for order in (names, names[::-1], sorted(names)):
        assert display_names(order) == {
            "k(double)": "k #1",
            "void k<int>(float)": "k #2",
            "void k<int>(int)": "k #3",
        }


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([*CUTLASS, *CONV, *ELEMENTWISE, "x", "k #1", "void k<int>(int)",
                                 "void k<long>(int)", "k(int)", "k #2", ""]),
                unique=True),
       st.randoms())  # fmt: skip
def test_display_names_are_unique_and_independent_of_order(
    names: list[str], rnd: random.Random
) -> None:
    shown = display_names(names)
    assert len(set(shown.values())) == len(names)
    shuffled = names[:]
    rnd.shuffle(shuffled)
    assert display_names(shuffled) == shown


# Mangled names recorded in tracelens__inference__sglang_decode (aiter) and vllm_decode (ck_tile).
AITER = [
    "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi256ELi16ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4"
    "_diiiiiiib",
    "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_"
    "diiiiiiib",
]
CK_TILE = (
    "_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPip"
    "elineProblemIDF16bDF16bfDF16bDF16bDF16bffNS_19Generic2dBlockShapeINS_8sequenceIJLi1ELi3072EEEE"
    "NS5_IJLi1ELi128EEEENS5_IJLi1ELi8EEEEEENS_18Rmsnorm2dFwdTraitsILb1ELb0ELb0ELb0ELNS_21Rmsnorm2dFu"
    "sedAddEnumE0ELNS_23Rmsnorm2dFusedQuantEnumE0ELNS_22Rmsnorm2dSensitiveEnumE0EEEEENS_33Rmsnorm2dF"
    "wdPipelineDefaultPolicyEEENS_17Default2DEpilogueINS_24Default2DEpilogueProblemIfDF16bLb0ELb1ELb"
    "0EEEvEEEEJNSM_5KargsEEEEvDpT1_"
)
# cpp_demangle does not parse this one (c++filt does): it stays as recorded.
SGL = (
    "_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_"
    "EEEEvPS3_PS4_i"
)


def test_mangled_names_are_demangled_for_their_short_and_displayed_names() -> None:
    assert demangled(AITER[0]).startswith(
        "void aiter::add_rmsnorm_quant_kernel<std::bfloat16_t, std::bfloat16_t, 256, 16, false, "
    )
    assert short_name(CK_TILE) == "ck_tile::kentry"
    assert display_names(AITER) == {
        AITER[0]: "aiter::add_rmsnorm_quant_kernel<…, 256, …>",
        AITER[1]: "aiter::add_rmsnorm_quant_kernel<…, 64, …>",
    }


@pytest.mark.parametrize("name", [SGL, "_Z", "_ZN3abc", "_Z" + "N" * 100_000, "_Z\x1b[31m"])
def test_a_mangled_name_that_does_not_parse_stays_as_it_is(name: str) -> None:
    assert demangled(name) == name


def test_without_a_demangler_mangled_names_stay_as_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(names, "_demangle", None)
    names._demangled.cache_clear()
    try:
        assert short_name.__wrapped__(AITER[0]) == AITER[0]
    finally:
        names._demangled.cache_clear()


# Tensile kernels recorded in tracelens__mi300__resnet_act_checkpoint: the same family and tile.
TENSILE = [
    (
        "Cijk_Ailk_Bljk_BBS_BH_MT32x32x64_MI16x16x16x1_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1_AF1EM1_AMAS0_"
        "ASE_ASGT_ASLT_ASM_ASAE01_ASCE01_ASEM1_AAC0_BL1_BS1_CLR0_DTLA0_DTLB0_DTVA0_DTVB0_DVO0_ETSP_EP"
        "S1_ELFLR0_EMLL0_FSSC10_FL0_GLVWA2_GLVWB2_GRCGA1_GRCGB1_GRPM1_GRVWn1_GSU1_GSUASB_GLS0_ISA942_"
        "IU1_K1_KLA_LBSPPA512_LBSPPB128_LPA16_LPB16_LDL1_LRVW8_LWPMn1_LDW0_FMA_MIAV1_MDA2_MO40_MMFSC_"
        "MKFGSU256_NTA0_NTB0_NTC2_NTD2_NEPBS8_NLCA1_NLCB1_ONLL1_OPLV0_PK0_PAP0_PGR2_PLR5_PKA0_SIA3_SL"
        "W1_SS1_SU64_SUM0_SUS128_SCIUI1_SPO1_SRVW0_SSO1_SVW1_SNLL0_TSGRA0_TSGRB0_TT1_16_TLDS1_UMLDSA0"
        "_UMLDSB1_U64SL1_USFGROn1_VAW1_VSn1_VW1_VWB1_VFLRP1_WSGRA0_WSGRB0_WS64_WG32_8_1_WGMn16"
    ),
    (
        "Cijk_Ailk_Bljk_BBS_BH_MT32x32x64_MI16x16x16x1_SN_1LDSB0_APM1_ABV0_ACED0_AF0EM1_AF1EM1_AMAS0_"
        "ASE_ASGT_ASLT_ASM_ASAE01_ASCE01_ASEM1_AAC0_BL1_BS1_CLR0_DTLA0_DTLB0_DTVA0_DTVB0_DVO0_ETSP_EP"
        "S1_ELFLR8_EMLL0_FSSC10_FL0_GLVWA2_GLVWB8_GRCGA1_GRCGB1_GRPM1_GRVWn1_GSU1_GSUASB_GLS1_ISA942_"
        "IU1_K1_KLA_LBSPPA512_LBSPPB128_LPA16_LPB16_LDL1_LRVW8_LWPMn1_LDW0_FMA_MIAV0_MDA2_MO40_MMFSC_"
        "MKFGSU256_NTA0_NTB0_NTC0_NTD0_NEPBS0_NLCA1_NLCB1_ONLL1_OPLV0_PK0_PAP0_PGR1_PLR5_PKA0_SIA3_SL"
        "W1_SS0_SU64_SUM0_SUS128_SCIUI1_SPO0_SRVW0_SSO0_SVW4_SNLL0_TSGRA0_TSGRB0_TT1_16_TLDS1_UMLDSA0"
        "_UMLDSB1_U64SL1_USFGROn1_VAW1_VSn1_VW1_VWB1_VFLRP1_WSGRA0_WSGRB0_WS64_WG32_8_1_WGM16"
    ),
]


def test_tensile_names_are_their_family_and_macro_tile() -> None:
    assert short_name(TENSILE[0]) == "Cijk_Ailk_Bljk_BBS_BH MT32x32x64"
    assert short_name("Cijk_Alik_Bljk_HHS_BH_MT128x128x64_MI32x32x8x1_SN_K1") == (
        "Cijk_Alik_Bljk_HHS_BH MT128x128x64"
    )
    assert short_name("Cijk_Alik_Bljk_HHS_BH_MT128x128x64") == "Cijk_Alik_Bljk_HHS_BH MT128x128x64"
    assert short_name("Cijk_no_tile_here") == "Cijk_no_tile_here"


def test_tensile_names_that_share_a_tile_keep_the_first_parameter_that_differs() -> None:
    assert display_names(TENSILE) == {
        TENSILE[0]: "Cijk_Ailk_Bljk_BBS_BH MT32x32x64 … ELFLR0 …",
        TENSILE[1]: "Cijk_Ailk_Bljk_BBS_BH MT32x32x64 … ELFLR8 …",
    }


def test_colliding_groups_are_told_apart_only_when_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A table shows a few of many names: only the groups of those are worked out (the
    names of 10^6-kernel traces took 37 µs each when every group was)."""
    from traceview.analyses.core import names as module

    calls: list[str] = []
    real = module._told_apart

    def counted(short: str, members: list[str]) -> dict[str, str]:
        calls.append(short)
        return real(short, members)

    monkeypatch.setattr(module, "_told_apart", counted)
    many = [f"void ns::k{i // 4}<{i}, float>(int)" for i in range(4000)]
    shown = display_names(many)
    assert calls == []
    assert shown[many[5]] == "ns::k1<5, …>" and calls == ["ns::k1"]
    assert shown[many[6]] == "ns::k1<6, …>" and calls == ["ns::k1"]  # worked out once
    everything = dict(shown)
    assert len(calls) == 1000 and len(set(everything.values())) == 4000


def _innermost_first(name: str) -> str | None:
    """The definition: innermost <...> removed until none is left; None if '<' remains."""
    text, removed = re.subn(r"<[^<>]*>", "", name)
    while removed:
        text, removed = re.subn(r"<[^<>]*>", "", text)
    return None if "<" in text else text


_BRACKETED = st.recursive(  # nested groups, some left open, stray '>' in the text
    st.text(alphabet="ab ,>", max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        .map("".join)
        .flatmap(lambda t: st.sampled_from([f"<{t}>", f"<{t}", t]))
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(alphabet="<>a b,", max_size=40), _BRACKETED))
def test_templates_removed_as_innermost_first(name: str) -> None:
    """Removing nested groups up to three deep at once ends as innermost-first does."""
    assert names._without_templates(name) == _innermost_first(name)


# Calls with a template and parameters, made to sit on both sides of what the quick path
# takes (``names._plain_call``): prefixes it refuses, brackets that nest, fail to balance or
# hold parentheses, text between the template and the call, arrows and operators.
_CALL_FUNCTION = st.sampled_from(["f", "ns::f", "a::b::k_1", "", "f g", "_Zf", "Cijk_A", "f#2",
                                  "f>", "f)", "é::f", "operator", "f::"])  # fmt: skip
_CALL_TEXT = st.lists(
    st.sampled_from(["<", ">", "(", ")", " ", "a", ",", "->", "int", "char*", "::"]), max_size=8
).map("".join)


@settings(max_examples=3000, deadline=None)
@given(
    prefix=st.sampled_from(["", "void ", "void  ", "std::enable_if<1, void>::type "]),
    function=_CALL_FUNCTION,
    template=st.one_of(st.just(""), _BRACKETED, _CALL_TEXT),
    params=st.one_of(_BRACKETED, _CALL_TEXT),
    suffix=st.sampled_from(["", " const", ")", ">"]),
)
def test_the_quick_path_for_calls_matches_the_reference(
    prefix: str, function: str, template: str, params: str, suffix: str
) -> None:
    name = f"{prefix}{function}{template}({params}){suffix}"
    quick = names._plain_call(name)
    assert quick is None or quick == _reference_short_name(name)
    assert short_name.__wrapped__(name) == _reference_short_name(name)


def test_the_quick_path_takes_the_common_calls() -> None:
    """It answers for real template calls (else it would save nothing) and refuses others."""
    for name in ["f<<)>(x)", "f)<a>(x)", "f<a>(x))", "f<a>((x)", "f<(a)>(x)", "f<a>x(y)"]:
        assert names._plain_call(name) is None, name  # brackets only look balanced
    for name in [*CUTLASS, *CONV, *ELEMENTWISE[:3], CASES[0][0], CASES[3][0]]:
        assert names._plain_call(name) == _reference_short_name(name), name
    for name in [ELEMENTWISE[3], CASES[1][0], CASES[4][0], CASES[7][0], CASES[10][0]]:
        assert names._plain_call(name) is None, name

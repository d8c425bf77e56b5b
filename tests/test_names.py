"""Short kernel names."""

from __future__ import annotations

import pytest

from traceview.analyses.names import short_name

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

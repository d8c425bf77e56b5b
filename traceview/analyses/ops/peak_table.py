"""Dense datasheet peaks of common GPUs: TFLOP/s per dtype and memory bandwidth (TB/s).

The same shape as a ``--peaks`` file (docs/metrics.md, "Peaks"). Dense figures only: where a
datasheet gives "with sparsity" figures (Ampere and later tensor cores), they are halved.
fp64 and fp32 are the tensor-core / matrix figures where the GPU has them (GEMMs run there),
else the vector figures. A dtype a datasheet does not list is left out (no % of peak for it).

``names``: the deviceProperties ``name`` values the GPU appears under in traces; ``cc`` and
``sms``: compute capability and SM (CU) count, the fallback key when the name is unknown or
generic ("", "AMD Radeon Graphics"); a key shared by several entries selects none.
AMD MI250 / MI250X: each of the card's two dies (GCDs) is one device in a trace, so the
figures are per GCD (half the card's datasheet figures).
"""

from __future__ import annotations

from typing import Any

_A100 = {"fp64": 19.5, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0}
_H100_SXM = {
    "fp64": 67.0,
    "fp32": 67.0,
    "tf32": 494.5,
    "bf16": 989.5,
    "fp16": 989.5,
    "fp8": 1979.0,
    "int8": 1979.0,
}

DEVICES: list[dict[str, Any]] = [
    # NVIDIA V100 datasheet (SXM2): FP64 7.8, FP32 15.7, Tensor 125 TFLOPS; HBM2 900 GB/s.
    {
        "device": "V100 SXM2",
        "names": ["Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"],
        "cc": "7.0",
        "sms": 80,
        "tflops": {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0},
        "tb_per_s": 0.9,
    },
    # NVIDIA V100 datasheet (PCIe): FP64 7, FP32 14, Tensor 112 TFLOPS; 900 GB/s.
    {
        "device": "V100 PCIe",
        "names": ["Tesla V100-PCIE-16GB", "Tesla V100-PCIE-32GB"],
        "cc": "7.0",
        "sms": 80,
        "tflops": {"fp64": 7.0, "fp32": 14.0, "fp16": 112.0},
        "tb_per_s": 0.9,
    },
    # NVIDIA A100 datasheet: FP64 TC 19.5, FP32 19.5, TF32 156, BF16/FP16 312, INT8 624
    # (dense); 40GB 1,555 GB/s; 80GB SXM 2,039 GB/s; 80GB PCIe 1,935 GB/s.
    {
        "device": "A100 SXM4 40GB",
        "names": ["NVIDIA A100-SXM4-40GB"],
        "cc": "8.0",
        "sms": 108,
        "tflops": _A100,
        "tb_per_s": 1.555,
    },
    {
        "device": "A100 SXM4 80GB",
        "names": ["NVIDIA A100-SXM4-80GB"],
        "cc": "8.0",
        "sms": 108,
        "tflops": _A100,
        "tb_per_s": 2.039,
    },
    {
        "device": "A100 PCIe 40GB",
        "names": ["NVIDIA A100-PCIE-40GB", "NVIDIA A100 PCIe 40GB"],
        "cc": "8.0",
        "sms": 108,
        "tflops": _A100,
        "tb_per_s": 1.555,
    },
    {
        "device": "A100 PCIe 80GB",
        "names": ["NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-80GB"],
        "cc": "8.0",
        "sms": 108,
        "tflops": _A100,
        "tb_per_s": 1.935,
    },
    # NVIDIA H100 datasheet (SXM): FP64 TC 67, FP32 67, TF32 989 / BF16 1,979 / FP16 1,979 /
    # FP8 3,958 / INT8 3,958 with sparsity (halved here); 3.35 TB/s.
    {
        "device": "H100 SXM",
        "names": ["NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB"],
        "cc": "9.0",
        "sms": 132,
        "tflops": _H100_SXM,
        "tb_per_s": 3.35,
    },
    # NVIDIA H100 datasheet (PCIe): FP64 TC 51, FP32 51, TF32 756 / BF16 1,513 / FP16 1,513 /
    # FP8 3,026 / INT8 3,026 with sparsity (halved here); 2 TB/s.
    {
        "device": "H100 PCIe",
        "names": ["NVIDIA H100 PCIe"],
        "cc": "9.0",
        "sms": 114,
        "tflops": {
            "fp64": 51.0,
            "fp32": 51.0,
            "tf32": 378.0,
            "bf16": 756.5,
            "fp16": 756.5,
            "fp8": 1513.0,
            "int8": 1513.0,
        },
        "tb_per_s": 2.0,
    },
    # NVIDIA H800 SXM5 product brief: as H100 SXM but FP64 1 TFLOPS; 3.35 TB/s.
    {
        "device": "H800 SXM",
        "names": ["NVIDIA H800"],
        "cc": "9.0",
        "sms": 132,
        "tflops": {**_H100_SXM, "fp64": 1.0},
        "tb_per_s": 3.35,
    },
    # NVIDIA H200 datasheet (SXM): compute as H100 SXM; 4.8 TB/s.
    {
        "device": "H200 SXM",
        "names": ["NVIDIA H200"],
        "cc": "9.0",
        "sms": 132,
        "tflops": _H100_SXM,
        "tb_per_s": 4.8,
    },
    # NVIDIA HGX B200 datasheet, per GPU: FP64 TC 40, TF32 2.2 / BF16 4.5 / FP16 4.5 / FP8 9 /
    # INT8 9 PFLOPS with sparsity (halved here); HBM3e 8 TB/s.
    {
        "device": "B200",
        "names": ["NVIDIA B200"],
        "cc": "10.0",
        "sms": 148,
        "tflops": {
            "fp64": 40.0,
            "tf32": 1100.0,
            "bf16": 2250.0,
            "fp16": 2250.0,
            "fp8": 4500.0,
            "int8": 4500.0,
        },
        "tb_per_s": 8.0,
    },
    # NVIDIA L4 datasheet: FP32 30.3; TF32 120 / BF16 242 / FP16 242 / FP8 485 / INT8 485 with
    # sparsity (halved here); 300 GB/s.
    {
        "device": "L4",
        "names": ["NVIDIA L4"],
        "cc": "8.9",
        "sms": 58,
        "tflops": {
            "fp32": 30.3,
            "tf32": 60.0,
            "bf16": 121.0,
            "fp16": 121.0,
            "fp8": 242.5,
            "int8": 242.5,
        },
        "tb_per_s": 0.3,
    },
    # NVIDIA L40S datasheet: FP32 91.6; TF32 366 / BF16 733 / FP16 733 / FP8 1,466 / INT8 1,466
    # with sparsity (halved here); 864 GB/s.
    {
        "device": "L40S",
        "names": ["NVIDIA L40S"],
        "cc": "8.9",
        "sms": 142,
        "tflops": {
            "fp32": 91.6,
            "tf32": 183.0,
            "bf16": 366.5,
            "fp16": 366.5,
            "fp8": 733.0,
            "int8": 733.0,
        },
        "tb_per_s": 0.864,
    },
    # NVIDIA A10 datasheet: FP32 31.2; TF32 125 / BF16 250 / FP16 250 / INT8 500 with sparsity
    # (halved here); 600 GB/s.
    {
        "device": "A10",
        "names": ["NVIDIA A10"],
        "cc": "8.6",
        "sms": 72,
        "tflops": {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0, "int8": 250.0},
        "tb_per_s": 0.6,
    },
    # NVIDIA T4 datasheet: FP32 8.1, mixed FP16 65, INT8 130 TOPS; 320 GB/s.
    {
        "device": "T4",
        "names": ["Tesla T4"],
        "cc": "7.5",
        "sms": 40,
        "tflops": {"fp32": 8.1, "fp16": 65.0, "int8": 130.0},
        "tb_per_s": 0.32,
    },
    # AMD Instinct MI250X datasheet (card): FP64/FP32 matrix 95.7, FP16/BF16 383, INT8 383;
    # 3.2768 TB/s; per GCD (a trace's device): half.
    {
        "device": "MI250X (one GCD)",
        "names": ["AMD Instinct MI250X"],
        "cc": "9.0",
        "sms": 110,
        "tflops": {"fp64": 47.85, "fp32": 47.85, "bf16": 191.5, "fp16": 191.5, "int8": 191.5},
        "tb_per_s": 1.6384,
    },
    # AMD Instinct MI250 datasheet (card): FP64/FP32 matrix 90.5, FP16/BF16 362.1, INT8 362.1;
    # 3.2768 TB/s; per GCD (a trace's device): half.
    {
        "device": "MI250 (one GCD)",
        "names": ["AMD Instinct MI250"],
        "cc": "9.0",
        "sms": 104,
        "tflops": {"fp64": 45.25, "fp32": 45.25, "bf16": 181.05, "fp16": 181.05, "int8": 181.05},
        "tb_per_s": 1.6384,
    },
    # AMD Instinct MI300X datasheet: FP64 matrix 163.4, FP32 matrix 163.4, TF32 653.7,
    # FP16/BF16 1,307.4, FP8 2,614.9, INT8 2,614.9 (dense); 5.3 TB/s.
    {
        "device": "MI300X",
        "names": ["AMD Instinct MI300X"],
        "cc": "9.4",
        "sms": 304,
        "tflops": {
            "fp64": 163.4,
            "fp32": 163.4,
            "tf32": 653.7,
            "bf16": 1307.4,
            "fp16": 1307.4,
            "fp8": 2614.9,
            "int8": 2614.9,
        },
        "tb_per_s": 5.3,
    },
]

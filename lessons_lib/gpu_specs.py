"""Documented peaks, memory and bandwidth of common NVIDIA GPUs, each from the vendor document in ``source``.

Tensor-core figures are dense (no 2:4 sparsity); ``notes`` say how a figure not printed as is was derived.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

_T4_DATASHEET = ("NVIDIA T4 Tensor Core GPU datasheet",
                 "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf")
_L4_DATASHEET = ("NVIDIA L4 Tensor Core GPU datasheet", "https://www.nvidia.com/en-us/data-center/l4/")
_P100_DATASHEET = ("NVIDIA Tesla P100 datasheet",
                   "https://images.nvidia.com/content/tesla/pdf/nvidia-tesla-p100-PCIe-datasheet.pdf")
_V100_DATASHEET = ("NVIDIA V100 Tensor Core GPU datasheet",
                   "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf")
_A100_DATASHEET = ("NVIDIA A100 Tensor Core GPU datasheet",
                   "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
_H100_DATASHEET = ("NVIDIA H100 Tensor Core GPU datasheet", "https://www.nvidia.com/en-us/data-center/h100/")
_H200_DATASHEET = ("NVIDIA H200 Tensor Core GPU datasheet", "https://www.nvidia.com/en-us/data-center/h200/")
_GA102_WHITEPAPER = ("NVIDIA Ampere GA102 GPU Architecture whitepaper (V2.0), Appendix A",
                     "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf")
_ADA_WHITEPAPER = ("NVIDIA Ada GPU Architecture whitepaper",
                   "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf")
_RTX3060_PAGE = ("NVIDIA GeForce RTX 3060 family specifications page",
                 "https://www.nvidia.com/en-us/geforce/graphics-cards/30-series/rtx-3060-3060ti/")
_RTX4060_PAGE = ("NVIDIA GeForce RTX 4060 family specifications page",
                 "https://www.nvidia.com/en-us/geforce/graphics-cards/40-series/rtx-4060-4060ti/")
_RTX4070_PAGE = ("NVIDIA GeForce RTX 4070 family specifications page",
                 "https://www.nvidia.com/en-us/geforce/graphics-cards/40-series/rtx-4070-family/")
_RTX4080_PAGE = ("NVIDIA GeForce RTX 4080 family specifications page",
                 "https://www.nvidia.com/en-us/geforce/graphics-cards/40-series/rtx-4080-family/")

_SPARSE_HALVED = "tensor-core figure = datasheet's sparsity figure / 2 (dense)"


@dataclass(frozen=True)
class GpuSpec:
    """Documented peak figures of one GPU model (one board variant); None: not documented."""

    model: str
    variant: str
    fp32_tflops: float  # non-tensor FP32 (a float32 matmul with TF32 off)
    fp16_tflops: float | None  # dense FP16 matmul: tensor cores with FP32 accumulate, else the plain FP16 rate
    bf16_tflops: float | None  # dense BF16 tensor cores
    tensor_cores: bool
    memory_gb: float  # the vendor's GB: the T4's 16 GB chips = 16 GiB, ECC keeps 1/16 (lesson 01 §1)
    bandwidth_gb_s: float
    source: str
    url: str
    notes: str = ""  # how a figure was obtained when it is not printed as is

    def peak_tflops(self, dtype) -> float | None:
        """Return the documented peak TFLOP/s for a matmul in `dtype` (torch dtype or "fp32"/"fp16"/"bf16"/...)."""
        from .precision import format_name

        peaks = {"fp32": self.fp32_tflops, "fp16": self.fp16_tflops, "bf16": self.bf16_tflops}
        return peaks[format_name(dtype)]


def _spec(model, variant, fp32, fp16, bf16, tensor, mem, bw, doc, notes=""):
    return GpuSpec(model, variant, fp32, fp16, bf16, tensor, mem, bw, doc[0], doc[1], notes)


_NO_TENSOR = "no tensor cores: FP16 is the half-precision rate"
_VOLTA = "FP16 = 'Tensor Performance'; no BF16"
_A100_DENSE = "tensor figures are the datasheet's dense ones (624 with sparsity)"

# Figures: fp32, dense fp16, dense bf16, tensor cores, memory GB, bandwidth GB/s.
T4 = _spec("T4", "PCIe 16 GB", 8.1, 65.0, None, True, 16, 320, _T4_DATASHEET,
           "FP16 = 'Mixed Precision (FP16/FP32)' (Turing has no sparsity); no BF16 tensor cores")
L4 = _spec("L4", "PCIe 24 GB", 30.3, 121.0, 121.0, True, 24, 300, _L4_DATASHEET,
           _SPARSE_HALVED + " (datasheet: 242 with sparsity)")
P100_PCIE_16 = _spec("P100", "PCIe 16 GB", 9.3, 18.7, None, False, 16, 732, _P100_DATASHEET, _NO_TENSOR)
P100_PCIE_12 = replace(P100_PCIE_16, variant="PCIe 12 GB", memory_gb=12, bandwidth_gb_s=549)
P100_SXM2 = _spec("P100", "SXM2 (NVLink) 16 GB", 10.6, 21.2, None, False, 16, 732, _P100_DATASHEET, _NO_TENSOR)
V100_SXM2 = _spec("V100", "SXM2 (NVLink) 16 GB", 15.7, 125.0, None, True, 16, 900, _V100_DATASHEET, _VOLTA)
V100_SXM2_32 = replace(V100_SXM2, variant="SXM2 (NVLink) 32 GB", memory_gb=32)
V100_PCIE = _spec("V100", "PCIe 16 GB", 14.0, 112.0, None, True, 16, 900, _V100_DATASHEET, _VOLTA)
V100_PCIE_32 = replace(V100_PCIE, variant="PCIe 32 GB", memory_gb=32)
V100S_PCIE = _spec("V100S", "PCIe 32 GB", 16.4, 130.0, None, True, 32, 1134, _V100_DATASHEET, _VOLTA)
A100_SXM_40 = _spec("A100", "SXM4 40 GB", 19.5, 312.0, 312.0, True, 40, 1555, _A100_DATASHEET, _A100_DENSE)
A100_SXM_80 = replace(A100_SXM_40, variant="SXM4 80 GB", memory_gb=80, bandwidth_gb_s=2039)
A100_PCIE_40 = replace(A100_SXM_40, variant="PCIe 40 GB")
A100_PCIE_80 = replace(A100_SXM_40, variant="PCIe 80 GB", memory_gb=80, bandwidth_gb_s=1935)
H100_SXM = _spec("H100", "SXM5 80 GB", 67.0, 989.5, 989.5, True, 80, 3350, _H100_DATASHEET,
                 _SPARSE_HALVED + " (datasheet: 1,979 with sparsity)")
H100_PCIE = _spec("H100", "PCIe 80 GB", 51.0, 756.5, 756.5, True, 80, 2000, _H100_DATASHEET,
                  _SPARSE_HALVED + " (datasheet: 1,513 with sparsity)")
H100_NVL = _spec("H100", "NVL 94 GB", 60.0, 835.5, 835.5, True, 94, 3900, _H100_DATASHEET,
                 _SPARSE_HALVED + " (datasheet: 1,671 with sparsity)")
H200_SXM = replace(H100_SXM, model="H200", variant="SXM 141 GB", memory_gb=141, bandwidth_gb_s=4800,
                   source=_H200_DATASHEET[0], url=_H200_DATASHEET[1])
H200_NVL = replace(H100_NVL, model="H200", variant="NVL 141 GB", memory_gb=141, bandwidth_gb_s=4800,
                   source=_H200_DATASHEET[0], url=_H200_DATASHEET[1])
RTX_3090 = _spec("GeForce RTX 3090", "24 GB GDDR6X", 35.6, 71.0, 71.0, True, 24, 936, _GA102_WHITEPAPER,
                 "FP16/BF16 = dense tensor TFLOPS with FP32 accumulate (142 with FP16 accumulate)")
RTX_3080 = _spec("GeForce RTX 3080", "10 GB GDDR6X", 29.8, 59.5, 59.5, True, 10, 760, _GA102_WHITEPAPER,
                 "FP16/BF16 = dense tensor TFLOPS with FP32 accumulate (119 with FP16 accumulate)")
RTX_4090 = _spec("GeForce RTX 4090", "24 GB GDDR6X", 82.6, 165.2, 165.2, True, 24, 1008, _ADA_WHITEPAPER,
                 "FP16/BF16 = dense tensor TFLOPS with FP32 accumulate (330.3 with FP16 accumulate)")
RTX_3060 = _spec("GeForce RTX 3060", "12 GB GDDR6", 12.7, None, None, True, 12, 360, _RTX3060_PAGE,
                 "derived: FP32 = 2 × 3584 CUDA cores × 1.78 GHz boost; bandwidth = 192-bit × 15 Gbps / 8; "
                 "NVIDIA publishes no FP16 tensor figure for this card")
RTX_4060 = _spec("GeForce RTX 4060", "8 GB GDDR6", 15.1, None, None, True, 8, 272, _RTX4060_PAGE,
                 "derived: FP32 = 2 × 3072 CUDA cores × 2.46 GHz boost; bandwidth = 128-bit × 17 Gbps / 8; "
                 "NVIDIA publishes no FP16 tensor figure for this card")
RTX_4070 = _spec("GeForce RTX 4070", "12 GB GDDR6X", 29.1, None, None, True, 12, 504, _RTX4070_PAGE,
                 "derived: FP32 = 2 × 5888 CUDA cores × 2.475 GHz boost; bandwidth = 192-bit × 21 Gbps / 8; "
                 "NVIDIA publishes no FP16 tensor figure on this page")
RTX_4080 = _spec("GeForce RTX 4080", "16 GB GDDR6X", 48.7, None, None, True, 16, 716.8, _RTX4080_PAGE,
                 "derived: FP32 = 2 × 9728 CUDA cores × 2.505 GHz boost; bandwidth = 256-bit × 22.4 Gbps / 8; "
                 "NVIDIA publishes no FP16 tensor figure on this page")

# How ``torch.cuda.get_device_name()`` names each GPU: (pattern, what the name also holds without spaces,
# spec); the first match wins. A name that does not say the variant: H100/H200 → SXM; A100 → SXM4 (40 GB
# unless "80GB"); V100 → SXM2 (16 GB unless "32GB"); P100 → PCIe (16 GB unless "12GB"). GeForce names must
# end at the number: Ti / SUPER / Laptop / D / 12GB cards are other products. A GPU not listed gets no peak.
_NAMES = (
    (r"\bH200\b", ("NVL",), H200_NVL), (r"\bH200\b", (), H200_SXM),
    (r"\bH100\b", ("NVL",), H100_NVL), (r"\bH100\b", ("PCIE",), H100_PCIE), (r"\bH100\b", (), H100_SXM),
    (r"\bA100\b", ("PCIE", "80GB"), A100_PCIE_80), (r"\bA100\b", ("PCIE",), A100_PCIE_40),
    (r"\bA100\b", ("80GB",), A100_SXM_80), (r"\bA100\b", (), A100_SXM_40), (r"\bV100S\b", (), V100S_PCIE),
    (r"\bV100\b", ("PCIE", "32GB"), V100_PCIE_32), (r"\bV100\b", ("PCIE",), V100_PCIE),
    (r"\bV100\b", ("32GB",), V100_SXM2_32), (r"\bV100\b", (), V100_SXM2), (r"\bP100\b", ("SXM",), P100_SXM2),
    (r"\bP100\b", ("12GB",), P100_PCIE_12), (r"\bP100\b", (), P100_PCIE_16),
    (r"\bT4\b", (), T4), (r"\bL4\b", (), L4), (r"\bRTX 3060$", (), RTX_3060), (r"\bRTX 3080$", (), RTX_3080),
    (r"\bRTX 3090$", (), RTX_3090), (r"\bRTX 4060$", (), RTX_4060), (r"\bRTX 4070$", (), RTX_4070),
    (r"\bRTX 4080$", (), RTX_4080), (r"\bRTX 4090$", (), RTX_4090),
)


def spec_for_device(device) -> GpuSpec | None:
    """Return the documented spec of a CUDA device ("cuda": the current one); None if not CUDA or not listed."""
    import torch

    from .device import as_device

    device = as_device(device, "device", "'cuda', 'cuda:0'")
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    index = torch.cuda.current_device() if device.index is None else device.index
    name = re.sub(r"\s+", " ", torch.cuda.get_device_name(index).upper().replace("_", " ")).strip()
    return next((spec for pattern, words, spec in _NAMES
                 if re.search(pattern, name) and all(word in name.replace(" ", "") for word in words)), None)


def describe(spec: GpuSpec | None, name: str = "") -> str:
    """Return one line for a notebook: the spec with its source, or why there is no peak to compare with."""
    if spec is None:
        who = f" ({name})" if name else ""
        return (f"GPU này{who} không có trong bảng số liệu công bố của lessons_lib: không có đường đỉnh, "
                "không tính % đỉnh (không đoán số).")
    if not isinstance(spec, GpuSpec):
        raise TypeError(f"spec phải là GpuSpec hoặc None, không phải {type(spec).__name__}")
    fp16 = f"{spec.fp16_tflops:g}" if spec.fp16_tflops is not None else "?"
    kind = "tensor core, dày đặc" if spec.tensor_cores else "không có tensor core"
    return (f"{spec.model} ({spec.variant}): FP32 {spec.fp32_tflops:g} TFLOP/s · FP16 {fp16} TFLOP/s "
            f"({kind}) · {spec.memory_gb:g} GB · {spec.bandwidth_gb_s:g} GB/s — nguồn: {spec.source} "
            f"({spec.url})" + (f" [{spec.notes}]" if spec.notes else ""))


# PCI-SIG PCI Express Base Specification: signalling rate in GT/s per lane, 128b/130b encoding (3.0 and newer).
_PCIE_GT_S = {"3.0": 8.0, "4.0": 16.0, "5.0": 32.0}


def pcie_copy_seconds(n_bytes: int | float, generation: str = "3.0") -> float:
    """Return the least time (s) to copy `n_bytes` over PCIe `generation` x16 (real copies are slower)."""
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, (int, float)):
        raise TypeError(f"n_bytes phải là một số byte, không phải {type(n_bytes).__name__}")
    if n_bytes < 0:
        raise ValueError(f"n_bytes phải ≥ 0, nhận được {n_bytes}")
    if generation not in _PCIE_GT_S:
        raise ValueError(f"generation phải là một trong {sorted(_PCIE_GT_S)}, không phải {generation!r}")
    return n_bytes / (_PCIE_GT_S[generation] * 16 * (128 / 130) / 8 * 1e9)  # GT/s × 16 lanes × 128/130 / 8

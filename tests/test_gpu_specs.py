"""Tests of lessons_lib.gpu_specs: lookup by device name, documented figures, PCIe bounds, bad input."""

from __future__ import annotations

import pytest
import torch

from lessons_lib import gpu_specs as gs

# Names as torch.cuda.get_device_name() reports them, with the spec each must map to.
KNOWN = [
    ("Tesla T4", gs.T4),
    ("NVIDIA L4", gs.L4),
    ("Tesla P100-PCIE-16GB", gs.P100_PCIE_16),
    ("Tesla P100-PCIE-12GB", gs.P100_PCIE_12),
    ("Tesla P100-SXM2-16GB", gs.P100_SXM2),
    ("Tesla V100-SXM2-16GB", gs.V100_SXM2),
    ("Tesla V100-SXM2-32GB", gs.V100_SXM2_32),
    ("Tesla V100-PCIE-16GB", gs.V100_PCIE),
    ("Tesla V100-PCIE-32GB", gs.V100_PCIE_32),
    ("Tesla V100S-PCIE-32GB", gs.V100S_PCIE),
    ("NVIDIA A100-SXM4-40GB", gs.A100_SXM_40),
    ("NVIDIA A100-SXM4-80GB", gs.A100_SXM_80),
    ("NVIDIA A100-PCIE-40GB", gs.A100_PCIE_40),
    ("NVIDIA A100 80GB PCIe", gs.A100_PCIE_80),
    ("NVIDIA H100 80GB HBM3", gs.H100_SXM),
    ("NVIDIA H100 PCIe", gs.H100_PCIE),
    ("NVIDIA H100 NVL", gs.H100_NVL),
    ("NVIDIA H200", gs.H200_SXM),
    ("NVIDIA H200 NVL", gs.H200_NVL),
    ("NVIDIA GeForce RTX 3060", gs.RTX_3060),
    ("NVIDIA GeForce RTX 3080", gs.RTX_3080),
    ("NVIDIA GeForce RTX 3090", gs.RTX_3090),
    ("NVIDIA GeForce RTX 4060", gs.RTX_4060),
    ("NVIDIA GeForce RTX 4090", gs.RTX_4090),
]

OTHERS = [
    "NVIDIA GeForce RTX 3060 Ti", "NVIDIA GeForce RTX 3060 Laptop GPU", "NVIDIA GeForce RTX 4090 D",
    "NVIDIA GeForce RTX 4060 Ti", "NVIDIA GeForce RTX 3080 12GB", "NVIDIA GeForce RTX 3090 Ti",
    "NVIDIA L40S", "NVIDIA L40", "NVIDIA T400", "NVIDIA RTX A6000", "NVIDIA RTX 6000 Ada Generation",
    "NVIDIA GeForce GTX 1080", "AMD Instinct MI300X", "NVIDIA B200", "NVIDIA GH200 480GB", "NVIDIA H800", "",
]


@pytest.mark.parametrize("name,spec", KNOWN)
def test_lookup_maps_device_names_to_their_variant(name, spec):
    assert gs.lookup(name) is spec
    assert gs.lookup(name.lower()) is spec  # case does not matter


@pytest.mark.parametrize("name", OTHERS)
def test_lookup_returns_none_for_gpus_not_in_the_table(name):
    assert gs.lookup(name) is None


def test_documented_figures_of_the_common_colab_and_kaggle_gpus():
    assert (gs.T4.fp32_tflops, gs.T4.fp16_tflops, gs.T4.memory_gb, gs.T4.bandwidth_gb_s) == (8.1, 65.0, 16, 320)
    assert gs.T4.bf16_tflops is None  # Turing has no BF16 tensor cores
    assert gs.P100_PCIE_16.tensor_cores is False and gs.P100_PCIE_16.fp16_tflops == 18.7
    assert gs.A100_SXM_40.fp16_tflops == 312.0 and gs.A100_SXM_80.bandwidth_gb_s == 2039


def test_tensor_core_figures_are_dense_not_sparse():
    # Datasheets print the sparsity figure first: L4 242, H100 SXM 1,979, H100 PCIe 1,513, H200 1,979.
    assert gs.L4.fp16_tflops == 242 / 2
    assert gs.H100_SXM.fp16_tflops == 1979 / 2
    assert gs.H100_PCIE.fp16_tflops == 1513 / 2
    assert gs.H200_SXM.fp16_tflops == 1979 / 2
    # GeForce: FP32-accumulate figure (what PyTorch uses), half the FP16-accumulate one.
    assert gs.RTX_4090.fp16_tflops == 165.2 and gs.RTX_3090.fp16_tflops == 71.0


@pytest.mark.parametrize("spec", gs.KNOWN_GPUS, ids=lambda s: f"{s.model} {s.variant}")
def test_every_spec_is_sourced_and_consistent(spec):
    assert spec.source and spec.url.startswith("https://")
    assert spec.fp32_tflops > 0 and spec.memory_gb > 0 and spec.bandwidth_gb_s > 0
    if spec.fp16_tflops is not None:
        assert spec.fp16_tflops >= spec.fp32_tflops
        if not spec.tensor_cores:
            assert spec.fp16_tflops <= 2.05 * spec.fp32_tflops  # plain half-precision rate (rounded figures)
    if spec.bf16_tflops is not None:
        assert spec.bf16_tflops == spec.fp16_tflops
    assert spec.source in str(spec) and spec.url in str(spec)


def test_peak_tflops_by_dtype():
    assert gs.H100_SXM.peak_tflops(torch.float32) == 67.0
    assert gs.H100_SXM.peak_tflops("fp16") == 989.5
    assert gs.H100_SXM.peak_tflops("bf16") == 989.5
    assert gs.T4.peak_tflops(torch.bfloat16) is None
    assert gs.RTX_3060.peak_tflops("float16") is None  # not published: no guessing


def test_peak_tflops_rejects_other_dtypes():
    with pytest.raises(ValueError, match="float32, float16 or bfloat16"):
        gs.T4.peak_tflops(torch.int8)
    with pytest.raises(ValueError, match="fp16"):
        gs.T4.peak_tflops("int8")
    with pytest.raises(TypeError, match="dtype must be"):
        gs.T4.peak_tflops(16)


def test_lookup_rejects_non_strings():
    with pytest.raises(TypeError, match="get_device_name"):
        gs.lookup(75)


def test_spec_for_device_without_cuda_is_none():
    assert gs.spec_for_device("cpu") is None
    assert gs.spec_for_device(torch.device("cpu")) is None
    if not torch.cuda.is_available():
        assert gs.spec_for_device() is None
        assert gs.spec_for_device("cuda") is None
        assert gs.spec_for_device(0) is None


def test_spec_for_device_bad_input():
    with pytest.raises(TypeError, match="cuda:0"):
        gs.spec_for_device(1.5)
    with pytest.raises(TypeError):
        gs.spec_for_device(True)
    with pytest.raises(ValueError, match="cuda:0"):
        gs.spec_for_device("gpu-zero")


def test_describe_names_the_source_or_says_there_is_no_peak():
    assert "t4-tensor-core-datasheet" in gs.describe(gs.T4)
    text = gs.describe(None, "Mystery GPU 9000")
    assert "Mystery GPU 9000" in text and "không" in text
    with pytest.raises(TypeError, match="GpuSpec"):
        gs.describe("T4")


def test_pcie_bandwidth_from_the_signalling_rate():
    assert gs.pcie_bandwidth_gb_s() == pytest.approx(15.754, abs=1e-3)
    assert gs.pcie_bandwidth_gb_s("4.0") == pytest.approx(31.508, abs=1e-3)
    assert gs.pcie_bandwidth_gb_s("5.0", 8) == pytest.approx(gs.pcie_bandwidth_gb_s("4.0", 16))
    assert gs.pcie_copy_seconds(gs.pcie_bandwidth_gb_s("3.0") * 1e9) == pytest.approx(1.0)
    assert gs.pcie_copy_seconds(0) == 0


def test_pcie_bad_input():
    with pytest.raises(ValueError, match="3.0"):
        gs.pcie_bandwidth_gb_s("2.0")
    with pytest.raises(TypeError, match="'3.0'"):
        gs.pcie_bandwidth_gb_s(3.0)
    with pytest.raises(ValueError, match="lanes"):
        gs.pcie_bandwidth_gb_s("3.0", 3)
    with pytest.raises(TypeError, match="lanes"):
        gs.pcie_bandwidth_gb_s("3.0", "16")
    with pytest.raises(ValueError, match=">= 0"):
        gs.pcie_copy_seconds(-1)
    with pytest.raises(TypeError, match="bytes"):
        gs.pcie_copy_seconds("1 GB")

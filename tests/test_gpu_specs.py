"""lessons_lib.gpu_specs: the table's invariants (every figure sourced, dense stated, units consistent, every
GPU the lessons name present, the lessons' quoted figures equal to the table's), lookup by device name, PCIe."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from lessons_lib import gpu_specs as gs

COURSE = Path(__file__).resolve().parents[1] / "course_src"

# Names as torch.cuda.get_device_name() reports them, with the spec each must map to.
KNOWN = [
    ("Tesla T4", gs.T4), ("NVIDIA L4", gs.L4), ("Tesla P100-PCIE-16GB", gs.P100_PCIE_16),
    ("Tesla P100-PCIE-12GB", gs.P100_PCIE_12), ("Tesla P100-SXM2-16GB", gs.P100_SXM2),
    ("Tesla V100-SXM2-16GB", gs.V100_SXM2), ("Tesla V100-SXM2-32GB", gs.V100_SXM2_32),
    ("Tesla V100-PCIE-16GB", gs.V100_PCIE), ("Tesla V100-PCIE-32GB", gs.V100_PCIE_32),
    ("Tesla V100S-PCIE-32GB", gs.V100S_PCIE), ("NVIDIA A100-SXM4-40GB", gs.A100_SXM_40),
    ("NVIDIA A100-SXM4-80GB", gs.A100_SXM_80), ("NVIDIA A100-PCIE-40GB", gs.A100_PCIE_40),
    ("NVIDIA A100 80GB PCIe", gs.A100_PCIE_80), ("NVIDIA H100 80GB HBM3", gs.H100_SXM),
    ("NVIDIA H100 PCIe", gs.H100_PCIE), ("NVIDIA H100 NVL", gs.H100_NVL), ("NVIDIA H200", gs.H200_SXM),
    ("NVIDIA H200 NVL", gs.H200_NVL), ("NVIDIA GeForce RTX 3060", gs.RTX_3060),
    ("NVIDIA GeForce RTX 3080", gs.RTX_3080), ("NVIDIA GeForce RTX 3090", gs.RTX_3090),
    ("NVIDIA GeForce RTX 4060", gs.RTX_4060), ("NVIDIA GeForce RTX 4070", gs.RTX_4070),
    ("NVIDIA GeForce RTX 4080", gs.RTX_4080), ("NVIDIA GeForce RTX 4090", gs.RTX_4090),
]
OTHERS = [
    "NVIDIA GeForce RTX 3060 Ti", "NVIDIA GeForce RTX 3060 Laptop GPU", "NVIDIA GeForce RTX 4090 D",
    "NVIDIA GeForce RTX 4060 Ti", "NVIDIA GeForce RTX 4070 Ti", "NVIDIA GeForce RTX 4070 SUPER",
    "NVIDIA GeForce RTX 4080 SUPER", "NVIDIA GeForce RTX 3080 12GB", "NVIDIA GeForce RTX 3090 Ti",
    "NVIDIA L40S", "NVIDIA L40", "NVIDIA T400", "NVIDIA RTX A6000", "NVIDIA RTX 6000 Ada Generation",
    "NVIDIA GeForce GTX 1080", "AMD Instinct MI300X", "NVIDIA B200", "NVIDIA GH200 480GB", "NVIDIA H800", "",
]


ALL = [value for value in vars(gs).values() if isinstance(value, gs.GpuSpec)]  # every spec the module defines


def by_model(model: str) -> list[gs.GpuSpec]:
    """Return the table's variants of a model named as the lessons name it ("T4", "RTX 3060", ...)."""
    return [s for s in ALL if s.model.removeprefix("GeForce ") == model]


# --------------------------------------------------------------------------- the table's invariants


@pytest.mark.parametrize("spec", ALL, ids=lambda s: f"{s.model} {s.variant}")
def test_every_figure_is_sourced_dense_and_in_consistent_units(spec):
    assert spec.source and spec.url.startswith("https://")
    assert spec.source in gs.describe(spec) and spec.url in gs.describe(spec)
    # units: TFLOP/s, GB, GB/s (a figure in another unit would be off by 10^3)
    assert 1 <= spec.fp32_tflops <= 200 and 4 <= spec.memory_gb <= 300 and 100 <= spec.bandwidth_gb_s <= 10_000
    assert f"{spec.memory_gb:g} GB" in spec.variant, "the variant names the memory size it is for"
    if spec.fp16_tflops is not None:
        assert spec.fp16_tflops >= spec.fp32_tflops
        if not spec.tensor_cores:
            assert spec.fp16_tflops <= 2.05 * spec.fp32_tflops  # plain half-precision rate (rounded figures)
    if spec.bf16_tflops is not None:
        assert spec.bf16_tflops == spec.fp16_tflops
    assert spec.notes, "every entry says how its FP16 figure was obtained"
    sparse = re.search(r"([\d,.]+) with sparsity", spec.notes)
    if sparse:  # the datasheet's first figure is the sparse one: the table keeps half of it (dense)
        assert spec.fp16_tflops == float(sparse.group(1).replace(",", "")) / 2
    if spec.tensor_cores and spec.fp16_tflops is not None:
        assert re.search(r"dense|sparsity|accumulate|Tensor Performance", spec.notes), "dense vs sparse stated"
    if spec.fp16_tflops is None or "derived" in spec.notes:
        assert "derived" in spec.notes and "publishes no FP16" in spec.notes


def test_every_gpu_the_lessons_name_is_in_the_table():
    for lesson in ("01_device_basics.md", "04_speed_benchmark.md", "08_multi_gpu_preview.md"):
        text = (COURSE / lesson).read_text(encoding="utf-8")
        named = set(re.findall(r"\b(T4|L4|A100|H100|H200|RTX \d{4})\b", text))
        assert named, f"{lesson} names no GPU: the pattern above is stale"
        for model in sorted(named):
            assert by_model(model), f"{lesson} names {model}, which gpu_specs lacks"


def test_the_memory_sizes_lesson_01_quotes_are_the_tables():
    """Lesson 01 §3's hardware table and its GB/GiB note quote vendor memory sizes: they must be gpu_specs'."""
    text = (COURSE / "01_device_basics.md").read_text(encoding="utf-8")
    checked = 0
    for row in re.findall(r"^\| ([^|]+) \| [^|]+ \| ([^|]+ GB) \|", text, re.M):
        names = [n.strip() for n in row[0].split("/")]
        sizes = [float(x) for x in re.findall(r"\d+", row[1])]
        if len(names) == 2 and len(sizes) == 2:  # "RTX 3060 / 4060 | 12 GB / 8 GB": one size each
            prefix = names[0].rsplit(" ", 1)[0] + " " if " " in names[0] else ""
            pairs = [(names[0], [sizes[0]]), (prefix + names[1], [sizes[1]])]
        else:
            pairs = [(names[0], sizes)]
        for model, quoted in pairs:
            if by_model(model):
                assert set(quoted) <= {s.memory_gb for s in by_model(model)}, (model, quoted)
                checked += 1
    assert checked >= 9
    assert f'vd T4 "{gs.T4.memory_gb:g} GB"' in text


def test_the_figures_lesson_04_quotes_in_prose_are_the_tables():
    """§7 works out the N = 500 example from the T4's FP32 peak and PCIe 3.0 x16's theoretical bandwidth."""
    text = (COURSE / "04_speed_benchmark.md").read_text(encoding="utf-8")
    line = next(ln for ln in text.splitlines() if "Vì sao N nhỏ có thể chậm hơn trên GPU?" in ln)
    number = r"(\d+(?:\.\d+)?)"
    peak, compute_us, copy_gb_s, copy_us = (float(x) for x in re.search(
        rf"đỉnh FP32 {number} TFLOP/s.*?~{number} µs.*?\({number} GB/s lý thuyết.*?ít nhất {number} µs",
        line).groups())
    flops, n_bytes = 2 * 500**3, 3 * 500**2 * 4
    assert peak == gs.T4.fp32_tflops
    assert compute_us == round(flops / (gs.T4.fp32_tflops * 1e12) * 1e6)
    assert copy_gb_s == round(1 / gs.pcie_copy_seconds(1e9, "3.0"), 2)
    assert copy_us == round(gs.pcie_copy_seconds(n_bytes, "3.0") * 1e6, -1)


def test_the_80_gb_line_of_lesson_08_is_the_tables():
    text = (COURSE / "08_multi_gpu_preview.md").read_text(encoding="utf-8")
    assert "một GPU 80 GB (A100 80GB / H100 SXM, theo datasheet của NVIDIA)" in text and "ax.axhline(80e9" in text
    assert gs.A100_SXM_80.memory_gb == gs.H100_SXM.memory_gb == 80


# --------------------------------------------------------------------------- lookup and peaks


@pytest.fixture
def gpu_named(monkeypatch):
    """Make torch report one CUDA GPU with the given name; return the function that sets the name."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)

    def name(value: str) -> None:
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: value)

    return name


@pytest.mark.parametrize("name,spec", KNOWN)
def test_spec_for_device_maps_device_names_to_their_variant(gpu_named, name, spec):
    gpu_named(name)
    assert gs.spec_for_device("cuda") is spec and gs.spec_for_device("cuda:0") is spec
    gpu_named(name.lower())  # case does not matter
    assert gs.spec_for_device(torch.device("cuda")) is spec


def test_every_spec_is_found_by_its_name():
    assert {id(spec) for _, spec in KNOWN} == {id(spec) for spec in ALL}


@pytest.mark.parametrize("name", OTHERS)
def test_spec_for_device_is_none_for_gpus_not_in_the_table(gpu_named, name):
    gpu_named(name)
    assert gs.spec_for_device("cuda") is None


def test_peak_tflops_by_dtype():
    spec = gs.H100_SXM
    assert spec.peak_tflops(torch.float32) == spec.peak_tflops("fp32") == spec.fp32_tflops
    assert spec.peak_tflops("fp16") == spec.peak_tflops(torch.float16) == spec.fp16_tflops
    assert spec.peak_tflops("bf16") == spec.bf16_tflops
    assert gs.T4.peak_tflops(torch.bfloat16) is None and gs.RTX_3060.peak_tflops("float16") is None  # no guessing


def test_no_spec_without_cuda_and_describe_says_there_is_no_peak():
    assert gs.spec_for_device("cpu") is None and gs.spec_for_device(torch.device("cpu")) is None
    if not torch.cuda.is_available():
        assert gs.spec_for_device("cuda") is None
    text = gs.describe(None, "Mystery GPU 9000")  # a listed spec's line: see the invariants test above
    assert "Mystery GPU 9000" in text and "không đoán số" in text


# --------------------------------------------------------------------------- PCIe


def test_pcie_copy_time_follows_the_signalling_rate():
    one_gb = 1e9
    gen3 = gs.pcie_copy_seconds(one_gb)
    assert gen3 == pytest.approx(1 / (8 * 16 * (128 / 130) / 8))  # 8 GT/s × 16 lanes, 128b/130b, bits → bytes
    assert gs.pcie_copy_seconds(one_gb, "4.0") == pytest.approx(gen3 / 2)
    assert gs.pcie_copy_seconds(one_gb, "5.0") == pytest.approx(gen3 / 4)
    assert gs.pcie_copy_seconds(0) == 0


@pytest.mark.parametrize("call, error, named", [
    ((gs.T4.peak_tflops, torch.int8), ValueError, "torch.bfloat16"),
    ((gs.T4.peak_tflops, "int8"), ValueError, "fp16"),
    ((gs.T4.peak_tflops, 16), TypeError, "dtype"),
    *[((gs.spec_for_device, bad), TypeError, "cuda:0") for bad in (1.5, True, None)],
    ((gs.spec_for_device, "gpu-zero"), ValueError, "cuda:0"),
    ((gs.describe, "T4"), TypeError, "GpuSpec"),
    ((gs.pcie_copy_seconds, 1, "2.0"), ValueError, "3.0"),
    ((gs.pcie_copy_seconds, 1, 3.0), ValueError, "'3.0'"),
    ((gs.pcie_copy_seconds, -1), ValueError, "n_bytes"),
    ((gs.pcie_copy_seconds, "1 GB"), TypeError, "n_bytes"),
])
def test_argument_checks_name_what_to_pass(call, error, named):
    fn, *args = call
    with pytest.raises(error) as raised:
        fn(*args)
    assert named in str(raised.value)

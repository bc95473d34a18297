import pytest
import torch
from IPython.lib.pretty import pretty

from lessons_lib import device as dev
from lessons_lib import notebook, platforms
from lessons_lib.device import CudaFacts
from lessons_lib.device import _GpuInfo as GpuInfo

T4 = GpuInfo(0, "Tesla T4", (7, 5), 15 * 2**30, 40)
P100 = GpuInfo(0, "Tesla P100-PCIE-16GB", (6, 0), 16 * 2**30, 56)
A100 = GpuInfo(0, "NVIDIA A100-SXM4-40GB", (8, 0), 40 * 2**30, 108)
ARCHS_128 = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")


@pytest.mark.parametrize("devices, env, preferred, expected", [
    (["cpu"], None, None, "cpu"),
    (["cpu", "mps"], None, None, "mps"),
    (["cpu", "cuda:0", "mps"], None, None, "cuda"),
    (["cpu", "cuda:0"], "cpu", None, "cpu"),  # $LESSONS_DEVICE
    (["cpu", "cuda:0"], None, torch.device("cpu"), "cpu"),
    (["cpu", "cuda:0"], None, "cuda:0", "cuda:0"),
    (["cpu", "cuda:0"], None, "cuda", "cuda"),
])
def test_pick_device_takes_what_is_asked_for_else_cuda_then_mps_then_cpu(monkeypatch, devices, env, preferred,
                                                                         expected):
    monkeypatch.setattr(dev, "available_devices", lambda: devices)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: "cuda:0" in devices)
    monkeypatch.setattr(dev, "_mps_available", lambda: "mps" in devices)
    monkeypatch.delenv("LESSONS_DEVICE", raising=False)
    if env:
        monkeypatch.setenv("LESSONS_DEVICE", env)
    assert dev.pick_device(preferred) == torch.device(expected)


@pytest.mark.parametrize("call, error, named", [
    *[((dev.pick_device, name), ValueError, "cpu") for name in ("cdua", "gpu", "cuda:x", "meta")],
    *[((dev.pick_device, bad), TypeError, "preferred") for bad in (0, 1.5, ["cpu"])],
    ((dev.pick_device, "cuda:3"), ValueError, "Các thiết bị có ở đây: cpu"),
    ((dev.has_native_bf16, 3.5), TypeError, "float"),
    ((dev.has_native_bf16, "tpu"), ValueError, "'tpu'"),
    ((dev.as_device, "cuda:x", "device", "'cuda'"), ValueError, "'cuda'"),
])
def test_argument_checks_name_what_to_pass(call, error, named):
    fn, *args = call
    with pytest.raises(error) as raised:
        fn(*args)
    assert named in str(raised.value)


def test_available_devices_has_cpu_first_and_the_facts_name_the_platform(monkeypatch):
    assert dev.available_devices()[0] == "cpu"
    monkeypatch.setattr(dev, "detect_platform", lambda: "kaggle")
    assert dev.gather_cuda_facts().platform == "kaggle"


@pytest.mark.parametrize(
    "capability, archs, expected",
    [
        ((7, 5), ARCHS_128, True),
        ((6, 0), ARCHS_128, False),
        ((8, 9), ("sm_80", "sm_86"), True),  # binary compatible within major 8
        ((9, 0), ("sm_80", "compute_80"), True),  # PTX JIT
        ((9, 0), ("sm_80",), False),
        ((8, 0), ("garbage",), False),
    ],
)
def test_arch_supported(capability, archs, expected):
    assert dev._arch_supported(capability, archs) is expected


_TOO_OLD = ("CUDA initialization: The NVIDIA driver on your system is too old (found version 12080). Please "
            "update your GPU driver by downloading and installing a new version from the URL: "
            "http://www.nvidia.com/Download/index.aspx")  # torch's own warning (c10/cuda/CUDAFunctions.cpp)


@pytest.mark.parametrize("facts, named, not_named", [
    # None means "no CUDA in this build": CPU-only, macOS (MPS) or XPU, not necessarily "CPU only"
    (CudaFacts(cuda_build=None), ["torch.version.cuda", "macOS", "XPU", "pytorch.org/get-started/locally"], []),
    (CudaFacts(cuda_build=None, hip_build="6.2"), ["ROCm"], []),
    # Colab's and Kaggle's CPU runtimes ship a +cpu torch: the fix is a GPU runtime, not a CUDA wheel
    (CudaFacts(cuda_build=None, platform="colab"), ["Runtime Colab", "Change runtime type → T4 GPU"],
     ["pytorch.org", "Kaggle"]),
    (CudaFacts(cuda_build=None, platform="kaggle"), ["Runtime Kaggle", "Accelerator → GPU T4 ×2"], ["pytorch.org"]),
    (CudaFacts(cuda_build="12.8", visible_devices="", driver_found=True), ["CUDA_VISIBLE_DEVICES=''"], []),
    (CudaFacts(cuda_build="12.8"), ["driver", "Colab", "T4"], []),
    # a Colab/Kaggle GPU image given no GPU: torch's CUDA build, no driver, no nvidia-smi
    (CudaFacts(cuda_build="12.8", platform="colab"), ["Runtime Colab", "CUDA 12.8", "Change runtime type → T4 GPU"],
     ["driver chưa cài", "Kaggle"]),
    (CudaFacts(cuda_build="12.8", platform="kaggle"), ["Runtime Kaggle", "Accelerator → GPU T4 ×2"], []),
    (CudaFacts(cuda_build="12.8", driver_found=True, init_warning="CUDA initialization: error 804"),
     ["error 804"], []),
    # a driver older than the build's CUDA is not "no driver": from torch's warning, or the driver table
    (CudaFacts(cuda_build="13.0", driver_found=True, init_warning=_TOO_OLD),
     ["quá cũ", "CUDA 12.8", "CUDA 13.0", "≥ 580"], ["không thấy driver", "T4"]),
    (CudaFacts(cuda_build="13.0", driver_found=True, init_warning="The NVIDIA driver on your system is too old"),
     ["quá cũ", "cũ hơn"], []),
    (CudaFacts(cuda_build="12.1", driver_found=True, driver_version="470.1"), ["quá cũ", "470.1", "≥ 525"], []),
    (CudaFacts(cuda_build="13.0", driver_found=True, init_warning="Found no NVIDIA driver on your system"),
     ["không thấy driver"], ["quá cũ"]),
    (CudaFacts(cuda_build="12.8", driver_found=True, available=True, count=1, gpus=(P100,), arch_list=ARCHS_128),
     ["sm_60", "no kernel image", "T4"], []),
])
def test_explain_cuda_names_the_cause_and_the_fix(facts, named, not_named):
    (reason,) = dev.explain_cuda(facts)
    assert all(part in reason for part in named) and not any(part in reason for part in not_named), reason


@pytest.mark.parametrize("driver", ["580.95.05", None])
def test_a_usable_gpu_or_a_recent_driver_has_no_reasons(driver):
    usable = CudaFacts(cuda_build="12.8", driver_found=True, driver_version=driver, available=True, count=1,
                       gpus=(T4,), arch_list=ARCHS_128)
    assert dev.explain_cuda(usable) == []


@pytest.mark.parametrize("text, version", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n", "535.104.05"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n", "580.95.05"),
    ("garbage\n", None),
])
def test_driver_version_is_read_from_the_kernel_modules_line(tmp_path, text, version):
    (tmp_path / "version").write_text(text)
    assert dev._driver_version(str(tmp_path / "version")) == version
    assert dev._driver_version(str(tmp_path / "absent")) is None


def test_environment_report_on_this_machine_has_verdict_and_displays_its_table_in_ipython():
    report = dev.environment_report()
    text = str(report)
    assert report.device in ("cpu", "cuda", "mps") and pretty(report) == text
    assert text.startswith("Báo cáo môi trường\n") and ("Kết luận: " + report.verdict) in text
    if not torch.cuda.is_available():
        assert report.reasons, "without CUDA the report must say why"


def test_environment_report_shows_fake_gpu_rows(monkeypatch):
    facts = CudaFacts(cuda_build="12.8", driver_found=True, available=True, count=1, gpus=(T4,), arch_list=ARCHS_128)
    monkeypatch.setattr(dev, "gather_cuda_facts", lambda: facts)
    report = dev.environment_report()
    text = str(report)
    assert report.device == "cuda"
    assert "Tesla T4" in text and "sm_75" in text and "40 SM" in text and "chỉ giả lập" in text
    assert "15.0 GiB (16.1 GB)" in text  # both units: the tables quote vendors' GB
    a100 = CudaFacts(cuda_build="12.8", driver_found=True, available=True, count=1, gpus=(A100,), arch_list=ARCHS_128)
    monkeypatch.setattr(dev, "gather_cuda_facts", lambda: a100)
    assert "bf16 gốc: có" in str(dev.environment_report())


def test_banner_is_one_line():
    line = notebook._banner()
    assert "\n" not in line and torch.__version__ in line


def test_has_native_bf16_on_fake_gpus_and_mps(monkeypatch):
    monkeypatch.setattr(dev, "available_devices", lambda: ["cpu", "cuda:0", "mps"])
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=0: (7, 5))
    assert dev.has_native_bf16("cuda") is False
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=0: (8, 0))
    assert dev.has_native_bf16("cuda:0") is True
    assert dev.has_native_bf16("mps") is None


@pytest.mark.parametrize(("caps", "flags", "expected"), [
    ({"avx512_bf16": True, "amx_bf16": False}, None, True), ({"avx512_bf16": False, "amx_bf16": True}, None, True),
    ({"avx512_bf16": False, "amx_bf16": False}, None, False), ({"bf16": True}, None, True), ({"bf16": False}, None, False),
    # a torch without torch.cpu.get_capabilities: what Linux lists, or unknown
    ({}, {"sse2", "avx2", "avx512f"}, False), ({}, {"sse2", "avx512_bf16"}, True), ({}, {"asimd", "bf16"}, True),
    ({}, {"asimd"}, False), ({}, None, None), ({}, set(), None),
])
def test_has_native_bf16_on_a_cpu_reads_its_capabilities_then_the_linux_flags(monkeypatch, caps, flags, expected):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: caps, raising=False)
    monkeypatch.setattr(dev, "_cpu_flags", lambda: flags)
    assert dev.has_native_bf16("cpu") is expected


def test_detect_platform_and_its_own_gpu_menu(monkeypatch):
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    assert platforms.detect_platform() == "kaggle"
    monkeypatch.setenv("COLAB_RELEASE_TAG", "release-colab")
    assert platforms.detect_platform() == "colab" and "Kaggle" not in platforms.how_to_get_gpu()


def test_how_to_get_gpu_names_the_platforms_own_menu():
    colab, kaggle, local = (platforms.how_to_get_gpu(platform=p) for p in ("colab", "kaggle", "local"))
    assert "Change runtime type → T4 GPU" in colab and "Kaggle" not in colab and "từ đầu" in colab
    assert "Accelerator → GPU T4 ×2" in kaggle and "Colab" not in kaggle and "từ đầu" in kaggle
    assert "Colab" in local and "Kaggle" in local
    assert "Colab chỉ cho 1 GPU" in platforms.how_to_get_gpu(2, platform="colab")

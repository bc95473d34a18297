"""Choose a device and explain the machine; the one diagnosis of CUDA (`CudaFacts` → `explain_cuda`) lives here."""

from __future__ import annotations

import os
import platform as _platform
import re
import shutil
import warnings
from dataclasses import dataclass

import torch

from .placement import describe, to_device  # noqa: F401  (lessons import them from here)
from .platforms import detect_platform, how_to_get_gpu

_NATIVE_BF16 = (8, 0)  # compute capability from which a GPU computes bf16 in hardware
# c10/cuda/CUDAFunctions.cpp: "The NVIDIA driver on your system is too old (found version 12080)" (= CUDA 12.8)
_DRIVER_TOO_OLD = re.compile(r"driver on your system is too old(?: \(found version (\d+)\))?", re.I)
# Minimum NVIDIA driver per CUDA major version (NVIDIA, "CUDA Compatibility", minor version compatibility table).
_MIN_DRIVER = {11: 450, 12: 525, 13: 580}
_COMPAT_URL = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"
_HIDING = ("", "-1", "none", "NoDevFiles")  # CUDA_VISIBLE_DEVICES values that hide every GPU


def as_device(value, name: str = "device", choices: str = "'cpu', 'cuda', 'cuda:0', 'mps'") -> torch.device:
    """Return `value` (a str or torch.device) as a torch.device; else raise an error naming `choices`."""
    if not isinstance(value, (str, torch.device)):
        raise TypeError(f"{name} phải là str (vd {choices}) hoặc torch.device, "
                        f"không phải {type(value).__name__}")
    try:
        return torch.device(value)
    except (RuntimeError, ValueError):
        raise ValueError(f"Không hiểu thiết bị {str(value)!r}. Dùng một trong: {choices}.") from None


@dataclass(frozen=True)
class _GpuInfo:
    """What PyTorch reports about one CUDA GPU."""

    index: int
    name: str
    capability: tuple[int, int]
    total_memory_bytes: int
    multiprocessors: int

    @property
    def sm(self) -> str:
        """Return the architecture name, e.g. "sm_75" for a T4."""
        return f"sm_{self.capability[0]}{self.capability[1]}"


@dataclass(frozen=True)
class CudaFacts:
    """Raw facts about CUDA on this machine; `explain_cuda` turns them into reasons."""

    cuda_build: str | None
    hip_build: str | None = None
    visible_devices: str | None = None
    driver_found: bool = False
    driver_version: str | None = None
    available: bool = False
    count: int = 0
    gpus: tuple[_GpuInfo, ...] = ()
    arch_list: tuple[str, ...] = ()
    init_warning: str = ""
    platform: str = "local"


def _arch_supported(capability: tuple[int, int], arch_list: tuple[str, ...]) -> bool:
    """Return True when a build compiled for `arch_list` has kernels for a GPU of this capability."""
    for arch in arch_list:
        kind, _, digits = arch.partition("_")
        if not digits.isdigit() or len(digits) < 2:
            continue
        built = (int(digits[:-1]), int(digits[-1]))
        if kind == "sm" and built[0] == capability[0] and built[1] <= capability[1]:
            return True  # binary compatible within one major version
        if kind == "compute" and built <= capability:
            return True  # PTX can be JIT-compiled for newer GPUs
    return False


def _driver_version(path: str = "/proc/driver/nvidia/version") -> str | None:
    """Return the loaded NVIDIA driver's version from /proc/driver/nvidia/version (Linux), or None."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            found = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+(?:\.\d+)+)", handle.read())
    except OSError:
        return None
    return found.group(1) if found else None


def gather_cuda_facts(probe_gpus: bool = True) -> CudaFacts:
    """Read this machine's CUDA facts; `probe_gpus=False` reads no GPU's properties (no CUDA context)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = torch.cuda.is_available()
        count = torch.cuda.device_count() if available else 0
        gpus = []
        for i in range(count if probe_gpus else 0):
            p = torch.cuda.get_device_properties(i)
            gpus.append(_GpuInfo(i, p.name, (p.major, p.minor), int(p.total_memory), int(p.multi_processor_count)))
    try:
        arch_list = tuple(torch.cuda.get_arch_list()) if torch.version.cuda else ()
    except Exception:  # pragma: no cover - depends on the build
        arch_list = ()
    return CudaFacts(
        cuda_build=torch.version.cuda,
        hip_build=getattr(torch.version, "hip", None),
        visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        driver_found=os.path.exists("/proc/driver/nvidia/version") or shutil.which("nvidia-smi") is not None,
        driver_version=_driver_version(),
        available=available,
        count=count,
        gpus=tuple(gpus),
        arch_list=arch_list,
        init_warning=" ".join(str(w.message) for w in caught).strip(),
        platform=detect_platform(),
    )


def _driver_too_old(facts: CudaFacts) -> str | None:
    """Return why the driver is older than this build's CUDA needs (torch's warning or the driver table), or None."""
    warned = _DRIVER_TOO_OLD.search(facts.init_warning)
    major = int(facts.cuda_build.split(".")[0]) if facts.cuda_build and facts.cuda_build[0].isdigit() else None
    floor = _MIN_DRIVER.get(major)
    try:
        driver = min(int(d.strip().split(".")[0]) for d in (facts.driver_version or "").split(","))
    except ValueError:
        driver = None
    if not warned and (floor is None or driver is None or driver >= floor):
        return None
    found = int(warned.group(1)) if warned and warned.group(1) else None
    limit = (f"driver chỉ chạy được tới CUDA {found // 1000}.{found % 1000 // 10}" if found
             else f"driver {facts.driver_version}" if facts.driver_version else "driver chỉ chạy được một bản CUDA cũ hơn")
    need = f" (CUDA {major}.x cần driver ≥ {floor}: {_COMPAT_URL})" if floor else ""
    return f"{limit}, còn bản PyTorch này build cho CUDA {facts.cuda_build}{need}"


def explain_cuda(facts: CudaFacts) -> list[str]:
    """Return the reasons why CUDA is unavailable or unusable; empty if it is usable."""
    if facts.available:
        return [
            f"GPU {gpu.index} ({gpu.name}, {gpu.sm}) quá cũ cho bản PyTorch này "
            f"(bản build có: {', '.join(facts.arch_list)}); mọi phép tính sẽ báo "
            "'no kernel image is available'. Trên Kaggle hãy chọn GPU T4 thay cho P100."
            for gpu in facts.gpus if facts.arch_list and not _arch_supported(gpu.capability, facts.arch_list)
        ]
    if facts.cuda_build is None:
        if facts.hip_build:
            return [f"Đây là bản PyTorch cho ROCm (AMD, HIP {facts.hip_build}), không có GPU AMD nào được thấy."]
        if facts.platform in ("colab", "kaggle"):  # their CPU runtimes ship a +cpu torch: a CUDA wheel brings no GPU
            return [f"Runtime {facts.platform.title()} này chỉ có CPU (bản PyTorch chỉ CPU, torch.version.cuda là "
                    "None), nên không có GPU nào để dùng; cài bản PyTorch khác không giúp được. "
                    + how_to_get_gpu(platform=facts.platform)]
        return ["Bản PyTorch này được build không có CUDA (torch.version.cuda là None): bản chỉ có CPU, "
                "bản cho macOS (GPU Apple dùng MPS) hay bản XPU (GPU Intel). Muốn dùng GPU NVIDIA, "
                "cài bản có CUDA theo lệnh ở pytorch.org/get-started/locally."]
    reasons = []
    if facts.visible_devices is not None and facts.visible_devices.strip() in _HIDING:
        reasons.append(f"Biến môi trường CUDA_VISIBLE_DEVICES={facts.visible_devices!r} đang giấu mọi GPU. "
                       "Bỏ biến này (hoặc đặt CUDA_VISIBLE_DEVICES=0) rồi khởi động lại kernel.")
    too_old = _driver_too_old(facts)
    if too_old:  # a driver is there, older than the CUDA this PyTorch was built with: not "no driver"
        reasons.append(f"Có driver NVIDIA nhưng nó quá cũ: {too_old}. Cập nhật driver (nvidia.com/Download), hoặc "
                       "cài bản PyTorch build cho CUDA không mới hơn driver theo lệnh ở pytorch.org/get-started/locally.")
    elif not facts.driver_found or "driver" in facts.init_warning.lower():
        hint = how_to_get_gpu(platform=facts.platform)
        if facts.platform in ("colab", "kaggle"):  # a GPU image given no GPU: no driver to install there
            reasons.append(f"Runtime {facts.platform.title()} này chỉ có CPU: bản PyTorch có CUDA {facts.cuda_build} "
                           "nhưng runtime không được cấp GPU NVIDIA nào. " + hint)
        else:
            reasons.append(f"Bản PyTorch có CUDA {facts.cuda_build} nhưng không thấy driver NVIDIA / GPU nào "
                           "(máy không có GPU, driver chưa cài, hoặc container không được cấp GPU). " + hint)
    if not reasons:
        detail = f" ({facts.init_warning})" if facts.init_warning else ""
        reasons.append(f"Có driver NVIDIA nhưng CUDA không khởi tạo được{detail}. Thường do driver cũ hơn bản CUDA "
                       "của PyTorch: cập nhật driver hoặc cài bản PyTorch hợp với driver.")
    return reasons


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def available_devices() -> list[str]:
    """Return the devices this machine can use, e.g. ["cpu", "cuda:0", "cuda:1"] or ["cpu", "mps"]."""
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if _mps_available():
        devices.append("mps")
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        devices += [f"xpu:{i}" for i in range(xpu.device_count())]
    return devices


def pick_device(preferred: str | torch.device | None = None) -> torch.device:
    """Return `preferred` if this machine has it, else $LESSONS_DEVICE, else the best here (CUDA > MPS > CPU)."""
    preferred = preferred if preferred is not None else os.environ.get("LESSONS_DEVICE") or None
    if preferred is None:
        return torch.device("cuda" if torch.cuda.is_available() else "mps" if _mps_available() else "cpu")
    names = available_devices()
    device = as_device(preferred, "preferred", ", ".join(names))
    if device.type == "cpu" or str(device) in names or (
            device.index is None and any(name.split(":")[0] == device.type for name in names)):
        return device
    raise ValueError(f"Máy này không có {str(device)!r}. Các thiết bị có ở đây: {', '.join(names)}.")


def _cpu_flags() -> set[str] | None:
    """Return the CPU feature flags Linux lists in /proc/cpuinfo (x86 "flags", ARM "Features"), or None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip().lower() in ("flags", "features"):
                    return set(value.split())
    except OSError:
        pass
    return None


def _cpu_bf16_hardware() -> bool | None:
    """Return whether the CPU has bf16 instructions (x86: AVX512_BF16 or AMX-BF16; ARM: BF16), None if unknown."""
    names = ("avx512_bf16", "amx_bf16", "bf16")
    try:  # newer torch: cpuinfo's flags, on every OS
        caps = torch.cpu.get_capabilities()
    except (AttributeError, RuntimeError):
        caps = {}
    if any(k in caps for k in names):
        return any(bool(caps.get(k)) for k in names)
    flags = _cpu_flags()  # older torch: what Linux lists
    if flags and any(k in flags for k in names):
        return True
    return False if flags and ("sse2" in flags or "asimd" in flags) else None


def has_native_bf16(device: str | torch.device | None = None) -> bool | None:
    """Return whether `device` has bf16 arithmetic in hardware (CUDA 8.0+: a T4 only emulates it); None: unknown."""
    device = pick_device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return torch.cuda.get_device_capability(index) >= _NATIVE_BF16
    return _cpu_bf16_hardware() if device.type == "cpu" else None


@dataclass(repr=False)
class EnvReport:
    """An environment report: versions, GPUs, MPS, and a verdict on which device to use."""

    cuda: CudaFacts
    reasons: list[str]
    mps_built: bool
    mps_available: bool
    device: str
    verdict: str

    def _rows(self) -> list[tuple[str, str]]:
        cuda = self.cuda
        build = cuda.cuda_build or (f"ROCm {cuda.hip_build}" if cuda.hip_build else
                                    "không có (torch.version.cuda là None)")
        rows = [("Nền tảng", cuda.platform), ("Python", _platform.python_version()),
                ("PyTorch", torch.__version__), ("CUDA của bản build", build),
                ("CUDA khả dụng", "có" if cuda.available else "không"), ("Số GPU", str(cuda.count))]
        for gpu in cuda.gpus:
            size = gpu.total_memory_bytes
            bf16 = "có" if gpu.capability >= _NATIVE_BF16 else "không (chỉ giả lập)"
            rows.append((f"GPU {gpu.index}", f"{gpu.name} · {gpu.sm} (compute capability {gpu.capability[0]}."
                         f"{gpu.capability[1]}) · {size / 2**30:.1f} GiB ({size / 1e9:.1f} GB) · "
                         f"{gpu.multiprocessors} SM · bf16 gốc: {bf16}"))
        if cuda.visible_devices is not None:
            rows.append(("CUDA_VISIBLE_DEVICES", repr(cuda.visible_devices)))
        rows += [("Lý do", reason) for reason in self.reasons]
        rows.append(("MPS (Apple)", ("có" if self.mps_available else "không")
                     + (" (bản build có MPS)" if self.mps_built else "")))
        rows.append(("Luồng CPU của PyTorch", str(torch.get_num_threads())))
        return rows

    def __repr__(self) -> str:
        rows = self._rows()
        width = max(len(label) for label, _ in rows)
        return "\n".join(["Báo cáo môi trường", *(f"  {label:<{width}}  {value}" for label, value in rows),
                          "Kết luận: " + self.verdict])


def environment_report() -> EnvReport:
    """Return a report of this machine's PyTorch, CUDA, GPUs and MPS, ending with a one-line verdict."""
    facts = gather_cuda_facts()
    reasons = explain_cuda(facts)
    mps = getattr(torch.backends, "mps", None)
    mps_available = _mps_available()
    if facts.available and not reasons:
        device, verdict = "cuda", f"dùng GPU CUDA ({facts.gpus[0].name}, {facts.count} GPU); mọi ô %%gpu sẽ chạy."
    elif facts.available:
        device, verdict = "cpu", "có GPU nhưng bản PyTorch không chạy được trên nó: tạm dùng CPU (xem lý do ở trên)."
    elif mps_available:
        device, verdict = "mps", "dùng GPU Apple (MPS); các ô chỉ dành cho CUDA (%%gpu) sẽ được bỏ qua."
    else:
        device, verdict = "cpu", "chạy trên CPU; các ô %%gpu sẽ được bỏ qua, mọi phần khác vẫn chạy."
    return EnvReport(cuda=facts, reasons=reasons, mps_built=bool(mps is not None and mps.is_built()),
                     mps_available=mps_available, device=device, verdict=verdict)

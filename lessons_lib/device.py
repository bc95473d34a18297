"""Choose a device and explain the machine: which GPUs exist, and why CUDA may be unavailable.

`to_device` and `describe` (moving and inspecting batches) live in `placement` and are re-exported here.
"""

from __future__ import annotations

import os
import platform as _platform
import re
import shutil
import warnings
from dataclasses import dataclass, field

import torch

from .i18n import tr
from .platforms import detect_platform, how_to_get_gpu  # noqa: F401  (public API of device)

_DEVICE_TYPES = ("cpu", "cuda", "mps", "xpu")
_NATIVE_BF16_CAPABILITY = (8, 0)
# c10/cuda/CUDAFunctions.cpp: "The NVIDIA driver on your system is too old (found version 12080)" (= CUDA 12.8)
_DRIVER_TOO_OLD = re.compile(r"driver on your system is too old(?: \(found version (\d+)\))?", re.I)


# --------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class GpuInfo:
    """What PyTorch reports about one CUDA GPU."""

    index: int
    name: str
    capability: tuple[int, int]
    total_memory_bytes: int
    multiprocessors: int

    @property
    def native_bf16(self) -> bool:
        """Return True when the GPU computes bf16 in hardware (compute capability 8.0 or newer)."""
        return self.capability >= _NATIVE_BF16_CAPABILITY

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
    available: bool = False
    gpus: tuple[GpuInfo, ...] = ()
    arch_list: tuple[str, ...] = ()
    init_warning: str = ""
    platform: str = "local"


def arch_supported(capability: tuple[int, int], arch_list: tuple[str, ...] | list[str]) -> bool:
    """Return True when a build compiled for `arch_list` has kernels for a GPU of this capability."""
    major, minor = capability
    for arch in arch_list:
        kind, _, digits = arch.partition("_")
        if not digits.isdigit() or len(digits) < 2:
            continue
        a_major, a_minor = int(digits[:-1]), int(digits[-1])
        if kind == "sm" and a_major == major and a_minor <= minor:
            return True  # binary compatible within one major version
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True  # PTX can be JIT-compiled for newer GPUs
    return False


def _read_gpus() -> tuple[GpuInfo, ...]:
    gpus = []
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        gpus.append(
            GpuInfo(
                index=i,
                name=props.name,
                capability=(props.major, props.minor),
                total_memory_bytes=int(props.total_memory),
                multiprocessors=int(props.multi_processor_count),
            )
        )
    return tuple(gpus)


def gather_cuda_facts() -> CudaFacts:
    """Read the CUDA facts of this machine from torch, the environment and the driver files."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = torch.cuda.is_available()
        gpus = _read_gpus() if available else ()
    try:
        arch_list = tuple(torch.cuda.get_arch_list()) if torch.version.cuda else ()
    except Exception:  # pragma: no cover - depends on the build
        arch_list = ()
    return CudaFacts(
        cuda_build=torch.version.cuda,
        hip_build=getattr(torch.version, "hip", None),
        visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        driver_found=os.path.exists("/proc/driver/nvidia/version") or shutil.which("nvidia-smi") is not None,
        available=available,
        gpus=gpus,
        arch_list=arch_list,
        init_warning=" ".join(str(w.message) for w in caught),
        platform=detect_platform(),
    )


def explain_cuda(facts: CudaFacts) -> list[str]:
    """Return the reasons (Vietnamese by default) why CUDA is unavailable or unusable; empty if usable."""
    if not isinstance(facts, CudaFacts):
        raise TypeError(f"facts must be a CudaFacts (see gather_cuda_facts()), got {type(facts).__name__}")
    reasons = []
    if facts.available:
        for gpu in facts.gpus:
            if facts.arch_list and not arch_supported(gpu.capability, facts.arch_list):
                reasons.append(
                    tr(
                        f"GPU {gpu.index} ({gpu.name}, {gpu.sm}) quá cũ cho bản PyTorch này "
                        f"(bản build có: {', '.join(facts.arch_list)}); mọi phép tính sẽ báo "
                        "'no kernel image is available'. Trên Kaggle hãy chọn GPU T4 thay cho P100.",
                        f"GPU {gpu.index} ({gpu.name}, {gpu.sm}) is too old for this PyTorch build "
                        f"(built for: {', '.join(facts.arch_list)}); every op will fail with "
                        "'no kernel image is available'. On Kaggle pick the T4 instead of the P100.",
                    )
                )
        return reasons
    if facts.cuda_build is None:
        if facts.hip_build:
            reasons.append(
                tr(
                    f"Đây là bản PyTorch cho ROCm (AMD, HIP {facts.hip_build}), không có GPU AMD nào được thấy.",
                    f"This is a ROCm (AMD, HIP {facts.hip_build}) build of PyTorch and no AMD GPU is visible.",
                )
            )
        else:
            reasons.append(
                tr(
                    "Bản PyTorch này được build không có CUDA (torch.version.cuda là None): bản chỉ có CPU, "
                    "bản cho macOS (GPU Apple dùng MPS) hay bản XPU (GPU Intel). Muốn dùng GPU NVIDIA, "
                    "cài bản có CUDA theo lệnh ở pytorch.org/get-started/locally.",
                    "This PyTorch build has no CUDA (torch.version.cuda is None): a CPU-only build, a macOS "
                    "build (Apple GPUs use MPS) or an XPU build (Intel GPUs). For an NVIDIA GPU, install a CUDA "
                    "build with the command from pytorch.org/get-started/locally.",
                )
            )
        return reasons
    if facts.visible_devices is not None and facts.visible_devices.strip() in ("", "-1", "none", "NoDevFiles"):
        reasons.append(
            tr(
                f"Biến môi trường CUDA_VISIBLE_DEVICES={facts.visible_devices!r} đang giấu mọi GPU. "
                "Bỏ biến này (hoặc đặt CUDA_VISIBLE_DEVICES=0) rồi khởi động lại kernel.",
                f"CUDA_VISIBLE_DEVICES={facts.visible_devices!r} hides every GPU. "
                "Unset it (or set CUDA_VISIBLE_DEVICES=0) and restart the kernel.",
            )
        )
    too_old = _DRIVER_TOO_OLD.search(facts.init_warning)
    if too_old:  # a driver is there, older than the CUDA this PyTorch was built with: not "no driver"
        found = int(too_old.group(1)) if too_old.group(1) else None
        limit = f"CUDA {found // 1000}.{found % 1000 // 10}" if found else "một bản CUDA cũ hơn"
        reasons.append(
            f"Có driver NVIDIA nhưng nó quá cũ: driver chỉ chạy được tới {limit}, còn bản PyTorch này build cho "
            f"CUDA {facts.cuda_build}. Cập nhật driver (nvidia.com/Download), hoặc cài bản PyTorch build cho CUDA "
            "không mới hơn driver theo lệnh ở pytorch.org/get-started/locally."
        )
    elif not facts.driver_found or "driver" in facts.init_warning.lower():
        hint = how_to_get_gpu(platform=facts.platform)
        if facts.platform in ("colab", "kaggle"):  # a hosted runtime without GPU: no driver to install there
            where = "Colab" if facts.platform == "colab" else "Kaggle"
            reasons.append(
                tr(
                    f"Runtime {where} này chỉ có CPU: bản PyTorch có CUDA {facts.cuda_build} nhưng runtime không "
                    "được cấp GPU NVIDIA nào. " + hint,
                    f"This {where} runtime is CPU-only: PyTorch is built with CUDA {facts.cuda_build} but the "
                    "runtime has no NVIDIA GPU. " + hint,
                )
            )
        else:
            reasons.append(
                tr(
                    f"Bản PyTorch có CUDA {facts.cuda_build} nhưng không thấy driver NVIDIA / GPU nào "
                    "(máy không có GPU, driver chưa cài, hoặc container không được cấp GPU). " + hint,
                    f"PyTorch is built with CUDA {facts.cuda_build} but no NVIDIA driver / GPU was found "
                    "(no GPU, no driver, or a container without GPU access). " + hint,
                )
            )
    if not reasons:
        detail = f" ({facts.init_warning.strip()})" if facts.init_warning.strip() else ""
        reasons.append(
            tr(
                f"Có driver NVIDIA nhưng CUDA không khởi tạo được{detail}. "
                "Thường do driver cũ hơn bản CUDA của PyTorch: cập nhật driver hoặc cài bản PyTorch hợp với driver.",
                f"An NVIDIA driver is present but CUDA failed to initialise{detail}. "
                "Usually the driver is older than PyTorch's CUDA: update it or install a matching PyTorch.",
            )
        )
    return reasons


# --------------------------------------------------------------------------- choosing a device


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def _xpu_available() -> bool:
    xpu = getattr(torch, "xpu", None)
    return bool(xpu is not None and xpu.is_available())


def available_devices() -> list[str]:
    """Return the devices this machine can use, e.g. ["cpu", "cuda:0", "cuda:1"] or ["cpu", "mps"]."""
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if _mps_available():
        devices.append("mps")
    if _xpu_available():
        devices += [f"xpu:{i}" for i in range(torch.xpu.device_count())]
    return devices


def pick_device(preferred: str | torch.device | None = None) -> torch.device:
    """Return the device to use: `preferred` if it exists here, else CUDA > MPS > CPU.

    The environment variable ``LESSONS_DEVICE`` (e.g. ``cpu``) overrides the automatic choice.

    Args:
        preferred: "cpu", "cuda", "cuda:1", "mps", a ``torch.device``, or None for automatic.

    Returns:
        The chosen ``torch.device``.

    Raises:
        TypeError: `preferred` is not a str, torch.device or None.
        ValueError: `preferred` is misspelt or names a device this machine does not have.
    """
    if preferred is None:
        preferred = os.environ.get("LESSONS_DEVICE") or None
    if preferred is None:
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    if not isinstance(preferred, (str, torch.device)):
        raise TypeError(
            tr(
                f"preferred phải là str (vd 'cuda', 'cpu'), torch.device hoặc None, không phải {type(preferred).__name__}",
                f"preferred must be a str (e.g. 'cuda', 'cpu'), a torch.device or None, not {type(preferred).__name__}",
            )
        )
    here = ", ".join(available_devices())
    try:
        device = torch.device(preferred)
    except (RuntimeError, ValueError):
        device = None
    if device is None or device.type not in _DEVICE_TYPES:
        raise ValueError(
            tr(
                f"Không hiểu thiết bị {str(preferred)!r}. Dùng một trong: {here}.",
                f"Unknown device {str(preferred)!r}. Use one of: {here}.",
            )
        )
    names = available_devices()
    if device.type == "cpu" or str(device) in names:
        return device
    if device.index is None and any(name.split(":")[0] == device.type for name in names):
        return device
    raise ValueError(
        tr(
            f"Máy này không có {str(device)!r}. Các thiết bị có ở đây: {here}.",
            f"This machine has no {str(device)!r}. Devices here: {here}.",
        )
    )


def _cpu_flags() -> set[str] | None:
    """Return the CPU feature flags Linux lists in /proc/cpuinfo (x86 "flags", ARM "Features"), or None."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip().lower() in ("flags", "features"):
                    return set(value.split())
    except OSError:
        return None
    return None


def _cpu_bf16_hardware() -> bool | None:
    """Return whether the CPU has bf16 instructions (x86: AVX512_BF16 or AMX-BF16; ARM: BF16), None if unknown."""
    capabilities = getattr(torch.cpu, "get_capabilities", None)  # newer torch: cpuinfo's flags, on every OS
    if capabilities is not None:
        try:
            caps = capabilities()
        except (RuntimeError, AttributeError):
            caps = {}
        keys = [k for k in ("avx512_bf16", "amx_bf16", "bf16") if k in caps]
        if keys:
            return any(bool(caps[k]) for k in keys)
    if _platform.machine().lower() in ("x86_64", "amd64", "i686", "x86"):
        avx512_bf16 = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
        if avx512_bf16 is not None:
            amx = getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
            return bool(avx512_bf16() or amx())
    flags = _cpu_flags()
    if not flags:
        return None
    if "bf16" in flags or "avx512_bf16" in flags or "amx_bf16" in flags:
        return True
    x86 = "sse2" in flags
    arm = "asimd" in flags
    return False if (x86 or arm) else None


def has_native_bf16(device: str | torch.device | None = None) -> bool | None:
    """Return whether `device` has bfloat16 arithmetic in hardware: True, False, or None where it is not checked.

    CUDA: compute capability 8.0+ (a T4, sm_75, only emulates bf16, although ``torch.cuda.is_bf16_supported()``
    says True there). CPU: the AVX512_BF16 or AMX-BF16 instructions (x86) or the BF16 extension (ARM), as torch
    or Linux reports them; None when neither can tell (e.g. on macOS without ``torch.cpu.get_capabilities``).
    MPS and other devices: None (not checked; autocast there has its own rules).
    """
    device = pick_device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return torch.cuda.get_device_capability(index) >= _NATIVE_BF16_CAPABILITY
    if device.type == "cpu":
        return _cpu_bf16_hardware()
    return None


# --------------------------------------------------------------------------- the report


@dataclass
class EnvReport:
    """An environment report: versions, GPUs, MPS, and a verdict on which device to use."""

    platform: str
    python_version: str
    torch_version: str
    cuda: CudaFacts
    reasons: list[str]
    mps_built: bool
    mps_available: bool
    cpu_threads: int
    device: str
    verdict: str
    extra: dict = field(default_factory=dict)

    def rows(self) -> list[tuple[str, str]]:
        """Return the report as (label, value) rows."""
        yes, no = tr("có", "yes"), tr("không", "no")
        build = self.cuda.cuda_build or (f"ROCm {self.cuda.hip_build}" if self.cuda.hip_build else tr("không có (torch.version.cuda là None)", "none (torch.version.cuda is None)"))
        rows = [
            (tr("Nền tảng", "Platform"), self.platform),
            ("Python", self.python_version),
            ("PyTorch", self.torch_version),
            (tr("CUDA của bản build", "CUDA of the build"), build),
            (tr("CUDA khả dụng", "CUDA available"), yes if self.cuda.available else no),
            (tr("Số GPU", "GPU count"), str(len(self.cuda.gpus))),
        ]
        for gpu in self.cuda.gpus:
            rows.append(
                (
                    f"GPU {gpu.index}",
                    f"{gpu.name} · {gpu.sm} (compute capability {gpu.capability[0]}.{gpu.capability[1]}) · "
                    f"{gpu.total_memory_bytes / 2**30:.1f} GiB ({gpu.total_memory_bytes / 1e9:.1f} GB) · {gpu.multiprocessors} SM · "
                    + tr("bf16 gốc: ", "native bf16: ")
                    + (yes if gpu.native_bf16 else tr("không (chỉ giả lập)", "no (emulated only)")),
                )
            )
        if self.cuda.visible_devices is not None:
            rows.append(("CUDA_VISIBLE_DEVICES", repr(self.cuda.visible_devices)))
        for reason in self.reasons:
            rows.append((tr("Lý do", "Reason"), reason))
        rows.append(("MPS (Apple)", (yes if self.mps_available else no) + (tr(" (bản build có MPS)", " (build has MPS)") if self.mps_built else "")))
        rows.append((tr("Luồng CPU của PyTorch", "PyTorch CPU threads"), str(self.cpu_threads)))
        return rows

    def __str__(self) -> str:
        width = max(len(label) for label, _ in self.rows())
        lines = [f"  {label:<{width}}  {value}" for label, value in self.rows()]
        return "\n".join([tr("Báo cáo môi trường", "Environment report"), *lines, tr("Kết luận: ", "Verdict: ") + self.verdict])

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(str(self))


def environment_report() -> EnvReport:
    """Return a report of this machine's PyTorch, CUDA, GPUs and MPS, ending with a one-line verdict."""
    facts = gather_cuda_facts()
    reasons = explain_cuda(facts)
    mps = getattr(torch.backends, "mps", None)
    mps_built = bool(mps is not None and mps.is_built())
    mps_available = _mps_available()
    if facts.available and not reasons:
        first = facts.gpus[0]
        device = "cuda"
        verdict = tr(
            f"dùng GPU CUDA ({first.name}, {len(facts.gpus)} GPU); mọi ô %%gpu sẽ chạy.",
            f"use the CUDA GPU ({first.name}, {len(facts.gpus)} GPU); every %%gpu cell will run.",
        )
    elif facts.available:
        device = "cpu"
        verdict = tr(
            "có GPU nhưng bản PyTorch không chạy được trên nó: tạm dùng CPU (xem lý do ở trên).",
            "a GPU is present but this PyTorch cannot run on it: use the CPU for now (see the reason above).",
        )
    elif mps_available:
        device = "mps"
        verdict = tr(
            "dùng GPU Apple (MPS); các ô chỉ dành cho CUDA (%%gpu) sẽ được bỏ qua.",
            "use the Apple GPU (MPS); CUDA-only cells (%%gpu) will be skipped.",
        )
    else:
        device = "cpu"
        verdict = tr(
            "chạy trên CPU; các ô %%gpu sẽ được bỏ qua, mọi phần khác vẫn chạy.",
            "run on the CPU; %%gpu cells will be skipped, everything else still runs.",
        )
    return EnvReport(
        platform=detect_platform(),
        python_version=_platform.python_version(),
        torch_version=torch.__version__,
        cuda=facts,
        reasons=reasons,
        mps_built=mps_built,
        mps_available=mps_available,
        cpu_threads=torch.get_num_threads(),
        device=device,
        verdict=verdict,
    )


def banner() -> str:
    """Return a one-line summary: torch version, chosen device and why."""
    report = environment_report()
    where = report.device
    if report.device == "cuda":
        where = f"cuda ({report.cuda.gpus[0].name}, {len(report.cuda.gpus)} GPU)"
    return f"torch {report.torch_version} · {report.platform} · " + tr("thiết bị: ", "device: ") + f"{where} — {report.verdict}"


from .placement import DeviceReport, TensorPlace, describe, to_device  # noqa: E402,F401  (public API)

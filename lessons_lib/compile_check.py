"""Say whether ``torch.compile`` can run here, and if not, why (Python, OS, no C++ compiler, no Triton)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass

import torch

from .device import as_device
from .display import Printable


@dataclass(frozen=True, repr=False)
class CompileSupport(Printable):
    """Whether ``torch.compile`` (Inductor) can run on a device here, and why (or with which tool)."""

    device: str
    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return f"{'✅' if self.ok else '⏭️'} torch.compile ({self.device}): {self.reason}"


def _cpp_compiler() -> str | None:
    """Return the path of the C++ compiler Inductor would use for CPU code (``$CXX`` first), or None."""
    if os.environ.get("CXX"):
        candidates = (os.environ["CXX"],)
    else:
        candidates = {"win32": ("cl",), "darwin": ("clang++", "g++")}.get(sys.platform, ("g++", "c++", "clang++"))
    return next((path for path in map(shutil.which, candidates) if path), None)


def _dynamo_problem() -> str | None:
    """Return why TorchDynamo refuses this Python/OS, or None when it accepts it."""
    try:
        from torch._dynamo.eval_frame import check_if_dynamo_supported
    except ImportError:  # the check moved: let the first compile tell
        return None
    try:
        check_if_dynamo_supported()
    except RuntimeError as exc:
        python = ".".join(map(str, sys.version_info[:3]))
        return (f"PyTorch {torch.__version__} không chạy torch.compile trên Python {python} / "
                f"{sys.platform}: {exc}. Dùng một bản PyTorch mới hơn, hoặc một Python cũ hơn.")
    return None


def compile_support(device: str | torch.device = "cpu") -> CompileSupport:
    """Return whether ``torch.compile`` with Inductor can run on `device` ("cpu" or "cuda"), and why."""
    dev = as_device(device, "device", "'cpu' hoặc 'cuda'")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"bài này kiểm tra torch.compile trên 'cpu' hoặc 'cuda', không phải {dev.type!r}")
    problem = _dynamo_problem()
    if problem:
        return CompileSupport(dev.type, False, problem)
    if dev.type == "cpu":
        compiler = _cpp_compiler()
        if compiler is None:
            return CompileSupport("cpu", False, (
                "không tìm thấy trình biên dịch C++ mà Inductor cần để sinh code CPU. Cài g++ (Linux: "
                "`apt install g++`), Xcode Command Line Tools (macOS: `xcode-select --install`), hoặc Visual "
                "Studio Build Tools và mở Developer Prompt (Windows, cần `cl`); hoặc đặt biến CXX."))
        return CompileSupport("cpu", True, f"Inductor sinh code C++ và biên dịch bằng {compiler}.")
    if not torch.cuda.is_available():
        return CompileSupport("cuda", False, "máy này không có GPU CUDA.")
    if importlib.util.find_spec("triton") is None:
        return CompileSupport("cuda", False, (
            "chưa cài Triton, bộ sinh kernel GPU của Inductor (bản PyTorch CUDA cho Linux có kèm sẵn; "
            "Windows cần gói triton-windows)."))
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    major, minor = torch.cuda.get_device_capability(index)
    gpu = torch.cuda.get_device_name(index)
    if (major, minor) < (7, 0):  # the oldest compute capability Triton supports
        return CompileSupport("cuda", False, (
            f"{gpu} có compute capability {major}.{minor}; Triton cần từ 7.0 (V100, T4 trở lên)."))
    return CompileSupport("cuda", True, f"Inductor sinh kernel Triton cho {gpu}.")

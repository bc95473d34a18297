"""Say whether ``torch.compile`` can run here, and if not, why (Python version, OS, no C++ compiler, no Triton).

``torch.compile`` needs three things: TorchDynamo must support this Python and OS (older PyTorch refused
Windows and the newest Python versions), and Inductor needs a code generator for the device: the system
C++ compiler for the CPU (``g++``, ``clang++`` on macOS, MSVC's ``cl`` on Windows), Triton for CUDA GPUs of
compute capability 7.0 or newer. This module only looks; it compiles nothing.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass

import torch

from .i18n import tr

#: Oldest CUDA compute capability Triton (Inductor's GPU code generator) supports.
TRITON_MIN_CAPABILITY = (7, 0)


@dataclass(frozen=True)
class CompileSupport:
    """Whether ``torch.compile`` (Inductor) can run on a device here, and the reason or the tool it will use."""

    device: str
    ok: bool
    reason: str
    tool: str | None = None

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        icon = "✅" if self.ok else "⏭️"
        return f"{icon} torch.compile ({self.device}): {self.reason}"

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(str(self))


def cpp_compiler() -> str | None:
    """Return the path of the C++ compiler Inductor would use for CPU code (``$CXX`` first), or None."""
    if os.environ.get("CXX"):
        candidates = (os.environ["CXX"],)
    elif sys.platform == "win32":
        candidates = ("cl",)
    elif sys.platform == "darwin":
        candidates = ("clang++", "g++")
    else:
        candidates = ("g++", "c++", "clang++")
    for name in candidates:
        path = shutil.which(name)
        if path:
            return path
    return None


def _dynamo_problem() -> str | None:
    """Return why TorchDynamo refuses this Python/OS, or None when it accepts it."""
    if not hasattr(torch, "compile"):
        return tr(f"PyTorch {torch.__version__} chưa có torch.compile (cần PyTorch 2.0 trở lên).",
                  f"PyTorch {torch.__version__} has no torch.compile (it needs PyTorch 2.0 or newer).")
    try:
        from torch._dynamo.eval_frame import check_if_dynamo_supported
    except ImportError:  # the check moved: let the first compile tell
        return None
    try:
        check_if_dynamo_supported()
    except RuntimeError as exc:
        python = ".".join(map(str, sys.version_info[:3]))
        return tr(f"PyTorch {torch.__version__} không chạy torch.compile trên Python {python} / {sys.platform}: "
                  f"{exc}. Dùng một bản PyTorch mới hơn, hoặc một Python cũ hơn.",
                  f"PyTorch {torch.__version__} does not run torch.compile on Python {python} / {sys.platform}: "
                  f"{exc}. Use a newer PyTorch, or an older Python.")
    return None


def compile_support(device: str | torch.device = "cpu") -> CompileSupport:
    """Return whether ``torch.compile`` with the default Inductor backend can run on `device` ("cpu" or "cuda").

    Args:
        device: "cpu" or a CUDA device ("cuda", "cuda:0").

    Returns:
        A ``CompileSupport`` (true when it can run) with the reason, or the compiler / code generator found.
    """
    if not isinstance(device, (str, torch.device)):
        raise TypeError(tr(f"device phải là 'cpu' hoặc 'cuda', không phải {type(device).__name__}",
                           f"device must be 'cpu' or 'cuda', not {type(device).__name__}"))
    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(tr(f"device phải là 'cpu' hoặc 'cuda', không phải {device!r}",
                            f"device must be 'cpu' or 'cuda', not {device!r}")) from exc
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(tr(f"bài này kiểm tra torch.compile trên 'cpu' hoặc 'cuda', không phải {dev.type!r}",
                            f"this checks torch.compile on 'cpu' or 'cuda', not {dev.type!r}"))
    name = dev.type
    problem = _dynamo_problem()
    if problem:
        return CompileSupport(name, False, problem)
    if dev.type == "cpu":
        compiler = cpp_compiler()
        if compiler is None:
            return CompileSupport(name, False, tr(
                "không tìm thấy trình biên dịch C++ mà Inductor cần để sinh code CPU. Cài g++ (Linux: "
                "`apt install g++`), Xcode Command Line Tools (macOS: `xcode-select --install`), hoặc Visual "
                "Studio Build Tools và mở Developer Prompt (Windows, cần `cl`); hoặc đặt biến CXX.",
                "no C++ compiler found, which Inductor needs for CPU code. Install g++ (Linux: `apt install "
                "g++`), the Xcode Command Line Tools (macOS: `xcode-select --install`), or Visual Studio Build "
                "Tools and use a Developer Prompt (Windows, needs `cl`); or set CXX."))
        return CompileSupport(name, True, tr(f"Inductor sinh code C++ và biên dịch bằng {compiler}.",
                                             f"Inductor generates C++ and compiles it with {compiler}."), compiler)
    if not torch.cuda.is_available():
        return CompileSupport(name, False, tr("máy này không có GPU CUDA.", "this machine has no CUDA GPU."))
    if importlib.util.find_spec("triton") is None:
        return CompileSupport(name, False, tr(
            "chưa cài Triton, bộ sinh kernel GPU của Inductor (bản PyTorch CUDA cho Linux có kèm sẵn; "
            "Windows cần gói triton-windows).",
            "Triton, Inductor's GPU kernel generator, is not installed (the Linux CUDA builds of PyTorch ship "
            "it; Windows needs the triton-windows package)."))
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    capability = torch.cuda.get_device_capability(index)
    gpu = torch.cuda.get_device_name(index)
    if capability < TRITON_MIN_CAPABILITY:
        return CompileSupport(name, False, tr(
            f"{gpu} có compute capability {capability[0]}.{capability[1]}; Triton cần từ 7.0 (V100, T4 trở lên).",
            f"{gpu} has compute capability {capability[0]}.{capability[1]}; Triton needs 7.0 or newer "
            "(V100, T4 and later)."))
    return CompileSupport(name, True, tr(f"Inductor sinh kernel Triton cho {gpu}.",
                                         f"Inductor generates Triton kernels for {gpu}."), "triton")

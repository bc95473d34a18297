"""Tell an instructor whether torch can use this machine's NVIDIA GPUs, and how to fix it; no torch at import.

`nvidia-smi` says what hardware the machine has; torch says what the course can use. When the two disagree
(a GPU is listed but torch has no usable CUDA), every `%%gpu` cell would be skipped and a GPU check would pass
hollow: the pytest plugin stops such a session at once and `tools/gpu_validate.sh` fails. Nothing here
initialises CUDA.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from dataclasses import dataclass

ALLOW_NO_CUDA_ENV = "LESSONS_ALLOW_NO_CUDA"
_SMI_QUERY = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
_COMPAT_URL = "https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html"
_PYTORCH_URL = "https://pytorch.org/get-started/locally/"


@dataclass(frozen=True)
class SmiReport:
    """What `nvidia-smi` lists: GPU names and driver version, or why it could not say (`error`)."""

    gpus: tuple[str, ...] = ()
    driver: str | None = None
    error: str | None = None
    missing: bool = False


@dataclass(frozen=True)
class TorchReport:
    """What torch says about CUDA: its version and build, whether CUDA is usable, and what it warned."""

    version: str | None
    cuda: str | None = None
    hip: str | None = None
    available: bool = False
    count: int = 0
    warning: str = ""
    error: str | None = None

    @property
    def build(self) -> str:
        """Return the build in words: "CUDA 13.0", "ROCm/HIP 6.4" or "CPU-only"."""
        if self.cuda:
            return f"CUDA {self.cuda}"
        if self.hip:
            return f"ROCm/HIP {self.hip}"
        return "CPU-only"


def read_nvidia_smi() -> SmiReport:
    """Ask `nvidia-smi` for the GPUs' names and driver version, waiting ≤ 30 s (a broken driver hangs)."""
    try:
        proc = subprocess.run(_SMI_QUERY, capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        return SmiReport(missing=True, error="nvidia-smi: command not found")
    except (OSError, subprocess.SubprocessError) as exc:
        return SmiReport(error=f"nvidia-smi: {type(exc).__name__}: {exc}")
    if proc.returncode != 0:
        detail = (proc.stdout + proc.stderr).strip().splitlines()
        return SmiReport(error=f"nvidia-smi exited with {proc.returncode}: {detail[0] if detail else ''}".strip())
    rows = [[part.strip() for part in line.rsplit(",", 1)] for line in proc.stdout.splitlines() if line.strip()]
    gpus = tuple(row[0] for row in rows)
    drivers = {row[1] for row in rows if len(row) == 2}
    return SmiReport(gpus=gpus, driver=", ".join(sorted(drivers)) or None)


def read_torch() -> TorchReport:
    """Import torch and ask whether CUDA is usable, recording its warnings (it never creates a CUDA context)."""
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - a broken torch install must be reported, not crash the check
        return TorchReport(version=None, error=f"{type(exc).__name__}: {exc}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
    return TorchReport(version=torch.__version__, cuda=torch.version.cuda, hip=getattr(torch.version, "hip", None),
                       available=available, count=count, warning=" ".join(str(w.message) for w in caught).strip())


def header_lines(smi: SmiReport, report: TorchReport, lessons_version: str) -> list[str]:
    """Return the pytest header lines: lessons_lib and torch versions, the build, the GPUs torch and nvidia-smi see."""
    if report.error is not None:
        torch_line = f"lessons_lib {lessons_version}: torch cannot be imported ({report.error})"
    else:
        torch_line = (f"lessons_lib {lessons_version}: torch {report.version} ({report.build} build), "
                      f"{report.count} CUDA GPU(s) usable by torch -> "
                      + ("%%gpu cells run" if report.count else "%%gpu cells are skipped"))
    if smi.missing:
        smi_line = "nvidia-smi: not found (no NVIDIA driver here)"
    elif smi.error is not None:
        smi_line = smi.error
    else:
        names = "; ".join(f"{i}: {name}" for i, name in enumerate(smi.gpus)) or "none"
        smi_line = f"nvidia-smi: {len(smi.gpus)} GPU(s) [{names}], driver {smi.driver or '?'}"
    return [torch_line, smi_line]


_FIX = ("Cách sửa: (1) dùng torch CUDA sẵn có của máy (vd. image GPU): `COURSE_SYSTEM_TORCH=1 bash tools/course.sh "
        "test`; hoặc (2) cài bản CUDA của torch vào môi trường này: trên Linux, torch==2.13.0 từ "
        "https://pypi.org/simple là bản CUDA 13.0, cần driver NVIDIA ≥ 580 (xoá .venv rồi chạy lại `bash "
        f"tools/course.sh test`); trên Windows, dùng lệnh ở {_PYTORCH_URL}.")
_DRIVER_FIX = (f"Cách sửa: cập nhật driver NVIDIA (CUDA 13.x cần driver ≥ 580, CUDA 12.x cần ≥ 525: {_COMPAT_URL}), "
               "hoặc dùng torch có sẵn của máy, hợp với driver của nó: `COURSE_SYSTEM_TORCH=1 bash tools/course.sh test`.")
# Minimum NVIDIA driver per CUDA major version (NVIDIA, "CUDA Compatibility", minor version compatibility table).
_MIN_DRIVER = {11: 450, 12: 525, 13: 580}


def _driver_too_old(smi: SmiReport, report: TorchReport) -> bool:
    """Return True when nvidia-smi's driver is older than the minimum for torch's CUDA major version."""
    try:
        cuda_major = int((report.cuda or "").split(".")[0])
        driver_major = min(int(d.strip().split(".")[0]) for d in (smi.driver or "").split(","))
    except ValueError:
        return False
    return cuda_major in _MIN_DRIVER and driver_major < _MIN_DRIVER[cuda_major]


def torch_cannot_use_gpus(smi: SmiReport, report: TorchReport) -> str | None:
    """Return why this Python's torch cannot use the GPUs nvidia-smi lists, with the fix; None if it can."""
    if not smi.gpus or report.count > 0:
        return None
    n, names = len(smi.gpus), ", ".join(smi.gpus)
    if report.error is not None:
        return (f"❌ Máy có {n} GPU NVIDIA ({names}) nhưng {sys.executable} không import được torch: "
                f"{report.error}")
    if report.cuda is None:
        return (f"❌ Máy có {n} GPU NVIDIA ({names}) nhưng torch {report.version} trong {sys.executable} "
                f"là bản {report.build}: "
                f"mọi ô %%gpu sẽ bị bỏ qua và phép kiểm tra GPU sẽ 'xanh' mà không chạy gì. {_FIX}")
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None and hidden.strip() in ("", "-1", "none", "NoDevFiles"):
        return f"❌ CUDA_VISIBLE_DEVICES={hidden!r} giấu cả {n} GPU ({names}) khỏi torch. Bỏ biến này rồi chạy lại."
    said = f" torch báo: {report.warning}" if report.warning else ""
    driver = f", driver {smi.driver}" if smi.driver else ""
    fix = _DRIVER_FIX if _driver_too_old(smi, report) or "driver" in report.warning.lower() else _FIX
    return (f"❌ torch {report.version} ({report.build}) không dùng được {n} GPU NVIDIA ({names}{driver}): "
            f"torch.cuda.is_available() là False.{said} {fix}")


def no_usable_cuda(smi: SmiReport, report: TorchReport, init_error: str | None = None) -> str | None:
    """Return why no CUDA GPU is usable here (with the fix), or None when torch can compute on one.

    `init_error` is the error of a first computation on the GPU, if it failed (the caller runs it).
    """
    if smi.missing:
        return ("❌ Không có nvidia-smi: máy này không có GPU NVIDIA dùng được (hoặc chưa cài driver NVIDIA). "
                "tools/gpu_validate.sh chỉ dành cho máy có GPU NVIDIA; trên máy không GPU, `bash tools/course.sh test` "
                "kiểm tra mọi thứ khác (các ô %%gpu được báo skipped).")
    if smi.error is not None:
        return (f"❌ nvidia-smi không chạy được ({smi.error}): driver NVIDIA chưa nạp hoặc hỏng; "
                "cài lại driver hoặc khởi động lại máy.")
    if not smi.gpus:
        return "❌ nvidia-smi không liệt kê GPU nào (container không được cấp GPU?)."
    problem = torch_cannot_use_gpus(smi, report)
    if problem is None and init_error is not None:
        return f"❌ torch thấy {report.count} GPU nhưng phép tính đầu tiên trên GPU lỗi: {init_error}"
    return problem

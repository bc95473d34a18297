"""Tell an instructor when nvidia-smi lists a GPU that torch cannot use (every `%%gpu` cell would skip), and why.

The cause is `lessons_lib.device.explain_cuda`'s; this adds what only an instructor needs. Nothing here initialises CUDA.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lessons_lib.device import CudaFacts

ALLOW_NO_CUDA_ENV = "LESSONS_ALLOW_NO_CUDA"
_SMI_QUERY = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]


@dataclass(frozen=True)
class SmiReport:
    """What `nvidia-smi` lists: GPU names and driver version, or why it could not say (`error`)."""

    gpus: tuple[str, ...] = ()
    driver: str | None = None
    error: str | None = None
    missing: bool = False


@dataclass(frozen=True)
class TorchReport:
    """What torch says: its version and the CUDA facts (`device.CudaFacts`), or why it cannot be imported."""

    version: str | None
    cuda: CudaFacts | None = None
    error: str | None = None

    @property
    def count(self) -> int:
        """Return how many CUDA GPUs torch can use."""
        return self.cuda.count if self.cuda is not None else 0

    @property
    def build(self) -> str:
        """Return the build in words: "CUDA 13.0", "ROCm/HIP 6.4" or "CPU-only"."""
        cuda, hip = (self.cuda.cuda_build, self.cuda.hip_build) if self.cuda is not None else (None, None)
        return f"CUDA {cuda}" if cuda else f"ROCm/HIP {hip}" if hip else "CPU-only"


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
    """Import torch and read its CUDA facts without creating a CUDA context (a broken torch is reported)."""
    try:
        import torch

        from lessons_lib.device import gather_cuda_facts
    except Exception as exc:  # noqa: BLE001 - a broken torch install must be reported, not crash the check
        return TorchReport(version=None, error=f"{type(exc).__name__}: {exc}")
    return TorchReport(version=torch.__version__, cuda=gather_cuda_facts(probe_gpus=False))


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


def _torch_pin() -> str:
    """Return requirements.txt's torch pin, e.g. "torch==2.13.0" (no second copy)."""
    lines = (Path(__file__).resolve().parents[1] / "requirements.txt").read_text(encoding="utf-8").splitlines()
    return next((line.split(";")[0].strip() for line in lines if line.startswith("torch==")), "torch")


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
    if report.count > 0:
        return None if init_error is None else (f"❌ torch thấy {report.count} GPU nhưng phép tính đầu tiên trên "
                                                f"GPU lỗi: {init_error}")
    listed = f"❌ Máy có {len(smi.gpus)} GPU NVIDIA ({', '.join(smi.gpus)}) nhưng"
    if report.cuda is None:
        return f"{listed} {sys.executable} không import được torch: {report.error}"
    from lessons_lib.device import explain_cuda

    facts = replace(report.cuda, driver_found=True, driver_version=smi.driver or report.cuda.driver_version)
    fix = ("Cách sửa trong repo: (1) dùng torch có sẵn của máy, hợp với driver của nó (vd. image GPU): "
           "`COURSE_SYSTEM_TORCH=1 bash tools/course.sh test`; hoặc (2) xoá .venv rồi chạy lại `bash tools/course.sh "
           f"test` để cài {_torch_pin()} từ https://pypi.org/simple (trên Linux là bản có CUDA).")
    return (f"{listed} torch {report.version} ({report.build}) trong {sys.executable} không dùng được chúng: "
            "torch.cuda.is_available() là False, mọi ô %%gpu sẽ bị bỏ qua và phép kiểm tra GPU sẽ 'xanh' mà không "
            f"chạy gì. {' '.join(explain_cuda(facts))} {fix}")

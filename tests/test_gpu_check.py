"""tools/gpu_check.py: what nvidia-smi and torch say, and the messages when they disagree (faked here)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from lessons_lib.device import CudaFacts
from tools import gpu_check
from tools.gpu_check import SmiReport, TorchReport

H200 = SmiReport(gpus=("NVIDIA H200",), driver="570.86.15")
CPU_TORCH = TorchReport("2.13.0+cpu", CudaFacts(cuda_build=None))
CUDA_TORCH = TorchReport("2.13.0", CudaFacts(cuda_build="13.0"))
GOOD = TorchReport("2.13.0", CudaFacts(cuda_build="13.0", available=True, count=1))


def _runner(monkeypatch, stdout="", returncode=0, stderr="", raises=None):
    """Make subprocess.run answer as nvidia-smi would; return the list of calls it got."""
    calls = []

    def run(cmd, **kwargs):
        calls.append((cmd, kwargs))
        if raises is not None:
            raise raises
        return subprocess.CompletedProcess(cmd, returncode, stdout, stderr)

    monkeypatch.setattr(subprocess, "run", run)
    return calls


# --------------------------------------------------------------------------- reading nvidia-smi and torch


def test_read_nvidia_smi_parses_names_and_driver(monkeypatch):
    calls = _runner(monkeypatch, "NVIDIA H200, 580.95.05\nOdd, GPU name, 580.95.05\n")
    report = gpu_check.read_nvidia_smi()
    assert report == SmiReport(gpus=("NVIDIA H200", "Odd, GPU name"), driver="580.95.05")  # commas inside names
    assert calls[0][0][0] == "nvidia-smi" and calls[0][1]["timeout"] == 30


@pytest.mark.parametrize("answer, missing, error", [
    ({"raises": FileNotFoundError("nvidia-smi")}, True, "command not found"),
    ({"raises": subprocess.TimeoutExpired("nvidia-smi", 30)}, False, "TimeoutExpired"),
    ({"stdout": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
      "returncode": 9}, False, "exited with 9: NVIDIA-SMI has failed"),
])
def test_read_nvidia_smi_says_why_it_could_not_list(monkeypatch, answer, missing, error):
    _runner(monkeypatch, **answer)
    report = gpu_check.read_nvidia_smi()
    assert report.gpus == () and report.missing is missing and error in report.error


def test_read_torch_reports_this_machines_torch():
    report = gpu_check.read_torch()
    assert report.version == torch.__version__ and report.cuda.cuda_build == torch.version.cuda
    assert report.cuda.available == torch.cuda.is_available() and report.error is None
    assert report.count == (torch.cuda.device_count() if report.cuda.available else 0)
    assert report.cuda.gpus == (), "no GPU properties read: no CUDA context"


# --------------------------------------------------------------------------- the header


def test_header_names_torch_build_gpu_count_and_gpu_names():
    two = TorchReport("2.13.0", CudaFacts(cuda_build="13.0", available=True, count=2))
    lines = gpu_check.header_lines(SmiReport(gpus=("NVIDIA H200", "NVIDIA H200"), driver="580.1"), two, "0.2.0")
    assert lines[0] == ("lessons_lib 0.2.0: torch 2.13.0 (CUDA 13.0 build), 2 CUDA GPU(s) usable by torch "
                        "-> %%gpu cells run")
    assert lines[1] == "nvidia-smi: 2 GPU(s) [0: NVIDIA H200; 1: NVIDIA H200], driver 580.1"


def test_header_on_a_machine_without_gpu_or_torch():
    lines = gpu_check.header_lines(SmiReport(missing=True, error="x"), TorchReport(None, error="ImportError: no"),
                                   "0.2.0")
    assert "torch cannot be imported (ImportError: no)" in lines[0]
    assert lines[1] == "nvidia-smi: not found (no NVIDIA driver here)"
    cpu = gpu_check.header_lines(SmiReport(), CPU_TORCH, "0.2.0")
    assert "CPU-only build" in cpu[0] and cpu[0].endswith("%%gpu cells are skipped") and "0 GPU(s) [none]" in cpu[1]
    assert TorchReport("2.9.0", CudaFacts(cuda_build=None, hip_build="6.4")).build == "ROCm/HIP 6.4"


# --------------------------------------------------------------------------- torch cannot use the GPUs listed


_OLD_WARNING = "CUDA initialization: The NVIDIA driver on your system is too old (found version 12080)."


@pytest.mark.parametrize("report, named", [
    # the learner's diagnosis (device.explain_cuda) names the cause; the instructor's adds the repo's two fixes
    (CPU_TORCH, ["torch 2.13.0+cpu", "CPU-only", "pytorch.org/get-started/locally", "COURSE_SYSTEM_TORCH=1"]),
    (TorchReport("2.13.0", CudaFacts(cuda_build="13.0", init_warning=_OLD_WARNING)),
     ["CUDA 12.8", "≥ 580", "cuda-compatibility", "COURSE_SYSTEM_TORCH=1"]),
    # torch warns once per process: nvidia-smi's driver against the table still finds it too old
    (CUDA_TORCH, ["quá cũ", "570.86.15", "≥ 580", "cuda-compatibility"]),
    (TorchReport("2.13.0", CudaFacts(cuda_build="13.0", visible_devices="")), ["CUDA_VISIBLE_DEVICES=''"]),
    (TorchReport(None, error="OSError: libcudart.so.13"), ["không import được torch: OSError: libcudart.so.13"]),
])
def test_why_torch_cannot_use_the_listed_gpus(monkeypatch, report, named):
    monkeypatch.setattr(sys, "executable", "/x/.venv/bin/python")
    message = gpu_check.no_usable_cuda(H200, report)
    assert "NVIDIA H200" in message and "/x/.venv/bin/python" in message and "\n" not in message
    assert all(part in message for part in named), message


def test_the_fix_names_the_pin_of_requirements_txt_not_a_copy():
    pin = gpu_check._torch_pin()
    assert pin.startswith("torch==") and pin in gpu_check.no_usable_cuda(H200, CPU_TORCH)


def test_a_recent_driver_is_not_called_too_old():
    message = gpu_check.no_usable_cuda(SmiReport(gpus=("T4",), driver="580.95.05"), CUDA_TORCH)
    assert "quá cũ" not in message


# --------------------------------------------------------------------------- no usable CUDA (gpu_validate)


@pytest.mark.parametrize("smi, said", [
    (SmiReport(missing=True, error="nvidia-smi: command not found"), "Không có nvidia-smi"),
    (SmiReport(error="nvidia-smi exited with 9: failed"), "nvidia-smi không chạy được (nvidia-smi exited with 9"),
    (SmiReport(), "không liệt kê GPU nào"),
])
def test_no_usable_cuda_without_a_listed_gpu(smi, said):
    assert said in gpu_check.no_usable_cuda(smi, CPU_TORCH)


def test_no_usable_cuda_passes_on_torchs_problem_then_the_first_computation():
    assert "CPU-only" in gpu_check.no_usable_cuda(H200, CPU_TORCH)
    failed = gpu_check.no_usable_cuda(H200, GOOD, init_error="RuntimeError: no kernel image is available")
    assert "no kernel image" in failed and "phép tính đầu tiên" in failed
    assert gpu_check.no_usable_cuda(H200, GOOD) is None

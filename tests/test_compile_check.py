"""lessons_lib.compile_check: whether torch.compile can run here, and a clear reason when it cannot."""

from __future__ import annotations

import shutil

import pytest
import torch

from lessons_lib import compile_check
from lessons_lib.compile_check import compile_support

HAS_CXX = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")


@pytest.mark.skipif(not HAS_CXX, reason="no C++ compiler on this machine")
def test_cpu_is_supported_with_a_compiler():
    support = compile_support("cpu")
    assert support and support.ok and support.device == "cpu"
    assert "biên dịch bằng /" in support.reason
    assert str(support).startswith("✅ torch.compile (cpu):") and repr(support) == str(support)


def test_cxx_variable_wins(monkeypatch):
    python = shutil.which("python3") or shutil.which("python")
    monkeypatch.setenv("CXX", python)
    assert compile_support("cpu").reason.endswith(f"biên dịch bằng {python}.")
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    assert "không tìm thấy trình biên dịch C++" in compile_support("cpu").reason


def test_no_compiler_is_explained(monkeypatch):
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(compile_check.shutil, "which", lambda name: None)
    support = compile_support("cpu")
    assert not support
    assert "không tìm thấy trình biên dịch C++" in support.reason and "xcode-select" in support.reason
    assert str(support).startswith("⏭️ torch.compile (cpu): không tìm thấy")


def test_dynamo_refusal_is_reported(monkeypatch):
    import torch._dynamo.eval_frame as eval_frame

    def refuse():
        raise RuntimeError("Python 3.99+ not yet supported for torch.compile")

    monkeypatch.setattr(eval_frame, "check_if_dynamo_supported", refuse)
    support = compile_support("cpu")
    assert not support.ok
    assert "3.99+ not yet supported" in support.reason and torch.__version__ in support.reason


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu():
    support = compile_support("cuda")
    assert not support.ok and "không có GPU CUDA" in support.reason


def test_cuda_checks_triton_and_capability(monkeypatch):
    monkeypatch.setattr(compile_check.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(compile_check.torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(compile_check.torch.cuda, "get_device_name", lambda index: "Tesla P100")
    monkeypatch.setattr(compile_check.torch.cuda, "get_device_capability", lambda index: (6, 0))
    monkeypatch.setattr(compile_check.importlib.util, "find_spec", lambda name: None)
    assert "Triton" in compile_support("cuda").reason
    monkeypatch.setattr(compile_check.importlib.util, "find_spec", lambda name: object())
    old = compile_support("cuda:0")
    assert not old.ok and "6.0" in old.reason and "7.0" in old.reason
    monkeypatch.setattr(compile_check.torch.cuda, "get_device_name", lambda index: "Tesla T4")
    monkeypatch.setattr(compile_check.torch.cuda, "get_device_capability", lambda index: (7, 5))
    t4 = compile_support("cuda")
    assert t4.ok and "Triton cho Tesla T4" in t4.reason


@pytest.mark.parametrize(("device", "error"), [(3, TypeError), ("gpu", ValueError), ("meta", ValueError),
                                               (torch.device("mps"), ValueError)])
def test_bad_devices(device, error):
    with pytest.raises(error, match="'cpu' hoặc 'cuda'"):
        compile_support(device)

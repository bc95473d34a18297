"""Predict the cuBLAS/cuBLASLt workspaces PyTorch keeps in the caching allocator, for the running torch version.

The rules are read from ATen (``aten/src/ATen/cuda/CublasHandlePool.cpp``) per release branch:

- cuBLAS: one workspace per (handle, stream), kept until the process exits (pytorch#83461); ``:4096:2:16:8`` =
  2 × 4 MiB + 8 × 16 KiB by default, 32 MiB on Hopper (9.x) and, from 2.12, Blackwell (10.x, 12.x;
  pytorch#175344). ``CUBLAS_WORKSPACE_CONFIG=:SIZE_KiB:COUNT[...]`` overrides it.
- cuBLASLt (``nn.Linear`` with a bias, forward): 1 MiB (``CUBLASLT_WORKSPACE_SIZE`` in KiB), allocated per call
  until 2.8, kept per (handle, stream) from 2.9 (pytorch#156495). Sharing the cuBLAS workspace is opt-in with
  ``TORCH_CUBLASLT_UNIFIED_WORKSPACE=1`` from 2.8 (pytorch#151163) and the default from 2.12 (pytorch#168175
  changed only the size rule in 2.11; pytorch#175879 the allocation).
- From 2.15 a workspace is bound per operation and freed after it unless ``TORCH_CUBLAS_WORKSPACE_CACHE=1``
  (pytorch#194311): nothing stays allocated between steps; it shows up inside a step's peak instead.

A training step uses two cuBLAS handles: the forward pass runs on the Python thread, the backward pass on
autograd's device thread (``torch/csrc/autograd/engine.cpp``), each with its own handle.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import torch

from .sizes import format_bytes

_KIB, _MIB = 1024, 2**20
_DEFAULT_CUBLAS = 4096 * _KIB * 2 + 16 * _KIB * 8      # ":4096:2:16:8"
_LARGE_CUBLAS = 32 * _MIB                             # Hopper; Blackwell from 2.12
_DEFAULT_LT = 1024 * _KIB
_HANDLES = 2  # a train step's cuBLAS handles: the forward's Python thread and autograd's device thread


def _torch_version() -> tuple[int, int]:
    """Return (major, minor) of the running torch, e.g. (2, 11) for "2.11.0+cu130"."""
    major, minor = re.match(r"(\d+)\.(\d+)", torch.__version__).groups()
    return int(major), int(minor)


def _cublas_config_bytes(value: str) -> int | None:
    """Return the bytes of a ``CUBLAS_WORKSPACE_CONFIG`` value (":SIZE_KiB:COUNT" pairs), None if unreadable."""
    pairs = re.findall(r":([0-9]+):([0-9]+)", value)
    return sum(int(size) * _KIB * int(count) for size, count in pairs) if pairs else None


def _flag(name: str) -> bool | None:
    value = os.environ.get(name)
    if value is None:
        return None
    return value.strip().lower() in ("1", "true", "yes", "on", "y")


@dataclass(frozen=True)
class WorkspaceEstimate:
    """The BLAS workspaces expected in ``memory_allocated()`` before a train step."""

    torch_version: tuple[int, int]
    capability: tuple[int, int]
    before_step_bytes: int    # kept allocated after the first step (forward + backward handles)
    how: str                  # one Vietnamese sentence: which rule of this torch version applies

    def __str__(self) -> str:
        version = ".".join(map(str, self.torch_version))
        return (f"torch {version}, sm_{self.capability[0]}{self.capability[1]}: dự đoán workspace giữ sẵn "
                f"{format_bytes(self.before_step_bytes)} ({self.how})")


def blas_workspace_estimate(capability: tuple[int, int]) -> WorkspaceEstimate:
    """Predict the workspaces a train step leaves allocated on a GPU of `capability`, e.g. (7, 5) on a T4.

    It follows the running ``torch.__version__`` and the environment variables of the module docstring.
    """
    if (not isinstance(capability, tuple) or len(capability) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in capability)):
        raise TypeError(f"capability phải là tuple (major, minor) như (7, 5) cho T4, không phải {capability!r}.")
    version, env = _torch_version(), os.environ
    major = capability[0]
    large = major == 9 or (version >= (2, 12) and major in (10, 12))
    cublas = _cublas_config_bytes(env.get("CUBLAS_WORKSPACE_CONFIG", "")) or (_LARGE_CUBLAS if large else _DEFAULT_CUBLAS)
    try:
        lt = int(env["CUBLASLT_WORKSPACE_SIZE"]) * _KIB if "CUBLASLT_WORKSPACE_SIZE" in env else _DEFAULT_LT
    except ValueError:
        lt = _DEFAULT_LT                                   # torch warns and keeps its default
    unified_flag = _flag("TORCH_CUBLASLT_UNIFIED_WORKSPACE")
    unified = (unified_flag is True) if version < (2, 12) else (unified_flag is not False)
    unified = unified and version >= (2, 8)
    if version >= (2, 11) and unified_flag is not False:
        lt = min(lt, cublas)          # 2.11's size rule already treats the Lt workspace as part of cuBLAS's
    cached = version < (2, 15) or _flag("TORCH_CUBLAS_WORKSPACE_CACHE") is True
    if not cached:
        return WorkspaceEstimate(version, capability, 0,
                                 "từ 2.15 mỗi phép nhân ma trận mượn workspace rồi trả ngay, trừ khi đặt "
                                 "TORCH_CUBLAS_WORKSPACE_CACHE=1: workspace nằm trong peak của bước, không nằm sẵn")
    if unified:
        how, lt_kept = f"{_HANDLES} × cuBLAS {format_bytes(cublas)}; cuBLASLt dùng chung workspace đó", 0
    elif version < (2, 9):  # allocated only during a call: part of a step's peak instead
        how = (f"{_HANDLES} × cuBLAS {format_bytes(cublas)}; cuBLASLt {format_bytes(lt)} "
               "chỉ được cấp trong lúc gọi")
        lt_kept = 0
    else:
        how = f"{_HANDLES} × cuBLAS {format_bytes(cublas)} + 1 × cuBLASLt {format_bytes(lt)} (của forward)"
        lt_kept = lt
    return WorkspaceEstimate(version, capability, _HANDLES * cublas + lt_kept, how)

"""Tell whether an N×N matmul's tensors fit in a device's free memory."""

from __future__ import annotations

import os

import torch

from ._checks import _check_positive_int
from .devices import resolve_device
from .dtypes import resolve_dtype


def memory_available(device: str | torch.device) -> int | None:
    """Return the bytes that new tensors on `device` may still use, or None when it cannot be told.

    CUDA: free device memory plus what PyTorch's cache holds unused. CPU: the OS's available memory.
    MPS: the recommended working set minus what the driver holds (when this PyTorch reports it),
    else the OS's available memory (Apple GPUs share it).
    """
    dev = resolve_device(device)
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        free, _total = torch.cuda.mem_get_info(index)
        cached = torch.cuda.memory_reserved(index) - torch.cuda.memory_allocated(index)
        return int(free + cached)
    if dev.type == "mps":
        mps = getattr(torch, "mps", None)
        recommended = getattr(mps, "recommended_max_memory", None)
        driver = getattr(mps, "driver_allocated_memory", None)
        if callable(recommended) and callable(driver):
            return max(0, int(recommended()) - int(driver()))
    return _host_memory_available()


def _host_memory_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def matmul_bytes(n: int, dtype: torch.dtype | str = torch.float32) -> int:
    """Return the bytes an N×N matmul holds at once: inputs a and b and the result c."""
    _check_positive_int("n", n)
    return 3 * n * n * torch.empty((), dtype=resolve_dtype(dtype)).element_size()


def fits_in_memory(n: int, device: str | torch.device, dtype: torch.dtype | str = torch.float32) -> bool:
    """Return True when an N×N matmul's tensors fit in `device`'s free memory with a safety margin.

    Accelerators keep 10 % and 256 MiB spare (library workspaces); the CPU uses at most half of the
    available RAM. When free memory cannot be read, True is returned.
    """
    need = matmul_bytes(n, dtype)
    dev = resolve_device(device)
    free = memory_available(dev)
    if free is None:
        return True
    if dev.type == "cpu":
        return need <= 0.5 * free
    return need <= 0.9 * free - 256 * 2**20

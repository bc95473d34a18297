"""Read and cap CUDA memory: allocator stats, a temporary cap, a guarded OOM demo."""

from __future__ import annotations

import contextlib
import gc
import math
from dataclasses import dataclass

import torch

from .._validate import check_int
from ..device import as_device
from ..display import Printable
from .sizes import format_bytes

_cuda = torch.cuda  # every CUDA call goes through this name; tests replace it with a fake


def _allocate(shape: tuple[int, ...], index: int) -> torch.Tensor:
    return torch.empty(shape, dtype=torch.float32, device=torch.device("cuda", index))


def _get_fraction(index: int) -> float:
    getter = getattr(_cuda, "get_per_process_memory_fraction", None)  # newer PyTorch only; else 1.0 (no cap)
    return float(getter(index)) if getter is not None else 1.0


def _cuda_index(device) -> int | None:
    """Return the CUDA index `device` names (None = current), or None when it is not a usable CUDA device."""
    dev = as_device("cuda" if device is None else device, "device", "'cuda', 'cuda:0', 'cpu'")
    if dev.type != "cuda" or not _cuda.is_available():
        return None
    index = _cuda.current_device() if dev.index is None else dev.index
    if index >= _cuda.device_count():
        raise ValueError(f"Không có cuda:{index}; máy này có {_cuda.device_count()} GPU.")
    return index


def _not_cuda_reason(device) -> str:
    if device is not None and torch.device(device).type != "cuda":
        return f"thiết bị {str(device)!r} không phải CUDA; các bộ đếm này chỉ có với GPU CUDA"
    return "không có GPU CUDA trên máy này"


def _need_cuda(what: str) -> int:
    """Return the current CUDA device's index, or raise the error that says to run the cell under %%gpu."""
    if not _cuda.is_available():
        raise ValueError(f"{what} cần GPU CUDA ({_not_cuda_reason(None)}). Hãy chạy trong ô %%gpu.")
    return _cuda.current_device()


def gpu_memory_stats(device: str | torch.device | None = None) -> str:
    """Return a table of the CUDA caching allocator's bytes (allocated, reserved, peak) and the driver's view."""
    index = _cuda_index(device)
    if index is None:
        return "Bộ nhớ GPU: không khả dụng — " + _not_cuda_reason(device)
    free, total = _cuda.mem_get_info(index)
    allocated, reserved = _cuda.memory_allocated(index), _cuda.memory_reserved(index)
    driver_used = total - free  # what the driver (and nvidia-smi) counts as used on the whole GPU
    rows = [
        ("allocated (tensor đang sống)", allocated),
        ("reserved (PyTorch giữ, gồm cache)", reserved),
        ("  trong đó cache trống", reserved - allocated),
        ("peak allocated (từ lần reset)", _cuda.max_memory_allocated(index)),
        ("driver: đã dùng trên cả GPU", driver_used),
        ("  ngoài PyTorch (context, tiến trình khác)", driver_used - reserved),
        ("driver: tổng dung lượng", total),
    ]
    width = max(len(label) for label, _ in rows)
    return "\n".join([f"cuda:{index} ({_cuda.get_device_name(index)})"]
                     + [f"  {label:<{width}}  {format_bytes(value):>11}" for label, value in rows])


def release_cached_memory() -> None:
    """Collect garbage and return the CUDA allocator's empty cache to the driver (where there is CUDA)."""
    if _cuda.is_available():
        gc.collect()
        _cuda.empty_cache()


@contextlib.contextmanager
def _capped(room_bytes: int, index: int):
    previous = _get_fraction(index)
    _cuda.empty_cache()
    _, total = _cuda.mem_get_info(index)
    fraction = min(1.0, (_cuda.memory_reserved(index) + room_bytes) / total)
    _cuda.set_per_process_memory_fraction(fraction, index)
    try:
        yield fraction
    finally:
        _cuda.set_per_process_memory_fraction(previous, index)


def cuda_memory_cap(room_bytes: int):
    """Let this process reserve at most `room_bytes` more on the GPU in a ``with`` block, then restore it."""
    check_int("room_bytes", room_bytes, 1)
    return _capped(room_bytes, _need_cuda("cuda_memory_cap"))


@dataclass(frozen=True, repr=False)
class OomDemoResult(Printable):
    """What `oom_demo` saw: how many tensors fitted, memory before the error, and after cleaning up."""

    device: str
    cap_bytes: int
    tensor_bytes: int
    allocations: int
    oom: bool
    allocated_before_error: int
    reserved_before_error: int
    error_message: str | None
    allocated_after_cleanup: int
    reserved_after_cleanup: int
    fraction_restored: float

    def __str__(self) -> str:
        f = format_bytes
        made = (f"Tạo được {self.allocations} tensor rồi OutOfMemoryError." if self.oom else
                f"Tạo {self.allocations} tensor (hết số lần cho phép) mà KHÔNG có OOM.")
        return "\n".join([
            f"Giới hạn tạm thời: {f(self.cap_bytes)} trên {self.device}; mỗi tensor {f(self.tensor_bytes)}.",
            made,
            f"memory_allocated ngay trước lỗi: {f(self.allocated_before_error)} "
            f"(reserved {f(self.reserved_before_error)})",
            f"Sau del + empty_cache(): allocated {f(self.allocated_after_cleanup)}, "
            f"reserved {f(self.reserved_after_cleanup)}",
            f"Đã trả lại giới hạn cũ (fraction = {self.fraction_restored:g}).",
        ])


_DEMO_SHAPE = (10_000, 10_000)  # float32: 381 MiB each


def oom_demo(*, room_bytes: int = 2 * 2**30) -> OomDemoResult:
    """Trigger a real CUDA out-of-memory error safely, clean up, and report memory before and after."""
    check_int("room_bytes", room_bytes, 1)
    index = _need_cuda("oom_demo")
    tensor_bytes = math.prod(_DEMO_SHAPE) * 4

    tensors: list[torch.Tensor] = []
    before = (0, 0)
    message = None
    with _capped(room_bytes, index) as fraction:
        cap_bytes = int(fraction * _cuda.mem_get_info(index)[1])
        try:
            for _ in range(room_bytes // tensor_bytes + 2):
                before = (_cuda.memory_allocated(index), _cuda.memory_reserved(index))
                tensors.append(_allocate(_DEMO_SHAPE, index))
        except torch.cuda.OutOfMemoryError as exc:  # torch.OutOfMemoryError, the same class
            message = str(exc)
        made = len(tensors)
        del tensors  # outside the except block, so nothing else holds them now
        release_cached_memory()
        after = (_cuda.memory_allocated(index), _cuda.memory_reserved(index))
    return OomDemoResult(f"cuda:{index}", cap_bytes, tensor_bytes, made, message is not None, before[0], before[1],
                         message, after[0], after[1], _get_fraction(index))

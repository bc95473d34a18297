"""Read and cap CUDA memory through one seam (`_cuda`): allocator stats, cache release, a guarded OOM demo."""

from __future__ import annotations

import contextlib
import gc
import math
from dataclasses import dataclass

import torch

from ..i18n import tr
from ._bytes import format_bytes
from ._checks import _check_int
from .oom import TorchOutOfMemoryError

# --------------------------------------------------------------------------- CUDA access (one seam for tests)


class _Cuda:
    """The CUDA calls the memory helpers make, in one place (tests replace `_cuda` with a fake)."""

    def is_available(self) -> bool:
        return torch.cuda.is_available()

    def current_device(self) -> int:
        return torch.cuda.current_device()

    def device_count(self) -> int:
        return torch.cuda.device_count()

    def name(self, index: int) -> str:
        return torch.cuda.get_device_name(index)

    def allocated(self, index: int) -> int:
        return torch.cuda.memory_allocated(index)

    def reserved(self, index: int) -> int:
        return torch.cuda.memory_reserved(index)

    def peak_allocated(self, index: int) -> int:
        return torch.cuda.max_memory_allocated(index)

    def peak_reserved(self, index: int) -> int:
        return torch.cuda.max_memory_reserved(index)

    def mem_get_info(self, index: int) -> tuple[int, int]:
        return torch.cuda.mem_get_info(index)

    def empty_cache(self) -> None:
        torch.cuda.empty_cache()

    def get_fraction(self, index: int) -> float | None:
        getter = getattr(torch.cuda, "get_per_process_memory_fraction", None)  # torch >= 2.6 or so
        return float(getter(index)) if getter is not None else None

    def set_fraction(self, fraction: float, index: int) -> None:
        torch.cuda.set_per_process_memory_fraction(float(fraction), index)

    def allocate(self, shape: tuple[int, ...], dtype: torch.dtype, index: int) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device=torch.device("cuda", index))


_cuda = _Cuda()


def _cuda_index(device) -> int | None:
    """Return the CUDA index `device` names (None = current), or None when it is not a usable CUDA device."""
    if isinstance(device, bool) or (device is not None and not isinstance(device, (str, int, torch.device))):
        raise TypeError(
            tr(
                f"device phải là None, 'cuda', 'cuda:0', số thứ tự GPU hoặc torch.device, không phải "
                f"{type(device).__name__}",
                f"device must be None, 'cuda', 'cuda:0', a GPU index or a torch.device, not {type(device).__name__}",
            )
        )
    if isinstance(device, int):
        if device < 0:
            raise ValueError(tr(f"Số thứ tự GPU phải ≥ 0, nhận {device}", f"GPU index must be >= 0, got {device}"))
        dev = torch.device("cuda", device)
    elif device is None:
        dev = torch.device("cuda")
    else:
        try:
            dev = torch.device(device)
        except (RuntimeError, ValueError) as exc:
            raise ValueError(tr(f"Không hiểu thiết bị {device!r}; dùng 'cuda', 'cuda:0' hoặc 'cpu'.",
                                f"Unknown device {device!r}; use 'cuda', 'cuda:0' or 'cpu'.")) from exc
    if dev.type != "cuda" or not _cuda.is_available():
        return None
    index = _cuda.current_device() if dev.index is None else dev.index
    if index >= _cuda.device_count():
        raise ValueError(tr(f"Không có cuda:{index}; máy này có {_cuda.device_count()} GPU.",
                            f"There is no cuda:{index}; this machine has {_cuda.device_count()} GPU(s)."))
    return index


def _not_cuda_reason(device) -> str:
    if device is not None and not isinstance(device, int) and torch.device(device).type != "cuda":
        return tr(f"thiết bị {str(device)!r} không phải CUDA; các bộ đếm này chỉ có với GPU CUDA",
                  f"device {str(device)!r} is not CUDA; these counters exist only for CUDA GPUs")
    return tr("không có GPU CUDA trên máy này", "no CUDA GPU on this machine")


# --------------------------------------------------------------------------- allocator stats


@dataclass(frozen=True)
class GpuMemoryStats:
    """The CUDA caching allocator's counters for one GPU, or the reason they are not available."""

    available: bool
    device: str
    allocated: int | None = None
    reserved: int | None = None
    peak_allocated: int | None = None
    peak_reserved: int | None = None
    driver_free: int | None = None
    driver_total: int | None = None
    reason: str = ""

    @property
    def cached(self) -> int | None:
        """Return reserved - allocated: memory the allocator keeps for reuse (None off CUDA)."""
        return None if not self.available else self.reserved - self.allocated

    @property
    def driver_used(self) -> int | None:
        """Return what the driver (and ``nvidia-smi``) counts as used on the whole GPU (None off CUDA)."""
        return None if not self.available else self.driver_total - self.driver_free

    @property
    def outside_pytorch(self) -> int | None:
        """Return driver-used minus reserved: CUDA context, libraries and other processes (None off CUDA)."""
        return None if not self.available else self.driver_used - self.reserved

    def __str__(self) -> str:
        if not self.available:
            return tr("Bộ nhớ GPU: không khả dụng — ", "GPU memory: not available — ") + self.reason
        rows = [
            (tr("allocated (tensor đang sống)", "allocated (live tensors)"), self.allocated),
            (tr("reserved (PyTorch giữ, gồm cache)", "reserved (held by PyTorch, incl. cache)"), self.reserved),
            (tr("  trong đó cache trống", "  of which empty cache"), self.cached),
            (tr("peak allocated (từ lần reset)", "peak allocated (since reset)"), self.peak_allocated),
            (tr("driver: đã dùng trên cả GPU", "driver: used on the whole GPU"), self.driver_used),
            (tr("  ngoài PyTorch (context, tiến trình khác)", "  outside PyTorch (context, other processes)"),
             self.outside_pytorch),
            (tr("driver: tổng dung lượng", "driver: total capacity"), self.driver_total),
        ]
        width = max(len(label) for label, _ in rows)
        lines = [f"{self.device}"] + [f"  {label:<{width}}  {format_bytes(value):>11}" for label, value in rows]
        return "\n".join(lines)


def gpu_memory_stats(device: str | int | torch.device | None = None) -> GpuMemoryStats:
    """Return allocated / reserved / peak bytes of the CUDA caching allocator and the driver's view.

    Off CUDA (CPU, MPS, no GPU) it returns stats with ``available=False`` and the reason,
    instead of raising, so a notebook cell can print it everywhere.
    """
    index = _cuda_index(device)
    if index is None:
        return GpuMemoryStats(False, str(device or "cuda"), reason=_not_cuda_reason(device))
    free, total = _cuda.mem_get_info(index)
    return GpuMemoryStats(
        available=True,
        device=f"cuda:{index} ({_cuda.name(index)})",
        allocated=_cuda.allocated(index),
        reserved=_cuda.reserved(index),
        peak_allocated=_cuda.peak_allocated(index),
        peak_reserved=_cuda.peak_reserved(index),
        driver_free=int(free),
        driver_total=int(total),
    )


def release_cached_memory(collect_garbage: bool | None = None) -> None:
    """Collect Python garbage, then return the CUDA allocator's empty cache to the driver.

    Call it *after* leaving an ``except`` block: while the exception is alive its traceback keeps the
    failed step's tensors alive, and they cannot be freed.

    Args:
        collect_garbage: Run ``gc.collect()`` first (frees tensors caught in reference cycles). None means
            "only where CUDA is available": without CUDA there is no cache to return and a full collection
            only costs time.
    """
    if collect_garbage is not None and not isinstance(collect_garbage, bool):
        raise TypeError(tr("collect_garbage phải là True, False hoặc None", "collect_garbage must be True, False or None"))
    cuda = _cuda.is_available()
    if collect_garbage or (collect_garbage is None and cuda):
        gc.collect()
    if cuda:
        _cuda.empty_cache()


# --------------------------------------------------------------------------- capped OOM demo


def _need_cuda(device, what: str) -> int:
    index = _cuda_index(device)
    if index is None:
        raise ValueError(
            tr(f"{what} cần GPU CUDA ({_not_cuda_reason(device)}). Hãy chạy trong ô %%gpu.",
               f"{what} needs a CUDA GPU ({_not_cuda_reason(device)}). Run it in a %%gpu cell.")
        )
    return index


@contextlib.contextmanager
def cuda_memory_cap(room_bytes: int, device: str | int | torch.device | None = None):
    """Limit how much more this process may reserve on a GPU, and restore the previous limit afterwards.

    Uses ``torch.cuda.set_per_process_memory_fraction`` so an OOM comes early, never filling a shared or
    large GPU. The cap is "what PyTorch reserves now + `room_bytes`" (after emptying the cache); the old
    fraction is restored in a ``finally`` (read with ``get_per_process_memory_fraction`` where this
    PyTorch has it, else 1.0, the default). Yields the fraction set.
    """
    _check_int("room_bytes", room_bytes, 1)
    index = _need_cuda(device, "cuda_memory_cap")
    previous = _cuda.get_fraction(index)
    _cuda.empty_cache()
    _, total = _cuda.mem_get_info(index)
    fraction = min(1.0, (_cuda.reserved(index) + room_bytes) / total)
    _cuda.set_fraction(fraction, index)
    try:
        yield fraction
    finally:
        _cuda.set_fraction(1.0 if previous is None else previous, index)


@dataclass(frozen=True)
class OomDemoResult:
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
        lines = [tr(f"Giới hạn tạm thời: {format_bytes(self.cap_bytes)} trên {self.device}; "
                    f"mỗi tensor {format_bytes(self.tensor_bytes)}.",
                    f"Temporary cap: {format_bytes(self.cap_bytes)} on {self.device}; "
                    f"each tensor {format_bytes(self.tensor_bytes)}.")]
        if self.oom:
            lines.append(tr(f"Tạo được {self.allocations} tensor rồi OutOfMemoryError.",
                            f"{self.allocations} tensors fitted, then OutOfMemoryError."))
        else:
            lines.append(tr(f"Tạo {self.allocations} tensor (hết số lần cho phép) mà KHÔNG có OOM.",
                            f"Made {self.allocations} tensors (the allowed maximum) WITHOUT an OOM."))
        lines += [
            tr("memory_allocated ngay trước lỗi: ", "memory_allocated just before the error: ")
            + format_bytes(self.allocated_before_error)
            + tr(f" (reserved {format_bytes(self.reserved_before_error)})",
                 f" (reserved {format_bytes(self.reserved_before_error)})"),
            tr("Sau del + empty_cache(): allocated ", "After del + empty_cache(): allocated ")
            + format_bytes(self.allocated_after_cleanup) + ", reserved " + format_bytes(self.reserved_after_cleanup),
            tr(f"Đã trả lại giới hạn cũ (fraction = {self.fraction_restored:g}).",
               f"Restored the previous cap (fraction = {self.fraction_restored:g})."),
        ]
        return "\n".join(lines)


def oom_demo(device: str | int | torch.device | None = None, *, room_bytes: int = 2 * 2**30,
             shape: tuple[int, ...] = (10_000, 10_000), dtype: torch.dtype = torch.float32,
             max_allocations: int | None = None) -> OomDemoResult:
    """Trigger a real CUDA out-of-memory error safely, clean up, and report memory before and after.

    The seed's exercise 4 (append 10000×10000 tensors until ``OutOfMemoryError``), made safe: the process
    is capped with `cuda_memory_cap` (``room_bytes`` more than it holds now), at most `max_allocations`
    tensors are made (default: enough to pass the cap, plus 2), ``memory_allocated`` is read before each
    allocation, the error is caught as ``torch.OutOfMemoryError``, the tensors are dropped (``del`` +
    ``gc.collect()`` + ``empty_cache()``) *after* leaving the ``except`` block, and the cap is restored
    whatever happens.

    Raises:
        ValueError: no CUDA GPU (run it in a ``%%gpu`` cell), or bad sizes.
    """
    _check_int("room_bytes", room_bytes, 1)
    if not isinstance(shape, tuple) or not shape or not all(isinstance(s, int) and not isinstance(s, bool)
                                                            and s > 0 for s in shape):
        raise TypeError(tr(f"shape phải là tuple số nguyên dương, vd (10000, 10000), không phải {shape!r}",
                           f"shape must be a tuple of positive ints, e.g. (10000, 10000), not {shape!r}"))
    if not isinstance(dtype, torch.dtype):
        raise TypeError(tr(f"dtype phải là torch.dtype (vd torch.float32), không phải {type(dtype).__name__}",
                           f"dtype must be a torch.dtype (e.g. torch.float32), not {type(dtype).__name__}"))
    tensor_bytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    if max_allocations is None:
        max_allocations = room_bytes // tensor_bytes + 2
    _check_int("max_allocations", max_allocations, 1)
    index = _need_cuda(device, "oom_demo")

    tensors: list[torch.Tensor] = []
    before = (0, 0)
    message = None
    with cuda_memory_cap(room_bytes, index) as fraction:
        cap_bytes = int(fraction * _cuda.mem_get_info(index)[1])
        try:
            for _ in range(max_allocations):
                before = (_cuda.allocated(index), _cuda.reserved(index))
                tensors.append(_cuda.allocate(shape, dtype, index))
        except TorchOutOfMemoryError as exc:
            message = str(exc)
        made = len(tensors)
        del tensors  # drop the references outside the except block (its traceback is gone now)
        release_cached_memory()
        after = (_cuda.allocated(index), _cuda.reserved(index))
    restored = _cuda.get_fraction(index)
    return OomDemoResult(
        device=f"cuda:{index}",
        cap_bytes=cap_bytes,
        tensor_bytes=tensor_bytes,
        allocations=made,
        oom=message is not None,
        allocated_before_error=before[0],
        reserved_before_error=before[1],
        error_message=message,
        allocated_after_cleanup=after[0],
        reserved_after_cleanup=after[1],
        fraction_restored=1.0 if restored is None else restored,
    )

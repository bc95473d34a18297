"""Tell out-of-memory errors from other errors, and read a CUDA out-of-memory message field by field."""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from .sizes import format_bytes, parse_bytes


class MemoryBudgetExceeded(RuntimeError):
    """Raised by `oom_safe_train_step` when a step needs more bytes than its simulated budget (a CPU stand-in)."""


#: What the helpers treat as "out of memory": a real CUDA OOM or a simulated budget overrun.
OOM_ERRORS: tuple[type[BaseException], ...] = (torch.cuda.OutOfMemoryError, MemoryBudgetExceeded)

_OOM_TEXT = re.compile(r"out of memory|can't allocate memory|CUBLAS_STATUS_ALLOC_FAILED", re.I)


def is_oom_error(exc: BaseException) -> bool:
    """Return True when `exc` is an out-of-memory error (CUDA OOM, CPU allocation failure or a budget overrun)."""
    if not isinstance(exc, BaseException):
        raise TypeError(f"exc phải là một exception, không phải {type(exc).__name__}")
    return isinstance(exc, OOM_ERRORS) or (isinstance(exc, RuntimeError) and bool(_OOM_TEXT.search(str(exc))))


@dataclass(frozen=True)
class OomMessage:
    """The fields of a CUDA out-of-memory message (bytes, as rounded in the message; None if absent)."""

    tried_to_allocate: int
    gpu: int | None = None
    total_capacity: int | None = None
    free: int | None = None
    this_process: int | None = None
    other_processes: tuple[tuple[int, int], ...] = ()
    allowed: int | None = None
    allocated_by_pytorch: int | None = None
    reserved_unallocated: int | None = None
    private_pools: int | None = None

    def explain(self) -> str:
        """Return the message read field by field, with what each means and what it suggests."""
        gpu = self.gpu if self.gpu is not None else "?"
        out = [text.format(format_bytes(value), gpu=gpu) for value, text in (
            (self.tried_to_allocate, "• Tried to allocate {}: kích thước MỘT yêu cầu cấp phát bị từ chối (thường là "
                                     "một tensor), không phải tổng bộ nhớ còn thiếu."),
            (self.total_capacity, "• GPU {gpu} có tổng {}: dung lượng driver báo (ít hơn số in trên hộp một chút)."),
            (self.free, "• {} còn trống theo driver, tính trên cả GPU (mọi tiến trình)."),
            (self.this_process, "• Tiến trình này dùng {} (gồm cả bộ nhớ ngoài PyTorch: CUDA context, thư viện)."),
        ) if value is not None]
        out += [f"• Tiến trình {pid} dùng {format_bytes(used)}: có thể là tiến trình khác (notebook khác, worker) "
                "đang chiếm GPU." for pid, used in self.other_processes]
        out += [text.format(format_bytes(value)) for value, text in (
            (self.allowed, "• {} allowed: tiến trình đang bị giới hạn bởi set_per_process_memory_fraction."),
            (self.allocated_by_pytorch, "• {} allocated by PyTorch: tensor đang sống (= torch.cuda.memory_allocated())."),
            (self.private_pools, "• {} allocated in private pools: phần của số trên nằm trong các vùng riêng (CUDA "
                                 "Graphs, torch.compile mode='reduce-overhead'), không dùng chung được."),
            (self.reserved_unallocated, "• {} reserved but unallocated: cache PyTorch giữ mà không dùng được cho yêu "
                                        "cầu này (các mẩu rời rạc)."),
        ) if value is not None]
        out.append("Kết luận:")
        out += ["  " + line for line in self._verdict()]
        return "\n".join(out)

    def _verdict(self) -> list[str]:
        f = format_bytes
        lines = []
        capacity = self.allowed if self.allowed is not None else self.total_capacity
        if capacity is not None and self.tried_to_allocate > capacity:
            lines.append(f"Một tensor {f(self.tried_to_allocate)} lớn hơn cả {f(capacity)} được phép: dọn cache "
                         "vô ích, phải giảm chính tensor đó (batch, độ dài chuỗi, kích thước ảnh).")
        frag = self.reserved_unallocated
        if frag and frag >= self.tried_to_allocate:
            lines.append(f"Cache trống ({f(frag)}) ≥ yêu cầu mà vẫn lỗi: phân mảnh. Thử "
                         "PYTORCH_ALLOC_CONF=expandable_segments:True (tên cũ PYTORCH_CUDA_ALLOC_CONF).")
        others = sum(used for _, used in self.other_processes)
        if others and self.total_capacity and others > self.total_capacity / 4:
            lines.append(f"Tiến trình khác giữ {f(others)}: tắt chúng (vd notebook cũ) trước khi giảm batch.")
        if not lines:
            lines.append("Tensor đang sống chiếm gần hết chỗ: giảm batch, gradient accumulation, mixed "
                         "precision, checkpointing, sharding (theo thứ tự đó).")
        return lines


_NUM = r"([\d.]+ (?:bytes|B|KiB|MiB|GiB|TiB))"


def parse_oom_message(text: str) -> OomMessage:
    """Read a CUDA out-of-memory message (current and older format) into its fields, bytes rounded as printed."""
    if not isinstance(text, str):
        raise TypeError(f"text phải là chuỗi (vd str(exc)), không phải {type(text).__name__}")
    flat = " ".join(text.split())
    tried = re.search(r"Tried to allocate " + _NUM, flat)
    if "out of memory" not in flat.lower() or tried is None:
        raise ValueError("Đây không phải thông báo CUDA out of memory (thiếu 'out of memory' / "
                         "'Tried to allocate').")

    def size(pattern: str) -> int | None:
        match = re.search(pattern, flat)
        return parse_bytes(match.group(1)) if match else None

    gpu = re.search(r"GPU (\d+)", flat)
    common = {"tried_to_allocate": parse_bytes(tried.group(1)), "gpu": int(gpu.group(1)) if gpu else None}
    if re.search(r"\(GPU \d+; " + _NUM + " total capacity", flat):
        allocated = size(_NUM + " already allocated")
        reserved = size(_NUM + " reserved in total by PyTorch")
        return OomMessage(**common, total_capacity=size(_NUM + " total capacity"), free=size(_NUM + " free"),
                          allocated_by_pytorch=allocated,
                          reserved_unallocated=None if allocated is None or reserved is None else reserved - allocated)
    return OomMessage(
        **common,
        total_capacity=size(r"total capacity of " + _NUM),
        free=size(r"of which " + _NUM + " is free"),
        this_process=size(r"this process has " + _NUM + " memory in use"),
        other_processes=tuple((int(pid), parse_bytes(used)) for pid, used in
                              re.findall(r"Process (\d+) has " + _NUM + " memory in use", flat)),
        allowed=size(_NUM + " allowed;"),
        allocated_by_pytorch=size(_NUM + " is allocated by PyTorch"),
        reserved_unallocated=size(_NUM + " is reserved by PyTorch but unallocated"),
        private_pools=size(r"with " + _NUM + r" allocated in private pools"),
    )

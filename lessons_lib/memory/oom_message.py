"""Read a CUDA out-of-memory message field by field and explain what it suggests."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..i18n import tr
from ._bytes import format_bytes, parse_bytes


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
    old_format: bool = False

    @property
    def reserved_by_pytorch(self) -> int | None:
        """Return allocated + reserved-but-unallocated: all PyTorch holds (None if the message lacks them)."""
        if self.allocated_by_pytorch is None or self.reserved_unallocated is None:
            return None
        return self.allocated_by_pytorch + self.reserved_unallocated

    def explain(self) -> str:
        """Return the message read field by field, with what each means and what it suggests (Vietnamese)."""
        f = format_bytes
        out = [tr(f"• Tried to allocate {f(self.tried_to_allocate)}: kích thước MỘT yêu cầu cấp phát bị từ chối "
                  "(thường là một tensor), không phải tổng bộ nhớ còn thiếu.",
                  f"• Tried to allocate {f(self.tried_to_allocate)}: the size of ONE allocation request that "
                  "failed (usually one tensor), not the total shortfall.")]
        if self.total_capacity is not None:
            out.append(tr(f"• GPU {self.gpu if self.gpu is not None else '?'} có tổng {f(self.total_capacity)}: "
                          "dung lượng driver báo (ít hơn số in trên hộp một chút).",
                          f"• GPU {self.gpu if self.gpu is not None else '?'} has {f(self.total_capacity)} in "
                          "total: the capacity the driver reports (a bit under the box figure)."))
        if self.free is not None:
            out.append(tr(f"• {f(self.free)} còn trống theo driver, tính trên cả GPU (mọi tiến trình).",
                          f"• {f(self.free)} is free according to the driver, across the whole GPU (all processes)."))
        if self.this_process is not None:
            out.append(tr(f"• Tiến trình này dùng {f(self.this_process)} (gồm cả bộ nhớ ngoài PyTorch: "
                          "CUDA context, thư viện).",
                          f"• This process uses {f(self.this_process)} (including non-PyTorch memory: "
                          "the CUDA context, libraries)."))
        for pid, used in self.other_processes:
            out.append(tr(f"• Tiến trình {pid} dùng {f(used)}: có thể là tiến trình khác (notebook khác, "
                          "worker) đang chiếm GPU.",
                          f"• Process {pid} uses {f(used)}: possibly another process (another notebook, "
                          "a worker) holding the GPU."))
        if self.allowed is not None:
            out.append(tr(f"• {f(self.allowed)} allowed: tiến trình đang bị giới hạn bởi "
                          "set_per_process_memory_fraction.",
                          f"• {f(self.allowed)} allowed: the process is capped by set_per_process_memory_fraction."))
        if self.allocated_by_pytorch is not None:
            out.append(tr(f"• {f(self.allocated_by_pytorch)} allocated by PyTorch: tensor đang sống "
                          "(= torch.cuda.memory_allocated()).",
                          f"• {f(self.allocated_by_pytorch)} allocated by PyTorch: live tensors "
                          "(= torch.cuda.memory_allocated())."))
        if self.reserved_unallocated is not None:
            out.append(tr(f"• {f(self.reserved_unallocated)} reserved but unallocated: cache PyTorch giữ mà "
                          "không dùng được cho yêu cầu này (các mẩu rời rạc).",
                          f"• {f(self.reserved_unallocated)} reserved but unallocated: cache PyTorch holds but "
                          "could not use for this request (scattered pieces)."))
        out.append(tr("Kết luận:", "Verdict:"))
        out += ["  " + line for line in self._verdict()]
        return "\n".join(out)

    def _verdict(self) -> list[str]:
        f = format_bytes
        lines = []
        capacity = self.allowed if self.allowed is not None else self.total_capacity
        if capacity is not None and self.tried_to_allocate > capacity:
            lines.append(tr(f"Một tensor {f(self.tried_to_allocate)} lớn hơn cả {f(capacity)} được phép: dọn cache "
                            "vô ích, phải giảm chính tensor đó (batch, độ dài chuỗi, kích thước ảnh).",
                            f"One {f(self.tried_to_allocate)} tensor is larger than the {f(capacity)} allowed: "
                            "freeing cache cannot help; shrink that tensor (batch, sequence length, image size)."))
        frag = self.reserved_unallocated
        if frag is not None and frag >= max(self.tried_to_allocate, 1) and frag > 0:
            lines.append(tr(f"Cache trống ({f(frag)}) ≥ yêu cầu mà vẫn lỗi: phân mảnh. Thử "
                            "PYTORCH_ALLOC_CONF=expandable_segments:True (tên cũ PYTORCH_CUDA_ALLOC_CONF).",
                            f"Empty cache ({f(frag)}) >= the request and it still failed: fragmentation. Try "
                            "PYTORCH_ALLOC_CONF=expandable_segments:True (old name PYTORCH_CUDA_ALLOC_CONF)."))
        others = sum(used for _, used in self.other_processes)
        if others and self.total_capacity and others > self.total_capacity / 4:
            lines.append(tr(f"Tiến trình khác giữ {f(others)}: tắt chúng (vd notebook cũ) trước khi giảm batch.",
                            f"Other processes hold {f(others)}: stop them (e.g. an old notebook) before "
                            "shrinking the batch."))
        if not lines:
            lines.append(tr("Tensor đang sống chiếm gần hết chỗ: giảm batch, gradient accumulation, mixed "
                            "precision, checkpointing, sharding (theo thứ tự đó).",
                            "Live tensors fill the memory: smaller batch, gradient accumulation, mixed "
                            "precision, checkpointing, sharding (in that order)."))
        return lines


_NUM = r"([\d.]+ (?:bytes|B|KiB|MiB|GiB|TiB))"


def parse_oom_message(text: str) -> OomMessage:
    """Read a CUDA out-of-memory message (current format, and the older one) into its fields.

    The current format is built in ``c10/cuda/CUDACachingAllocator.cpp`` (PyTorch source); sizes in it
    are rounded to 2 decimals, so the parsed bytes are approximate.

    Raises:
        TypeError: `text` is not a str (pass ``str(exc)``).
        ValueError: `text` is not a CUDA OOM message.
    """
    if not isinstance(text, str):
        raise TypeError(tr(f"text phải là chuỗi (vd str(exc)), không phải {type(text).__name__}",
                           f"text must be a string (e.g. str(exc)), not {type(text).__name__}"))
    flat = " ".join(text.split())
    tried = re.search(r"Tried to allocate " + _NUM, flat)
    if "out of memory" not in flat.lower() or tried is None:
        raise ValueError(tr("Đây không phải thông báo CUDA out of memory (thiếu 'out of memory' / "
                            "'Tried to allocate').",
                            "This is not a CUDA out-of-memory message (no 'out of memory' / 'Tried to allocate')."))

    def size(pattern: str) -> int | None:
        match = re.search(pattern, flat)
        return parse_bytes(match.group(1)) if match else None

    gpu = re.search(r"GPU (\d+)", flat)
    old = re.search(r"\(GPU \d+; " + _NUM + " total capacity", flat) is not None
    if old:
        allocated = size(_NUM + " already allocated")
        reserved = size(_NUM + " reserved in total by PyTorch")
        return OomMessage(
            tried_to_allocate=parse_bytes(tried.group(1)),
            gpu=int(gpu.group(1)) if gpu else None,
            total_capacity=size(_NUM + " total capacity"),
            free=size(_NUM + " free"),
            allocated_by_pytorch=allocated,
            reserved_unallocated=None if allocated is None or reserved is None else reserved - allocated,
            old_format=True,
        )
    others = tuple((int(pid), parse_bytes(used)) for pid, used in
                   re.findall(r"Process (\d+) has " + _NUM + " memory in use", flat))
    return OomMessage(
        tried_to_allocate=parse_bytes(tried.group(1)),
        gpu=int(gpu.group(1)) if gpu else None,
        total_capacity=size(r"total capacity of " + _NUM),
        free=size(r"of which " + _NUM + " is free"),
        this_process=size(r"this process has " + _NUM + " memory in use"),
        other_processes=others,
        allowed=size(_NUM + " allowed;"),
        allocated_by_pytorch=size(_NUM + " is allocated by PyTorch"),
        reserved_unallocated=size(_NUM + " is reserved by PyTorch but unallocated"),
    )

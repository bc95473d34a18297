"""Decide whether a notebook cell marked `%%gpu` (or `%%gpu N`) can run on this machine."""

from __future__ import annotations

import re

from .platforms import how_to_get_gpu

SKIP_MARK = "⏭️"  # first characters of the notice a skipped cell prints (what the website build looks for)
_MARKER_LINE = re.compile(r"^%%gpu(?:\s+(\d+))?\s*(?:#.*)?$")


def required_gpus(source: str) -> int | None:
    """Return how many CUDA GPUs a cell needs (1 for `%%gpu`, N for `%%gpu N`), or None if unmarked."""
    if not isinstance(source, str):
        raise TypeError(f"source phải là mã nguồn của ô (str), không phải {type(source).__name__}")
    first = source.lstrip("\n").split("\n", 1)[0].strip()
    if not first.startswith("%%gpu"):
        return None
    match = _MARKER_LINE.match(first)
    if match is None or int(match.group(1) or 1) < 1:
        raise ValueError(f"Dấu ô GPU phải là '%%gpu' hoặc '%%gpu N' (N ≥ 1: số GPU tối thiểu), nhận được {first!r}")
    return int(match.group(1) or 1)


def cuda_gpu_count() -> int:
    """Return how many CUDA GPUs PyTorch can use here (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def missing_hardware(needed: int, available: int) -> str | None:
    """Return the one-line notice for a cell that needs `needed` GPUs where `available` exist, or None if it can run."""
    if available >= needed:
        return None
    if needed == 1:
        what = "ô cần GPU CUDA, máy này không có."
    elif available == 0:
        what = f"ô cần ít nhất {needed} GPU CUDA, máy này không có GPU nào."
    else:
        what = f"ô cần ít nhất {needed} GPU CUDA, máy này chỉ có {available}."
    return f"{SKIP_MARK} Bỏ qua ô này: {what} {how_to_get_gpu(needed)}"


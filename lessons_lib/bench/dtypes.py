"""Resolve float32 / float16 / bfloat16 from a torch dtype or a short name like "fp16"."""

from __future__ import annotations

import torch

from ..i18n import tr

_DTYPES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
}
_SHORT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def resolve_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """Return the torch dtype for float32 / float16 / bfloat16, given as a torch dtype or a name like "fp16"."""
    if isinstance(dtype, torch.dtype):
        if dtype in _SHORT:
            return dtype
        raise ValueError(
            tr(f"dtype phải là torch.float32, torch.float16 hoặc torch.bfloat16, không phải {dtype}",
               f"dtype must be torch.float32, torch.float16 or torch.bfloat16, not {dtype}")
        )
    if isinstance(dtype, str):
        key = dtype.strip().lower().removeprefix("torch.")
        if key in _DTYPES:
            return _DTYPES[key]
        raise ValueError(
            tr(f"Không biết dtype {dtype!r}; dùng 'float32', 'float16' hoặc 'bfloat16' (hoặc 'fp32', 'fp16', 'bf16').",
               f"Unknown dtype {dtype!r}; use 'float32', 'float16' or 'bfloat16' (or 'fp32', 'fp16', 'bf16').")
        )
    raise TypeError(
        tr(f"dtype phải là torch.dtype hoặc tên dạng str như 'fp16', không phải {type(dtype).__name__}",
           f"dtype must be a torch.dtype or a name such as 'fp16', not {type(dtype).__name__}")
    )


def dtype_label(dtype: torch.dtype | str) -> str:
    """Return the short name of a dtype: "fp32", "fp16" or "bf16"."""
    return _SHORT[resolve_dtype(dtype)]

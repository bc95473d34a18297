"""The course's names for FP32, FP16 and BF16, and a plain-text table."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .display import Printable

# The course's short names; torch's names ("float16", "torch.float16") are accepted too.
FORMATS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
_ALIASES = {str(dtype).removeprefix("torch."): name for name, dtype in FORMATS.items()} | {n: n for n in FORMATS}


def format_name(dtype: str | torch.dtype) -> str:
    """Return "fp32", "fp16" or "bf16" for a torch dtype or a name such as "fp16" or "torch.bfloat16"."""
    if isinstance(dtype, torch.dtype):
        if dtype not in FORMATS.values():
            raise ValueError(f"dtype phải là torch.float32, torch.float16 hoặc torch.bfloat16, không phải {dtype}")
        dtype = str(dtype)
    elif not isinstance(dtype, str):
        raise TypeError(f"dtype phải là torch.dtype hoặc tên dạng str như 'fp16', "
                        f"không phải {type(dtype).__name__}")
    key = dtype.strip().lower().removeprefix("torch.")
    if key not in _ALIASES:
        raise ValueError(f"Không biết dtype {dtype!r}; dùng 'fp32', 'fp16' hoặc 'bf16' "
                         "(hoặc 'float32', 'float16', 'bfloat16').")
    return _ALIASES[key]


def to_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """Return float32 / float16 / bfloat16 given as a torch dtype or a name such as "fp16"."""
    return FORMATS[format_name(dtype)]


@dataclass(frozen=True, repr=False)
class Table(Printable):
    """Rows of strings with headers; prints as an aligned plain-text table."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def __str__(self) -> str:
        widths = [max([len(h), *(len(r[i]) for r in self.rows)]) for i, h in enumerate(self.headers)]
        lines = [self.headers, ["-" * w for w in widths], *self.rows]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                         for line in lines)

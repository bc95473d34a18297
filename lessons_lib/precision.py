"""Facts about FP32, FP16 and BF16 read from ``torch.finfo``, and what real casts do to a value."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

# The course's short names, in the order tables show them, and the other names accepted for each.
FORMATS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
_ALIASES = {"float32": "fp32", "float": "fp32", "single": "fp32", "float16": "fp16", "half": "fp16",
            "bfloat16": "bf16"} | {name: name for name in FORMATS}


def format_name(dtype: str | torch.dtype) -> str:
    """Return "fp32", "fp16" or "bf16" for a torch dtype or a name such as "half" or "torch.bfloat16"."""
    if isinstance(dtype, torch.dtype):
        for name, value in FORMATS.items():
            if value == dtype:
                return name
        raise ValueError(f"dtype phải là torch.float32, torch.float16 hoặc torch.bfloat16, "
                         f"không phải {dtype}")
    if not isinstance(dtype, str):
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


@dataclass(frozen=True)
class FormatFacts:
    """The bit layout and limits of one floating-point format, derived from ``torch.finfo``."""

    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int
    max: float
    smallest_normal: float
    smallest_subnormal: float
    eps: float

    @property
    def decimal_digits(self) -> float:
        """Return about how many significant decimal digits the format keeps (log10 of 1/eps)."""
        return -math.log10(self.eps)


def format_facts(dtype: str | torch.dtype) -> FormatFacts:
    """Return the facts of one format; eps = 2**-mantissa_bits and max ≈ 2**(2**(exponent_bits-1))."""
    name = format_name(dtype)
    info = torch.finfo(FORMATS[name])
    max_exponent = math.floor(math.log2(info.max))  # 2**(e-1) - 1 for an e-bit exponent
    smallest_normal = float(getattr(info, "smallest_normal", info.tiny))
    return FormatFacts(name=name, bits=info.bits, exponent_bits=round(math.log2(max_exponent + 1)) + 1,
                       mantissa_bits=round(-math.log2(info.eps)), max=float(info.max),
                       smallest_normal=smallest_normal, smallest_subnormal=smallest_normal * float(info.eps),
                       eps=float(info.eps))


@dataclass(frozen=True)
class Table:
    """Rows of strings with headers; prints as an aligned plain-text table."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def __str__(self) -> str:
        widths = [max([len(h), *(len(r[i]) for r in self.rows)]) for i, h in enumerate(self.headers)]
        lines = [self.headers, ["-" * w for w in widths], *self.rows]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
                         for line in lines)

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(str(self))


def facts_table() -> Table:
    """Return a table of bits, exponent/mantissa widths, range and precision for fp32, fp16 and bf16."""
    headers = ("định dạng", "tổng bit", "bit mũ", "bit định trị", "lớn nhất", "nhỏ nhất (chuẩn)",
               "nhỏ nhất (subnormal)", "eps", "chữ số thập phân")
    rows = tuple((f.name, str(f.bits), str(f.exponent_bits), str(f.mantissa_bits), f"{f.max:.5g}",
                  f"{f.smallest_normal:.4g}", f"{f.smallest_subnormal:.4g}", f"{f.eps:.4g}",
                  f"≈ {f.decimal_digits:.1f}") for f in map(format_facts, FORMATS))
    return Table(headers, rows)


def _round_trip(value: float, name: str) -> float:
    """Return what `value` becomes when stored in format `name` (a real cast through a tensor)."""
    return float(torch.tensor(float(value), dtype=torch.float64).to(FORMATS[name]).item())


def round_trip_table(values: Sequence[float]) -> Table:
    """Return a table of each value as stored in fp32, fp16 and bf16 (inf = overflow, 0 = underflow)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError("values phải là một list số, vd [70000, 1e-8].")
    if not values:
        raise ValueError("values không được rỗng, vd [70000, 1e-8].")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"values chỉ chứa số (int hoặc float), không phải {type(v).__name__}.")
    rows = [(f"{v:.8g}", *(f"{_round_trip(v, n):.8g}" for n in FORMATS)) for v in values]
    return Table(("giá trị", *FORMATS), tuple(rows))

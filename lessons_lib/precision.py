"""Facts about floating-point formats (FP32, FP16, BF16), read from ``torch.finfo``, and round-trip checks.

Every number here is computed by PyTorch on this machine: ``torch.finfo`` for the format limits, and real
casts (``tensor.to(dtype)``) for what happens to a value stored in a format.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .i18n import tr

# Short names used across the course, in the order tables show them.
FORMAT_NAMES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
_DTYPE_ALIASES = {
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "single": "fp32",
    "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "bf16": "bf16", "bfloat16": "bf16",
}


def format_name(dtype: str | torch.dtype) -> str:
    """Return the short course name ("fp32", "fp16" or "bf16") of a float format given as a string or dtype.

    Raises:
        TypeError: `dtype` is neither a str nor a torch.dtype.
        ValueError: `dtype` is not one of the three formats.
    """
    if isinstance(dtype, torch.dtype):
        for name, value in FORMAT_NAMES.items():
            if value == dtype:
                return name
        raise ValueError(
            tr(
                f"Chỉ hỗ trợ torch.float32, torch.float16, torch.bfloat16, không phải {dtype}.",
                f"Only torch.float32, torch.float16 and torch.bfloat16 are supported, not {dtype}.",
            )
        )
    if not isinstance(dtype, str):
        raise TypeError(
            tr(
                f"dtype phải là chuỗi như 'fp16' hoặc một torch.dtype, không phải {type(dtype).__name__}.",
                f"dtype must be a string such as 'fp16' or a torch.dtype, not {type(dtype).__name__}.",
            )
        )
    key = dtype.strip().lower().removeprefix("torch.")
    if key not in _DTYPE_ALIASES:
        raise ValueError(
            tr(
                f"Không hiểu định dạng {dtype!r}. Dùng 'fp32', 'fp16' hoặc 'bf16'.",
                f"Unknown format {dtype!r}. Use 'fp32', 'fp16' or 'bf16'.",
            )
        )
    return _DTYPE_ALIASES[key]


@dataclass(frozen=True)
class FormatFacts:
    """The bit layout and limits of one floating-point format, derived from ``torch.finfo``."""

    name: str
    dtype: torch.dtype
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

    @property
    def bytes(self) -> int:
        """Return the size of one element in bytes."""
        return self.bits // 8


def format_facts(dtype: str | torch.dtype) -> FormatFacts:
    """Return the facts of one format ("fp32", "fp16", "bf16" or the torch dtype).

    The exponent and mantissa widths follow from ``finfo``: ``eps = 2**-mantissa_bits`` and
    ``max ≈ 2**(2**(exponent_bits-1))``; the smallest subnormal is ``smallest_normal * eps``.
    """
    name = format_name(dtype)
    info = torch.finfo(FORMAT_NAMES[name])
    mantissa = round(-math.log2(info.eps))
    max_exponent = math.floor(math.log2(info.max))  # 2**(2**(e-1)) - 1 for an e-bit exponent
    exponent = round(math.log2(max_exponent + 1)) + 1
    smallest_normal = float(getattr(info, "smallest_normal", info.tiny))
    return FormatFacts(
        name=name,
        dtype=FORMAT_NAMES[name],
        bits=info.bits,
        exponent_bits=exponent,
        mantissa_bits=mantissa,
        max=float(info.max),
        smallest_normal=smallest_normal,
        smallest_subnormal=smallest_normal * float(info.eps),
        eps=float(info.eps),
    )


def _names(dtypes: Sequence[str | torch.dtype]) -> list[str]:
    if isinstance(dtypes, (str, torch.dtype)) or not isinstance(dtypes, Sequence):
        raise TypeError(
            tr(
                "dtypes phải là một list như ['fp32', 'fp16', 'bf16'].",
                "dtypes must be a list such as ['fp32', 'fp16', 'bf16'].",
            )
        )
    if not dtypes:
        raise ValueError(tr("dtypes không được rỗng.", "dtypes must not be empty."))
    return [format_name(d) for d in dtypes]


@dataclass(frozen=True)
class Table:
    """Rows of strings with headers; prints as an aligned plain-text table."""

    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def __str__(self) -> str:
        widths = [max(len(h), *(len(r[i]) for r in self.rows)) if self.rows else len(h)
                  for i, h in enumerate(self.headers)]
        line = "  ".join(h.ljust(w) for h, w in zip(self.headers, widths, strict=True))
        rule = "  ".join("-" * w for w in widths)
        body = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in self.rows]
        return "\n".join(text.rstrip() for text in [line, rule, *body])

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(str(self))


def facts_table(dtypes: Sequence[str | torch.dtype] = ("fp32", "fp16", "bf16")) -> Table:
    """Return a table of bits, exponent/mantissa widths, range and precision for each format."""
    headers = (
        tr("định dạng", "format"), tr("tổng bit", "bits"), tr("bit mũ", "exponent bits"),
        tr("bit định trị", "mantissa bits"),
        tr("lớn nhất", "max"), tr("nhỏ nhất (chuẩn)", "min normal"), tr("nhỏ nhất (subnormal)", "min subnormal"),
        "eps", tr("chữ số thập phân", "decimal digits"),
    )
    rows = []
    for name in _names(dtypes):
        f = format_facts(name)
        rows.append((name, str(f.bits), str(f.exponent_bits), str(f.mantissa_bits), f"{f.max:.5g}",
                     f"{f.smallest_normal:.4g}", f"{f.smallest_subnormal:.4g}", f"{f.eps:.4g}",
                     f"≈ {f.decimal_digits:.1f}"))
    return Table(headers, tuple(rows))


def round_trip(value: float, dtype: str | torch.dtype) -> float:
    """Return what `value` becomes when stored in `dtype` (a real cast through a tensor), as a Python float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            tr(
                f"value phải là số (int hoặc float), không phải {type(value).__name__}.",
                f"value must be a number (int or float), not {type(value).__name__}.",
            )
        )
    name = format_name(dtype)
    return float(torch.tensor(float(value), dtype=torch.float64).to(FORMAT_NAMES[name]).item())


def round_trip_table(values: Sequence[float], dtypes: Sequence[str | torch.dtype] = ("fp32", "fp16", "bf16")) -> Table:
    """Return a table of each value as stored in each format (inf = overflow, 0 = underflow)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(
            tr(
                "values phải là một list số, vd [70000, 1e-8].",
                "values must be a list of numbers, e.g. [70000, 1e-8].",
            )
        )
    if not values:
        raise ValueError(tr("values không được rỗng, vd [70000, 1e-8].", "values must not be empty, e.g. [70000, 1e-8]."))
    names = _names(dtypes)
    rows = [(f"{v:.8g}", *(f"{round_trip(v, n):.8g}" for n in names)) for v in values]
    return Table((tr("giá trị", "value"), *names), tuple(rows))

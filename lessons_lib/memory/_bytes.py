"""Format byte counts in binary units and read back sizes written as PyTorch prints them."""

from __future__ import annotations

import re

from ..i18n import tr
from ._checks import _check_int, _check_number

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def format_bytes(num_bytes: int | float, precision: int = 2) -> str:
    """Return a byte count in binary units, e.g. 1536 -> "1.50 KiB", 512 -> "512 B", -2**20 -> "-1.00 MiB".

    Args:
        num_bytes: Number of bytes (negative for a decrease).
        precision: Digits after the decimal point for KiB and larger.
    """
    _check_number("num_bytes", num_bytes)
    _check_int("precision", precision, 0)
    sign = "-" if num_bytes < 0 else ""
    value = float(abs(num_bytes))
    if value < 1024:
        return f"{sign}{value:.0f} B" if value == int(value) else f"{sign}{value:.{precision}f} B"
    unit = 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{sign}{value:.{precision}f} {_UNITS[unit]}"


_SIZE = re.compile(r"([\d.]+)\s*(bytes|B|KiB|MiB|GiB|TiB|PiB)\b")
_UNIT_BYTES = {"bytes": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}


def parse_bytes(text: str) -> int:
    """Return the bytes of a size written as PyTorch prints it, e.g. "2.00 GiB", "959.44 MiB", "0 bytes"."""
    if not isinstance(text, str):
        raise TypeError(tr(f"text phải là chuỗi như '2.00 GiB', không phải {type(text).__name__}",
                           f"text must be a string such as '2.00 GiB', not {type(text).__name__}"))
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(tr(f"Không đọc được kích thước {text!r}; dạng đúng: '2.00 GiB', '512 bytes'.",
                            f"Cannot read the size {text!r}; expected e.g. '2.00 GiB', '512 bytes'."))
    return round(float(match.group(1)) * _UNIT_BYTES[match.group(2)])

"""Check int and number arguments, raising TypeError / ValueError that say what to pass."""

from __future__ import annotations

import math


def check_int(name: str, value, minimum: int | None = None) -> int:
    """Return `value` if it is an int (not a bool) and at least `minimum`; else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} phải là số nguyên (int), không phải {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} phải ≥ {minimum}, nhận được {value}")
    return value


def check_number(name: str, value, minimum: float | None = None, *, positive: bool = False):
    """Return `value` if it is a finite int/float (> 0 when `positive`, ≥ `minimum` when given); else raise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} phải là một số (int hoặc float), không phải {type(value).__name__}")
    if not math.isfinite(value) or (positive and not value > 0):
        kind = "số dương hữu hạn" if positive else "số hữu hạn"
        raise ValueError(f"{name} phải là {kind}, nhận được {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} phải ≥ {minimum}, nhận được {value}")
    return value

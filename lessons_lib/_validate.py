"""Check int and number arguments, raising TypeError / ValueError with bilingual messages."""

from __future__ import annotations

import math

from .i18n import tr


def check_int(name: str, value, minimum: int | None = None) -> int:
    """Return `value` if it is an int (not a bool) and at least `minimum`; else raise saying what to pass."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            tr(f"{name} phải là số nguyên (int), không phải {type(value).__name__}",
               f"{name} must be an int, not {type(value).__name__}")
        )
    if minimum is not None and value < minimum:
        raise ValueError(tr(f"{name} phải ≥ {minimum}, nhận được {value}", f"{name} must be >= {minimum}, got {value}"))
    return value


def check_number(name: str, value, minimum: float | None = None, *, positive: bool = False):
    """Return `value` if it is a finite int/float (> 0 when `positive`, ≥ `minimum` when given); else raise.

    Args:
        name: The argument's name, used in the message.
        value: What the caller passed.
        minimum: Smallest allowed value, or None.
        positive: Also require value > 0.

    Returns:
        `value` unchanged.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            tr(f"{name} phải là một số (int hoặc float), không phải {type(value).__name__}",
               f"{name} must be a number (int or float), not {type(value).__name__}")
        )
    if not math.isfinite(value) or (positive and not value > 0):
        kind = tr("số dương hữu hạn", "a positive finite number") if positive else tr("số hữu hạn", "finite")
        raise ValueError(tr(f"{name} phải là {kind}, nhận được {value}", f"{name} must be {kind}, got {value}"))
    if minimum is not None and value < minimum:
        raise ValueError(tr(f"{name} phải ≥ {minimum}, nhận được {value}", f"{name} must be >= {minimum}, got {value}"))
    return value

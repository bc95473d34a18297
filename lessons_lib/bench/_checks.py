"""Check bench arguments, raising TypeError / ValueError with bilingual messages."""

from __future__ import annotations

import math

from ..i18n import tr


def _check_positive_int(name: str, value, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            tr(f"{name} phải là số nguyên (int), không phải {type(value).__name__}",
               f"{name} must be an int, not {type(value).__name__}")
        )
    if value < minimum:
        raise ValueError(
            tr(f"{name} phải ≥ {minimum}, nhận được {value}", f"{name} must be >= {minimum}, got {value}")
        )


def _check_positive_number(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            tr(f"{name} phải là một số (giây), không phải {type(value).__name__}",
               f"{name} must be a number (seconds), not {type(value).__name__}")
        )
    if not value > 0 or math.isinf(value):
        raise ValueError(
            tr(f"{name} phải là số dương hữu hạn, nhận được {value}",
               f"{name} must be a positive finite number, got {value}")
        )

"""Check bench arguments (positive ints and positive finite numbers) with the shared validators."""

from __future__ import annotations

from .._validate import check_int, check_number


def _check_positive_int(name: str, value, minimum: int = 1) -> None:
    check_int(name, value, minimum)


def _check_positive_number(name: str, value) -> None:
    check_number(name, value, positive=True)

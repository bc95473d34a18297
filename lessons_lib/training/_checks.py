"""Check the int, positive-number and float-dtype arguments of the training helpers."""

from __future__ import annotations

import math

import torch

from ..i18n import tr


def _check_int(name: str, value, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(
            tr(f"{name} phải là số nguyên, không phải {type(value).__name__}.",
               f"{name} must be an int, not {type(value).__name__}.")
        )
    if value < minimum:
        raise ValueError(tr(f"{name} phải ≥ {minimum}, nhận {value}.", f"{name} must be >= {minimum}, got {value}."))
    return value


def _check_positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            tr(f"{name} phải là số dương, không phải {type(value).__name__}.",
               f"{name} must be a positive number, not {type(value).__name__}.")
        )
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(tr(f"{name} phải là số dương hữu hạn, nhận {value}.",
                            f"{name} must be a finite positive number, got {value}."))
    return float(value)


def _check_float_dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(
            tr(f"dtype phải là một torch dtype số thực như torch.float32, không phải {dtype!r}.",
               f"dtype must be a floating torch dtype such as torch.float32, not {dtype!r}.")
        )
    return dtype

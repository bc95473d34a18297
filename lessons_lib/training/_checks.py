"""Check the int, positive-number and float-dtype arguments of the training helpers."""

from __future__ import annotations

import torch

from .._validate import check_int, check_number
from ..i18n import tr


def _check_int(name: str, value, minimum: int = 1) -> int:
    return check_int(name, value, minimum)


def _check_positive(name: str, value) -> float:
    return float(check_number(name, value, positive=True))


def _check_float_dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(
            tr(f"dtype phải là một torch dtype số thực như torch.float32, không phải {dtype!r}.",
               f"dtype must be a floating torch dtype such as torch.float32, not {dtype!r}.")
        )
    return dtype

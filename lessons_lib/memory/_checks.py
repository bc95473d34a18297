"""Check the memory helpers' arguments, raising TypeError / ValueError with bilingual messages."""

from __future__ import annotations

import math

import torch

from ..i18n import tr


def _check_int(name: str, value, minimum: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(
            tr(
                f"{name} phải là số nguyên (int), không phải {type(value).__name__}",
                f"{name} must be an int, not {type(value).__name__}",
            )
        )
    if minimum is not None and value < minimum:
        raise ValueError(tr(f"{name} phải ≥ {minimum}, nhận {value}", f"{name} must be >= {minimum}, got {value}"))
    return value


def _check_number(name: str, value, minimum: float | None = None) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(
            tr(
                f"{name} phải là một số (int hoặc float), không phải {type(value).__name__}",
                f"{name} must be a number (int or float), not {type(value).__name__}",
            )
        )
    if not math.isfinite(value):
        raise ValueError(tr(f"{name} phải là số hữu hạn, nhận {value}", f"{name} must be finite, got {value}"))
    if minimum is not None and value < minimum:
        raise ValueError(tr(f"{name} phải ≥ {minimum}, nhận {value}", f"{name} must be >= {minimum}, got {value}"))
    return value


def _check_module(model) -> torch.nn.Module:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            tr(
                f"model phải là một torch.nn.Module (vd nn.Linear(4, 2)), không phải {type(model).__name__}",
                f"model must be a torch.nn.Module (e.g. nn.Linear(4, 2)), not {type(model).__name__}",
            )
        )
    return model


def _check_optimizer(optimizer, allow_none: bool = True):
    if optimizer is None and allow_none:
        return None
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            tr(
                f"optimizer phải là một torch.optim.Optimizer (vd torch.optim.Adam(model.parameters())) "
                f"hoặc None, không phải {type(optimizer).__name__}",
                f"optimizer must be a torch.optim.Optimizer (e.g. torch.optim.Adam(model.parameters())) "
                f"or None, not {type(optimizer).__name__}",
            )
        )
    return optimizer

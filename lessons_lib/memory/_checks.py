"""Check the memory helpers' arguments, raising TypeError / ValueError with bilingual messages."""

from __future__ import annotations

import torch

from .._validate import check_int, check_number
from ..i18n import tr

_check_int = check_int
_check_number = check_number


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

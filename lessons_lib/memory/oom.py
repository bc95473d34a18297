"""Tell out-of-memory errors from other errors: the OOM exception types and `is_oom_error`."""

from __future__ import annotations

import re

import torch

from ..i18n import tr

#: The out-of-memory error of this PyTorch: ``torch.OutOfMemoryError`` in recent releases, only
#: ``torch.cuda.OutOfMemoryError`` in older ones (both name the same class where both exist).
TorchOutOfMemoryError: type[BaseException] = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


class MemoryBudgetExceeded(RuntimeError):
    """Raised by `oom_safe_train_step` when a step would need more bytes than its simulated budget.

    It stands in for a CUDA out-of-memory error on machines without a GPU, so `find_max_batch_size`
    and `train_with_oom_retry` can be shown (and tested) on a CPU. ``needed`` and ``budget`` are bytes.
    """

    def __init__(self, message: str, needed: int = 0, budget: int = 0):
        super().__init__(message)
        self.needed = needed
        self.budget = budget


#: What the helpers treat as "out of memory": a real CUDA OOM or a simulated budget overrun.
OOM_ERRORS: tuple[type[BaseException], ...] = (TorchOutOfMemoryError, MemoryBudgetExceeded)

_OOM_TEXT = re.compile(r"out of memory|can't allocate memory|CUBLAS_STATUS_ALLOC_FAILED", re.I)


def is_oom_error(exc: BaseException) -> bool:
    """Return True when `exc` is an out-of-memory error (CUDA OOM, CPU allocation failure or a budget overrun)."""
    if not isinstance(exc, BaseException):
        raise TypeError(
            tr(
                f"exc phải là một exception, không phải {type(exc).__name__}",
                f"exc must be an exception instance, not {type(exc).__name__}",
            )
        )
    if isinstance(exc, OOM_ERRORS):
        return True
    return isinstance(exc, RuntimeError) and bool(_OOM_TEXT.search(str(exc)))

"""Find the largest batch size that fits, halving (then optionally bisecting) on out-of-memory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..i18n import tr
from ._checks import _check_int
from .cuda import release_cached_memory
from .oom import is_oom_error


@dataclass
class BatchSizeSearch:
    """The result of `find_max_batch_size`: the batch size found and every attempt (size, fitted, note)."""

    batch_size: int | None
    attempts: list[tuple[int, bool, str]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"  {size:>6}: " + ("✅ " + tr("vừa", "fits") if ok else "❌ OOM") for size, ok, _ in self.attempts]
        found = (tr(f"Batch lớn nhất vừa: {self.batch_size}", f"Largest batch that fits: {self.batch_size}")
                 if self.batch_size is not None else tr("Không batch nào vừa.", "No batch size fits."))
        return "\n".join([*lines, found])


def find_max_batch_size(try_batch: Callable[[int], object], start: int, *, min_batch_size: int = 1,
                        refine: bool = False) -> BatchSizeSearch:
    """Find the largest batch size for which ``try_batch(size)`` does not run out of memory.

    Starts at `start` and halves after each out-of-memory error (``torch.OutOfMemoryError``, a CPU
    allocation failure, or `MemoryBudgetExceeded`); other errors propagate. With ``refine=True`` it then
    bisects between the last size that fitted and the first that did not (memory grows with batch size,
    so this finds the exact largest). Memory is released after each failure, outside the ``except``.

    Args:
        try_batch: Runs one step at a given batch size (e.g. a lambda around `oom_safe_train_step`).
        start: The first (largest) batch size to try.
        min_batch_size: Stop halving below this size.
        refine: Bisect between the halving result and the size above it.

    Returns:
        A `BatchSizeSearch` (``batch_size`` None when even `min_batch_size` does not fit).
    """
    if not callable(try_batch):
        raise TypeError(tr(f"try_batch phải là hàm nhận batch size, không phải {type(try_batch).__name__}",
                           f"try_batch must be a function taking a batch size, not {type(try_batch).__name__}"))
    _check_int("start", start, 1)
    _check_int("min_batch_size", min_batch_size, 1)
    if min_batch_size > start:
        raise ValueError(tr(f"min_batch_size ({min_batch_size}) phải ≤ start ({start})",
                            f"min_batch_size ({min_batch_size}) must be <= start ({start})"))
    if not isinstance(refine, bool):
        raise TypeError(tr("refine phải là True hoặc False", "refine must be True or False"))
    search = BatchSizeSearch(None)

    def fits(size: int) -> bool:
        message = None
        try:
            try_batch(size)
        except Exception as exc:  # noqa: BLE001 - only OOM is handled, the rest re-raised
            if not is_oom_error(exc):
                raise
            message = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        if message is not None:
            release_cached_memory()
        search.attempts.append((size, message is None, message or ""))
        return message is None

    size, failed_above = start, None
    while True:
        if fits(size):
            search.batch_size = size
            break
        failed_above = size
        if size // 2 < min_batch_size:
            return search
        size //= 2
    if refine and failed_above is not None:
        low, high = size, failed_above  # low fits, high does not
        while high - low > 1:
            middle = (low + high) // 2
            if fits(middle):
                low = middle
            else:
                high = middle
        search.batch_size = low
    return search

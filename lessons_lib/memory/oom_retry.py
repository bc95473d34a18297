"""Train without dying on out-of-memory: find the batch that fits, free and re-raise, retry with micro-batches."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from .._validate import check_int
from ..display import Printable
from .cuda import release_cached_memory
from .meter import SavedTensorMeter
from .oom import MemoryBudgetExceeded, is_oom_error
from .sizes import check_module, check_optimizer, format_bytes, trainable_bytes, training_state_sizes


@dataclass(repr=False)
class BatchSizeSearch(Printable):
    """The result of `find_max_batch_size`: the batch size found and every attempt (size, fitted)."""

    batch_size: int | None
    attempts: list[tuple[int, bool]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"  {size:>6}: " + ("✅ vừa" if ok else "❌ OOM") for size, ok in self.attempts]
        found = f"Batch lớn nhất vừa: {self.batch_size}" if self.batch_size is not None else "Không batch nào vừa."
        return "\n".join([*lines, found])


def find_max_batch_size(try_batch: Callable[[int], object], start: int, *, refine: bool = False) -> BatchSizeSearch:
    """Find the largest batch size for which ``try_batch(size)`` does not run out of memory."""
    if not callable(try_batch):
        raise TypeError(f"try_batch phải là hàm nhận batch size, không phải {type(try_batch).__name__}")
    check_int("start", start, 1)
    if not isinstance(refine, bool):
        raise TypeError("refine phải là True hoặc False")
    search = BatchSizeSearch(None)

    def fits(size: int) -> bool:
        ok = True
        try:
            try_batch(size)
        except Exception as exc:  # noqa: BLE001 - only OOM is handled, the rest re-raised
            if not is_oom_error(exc):
                raise
            ok = False
        if not ok:
            release_cached_memory()  # outside the except block: the traceback no longer holds the tensors
        search.attempts.append((size, ok))
        return ok

    size, failed_above = start, None
    while not fits(size):
        failed_above = size
        if size == 1:
            return search
        size //= 2
    low = size
    if refine and failed_above is not None:
        high = failed_above  # low fits, high does not
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if fits(middle) else (low, middle)
    search.batch_size = low
    return search


def _zero(model: torch.nn.Module, optimizer) -> None:
    if optimizer is not None:
        optimizer.zero_grad(set_to_none=True)
    model.zero_grad(set_to_none=True)


def _check_step_args(model, loss_fn, x, y, optimizer) -> None:
    check_module(model)
    check_optimizer(optimizer)
    if not callable(loss_fn):
        raise TypeError(f"loss_fn phải gọi được (vd nn.CrossEntropyLoss()), không phải {type(loss_fn).__name__}")
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError("x và y phải là tensor (một batch đầu vào và nhãn).")
    if len(x) == 0 or len(y) != len(x):
        raise ValueError(f"x và y phải có cùng số mẫu > 0, nhận {len(x)} và {len(y)}")


def oom_safe_train_step(model: torch.nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor,
                        optimizer: torch.optim.Optimizer | None = None, *, budget_bytes: int | None = None) -> float:
    """Run one training step; on out-of-memory, free the gradients and the cache, then re-raise."""
    _check_step_args(model, loss_fn, x, y, optimizer)
    if budget_bytes is not None:
        check_int("budget_bytes", budget_bytes, 1)
    return _safe_step(model, loss_fn, x, y, optimizer, len(x), budget_bytes)


def _safe_step(model, loss_fn, x, y, optimizer, micro: int, budget_bytes: int | None) -> float:
    device = next(model.parameters(), torch.empty(0)).device
    n = len(x)
    _zero(model, optimizer)
    fixed = 0
    if budget_bytes is not None:
        state = training_state_sizes(model, optimizer)
        fixed = state.params + state.buffers + trainable_bytes(model) + state.optimizer
    loss = meter = xb = yb = None
    try:
        total = 0.0
        for start in range(0, n, micro):
            # a fresh copy, like a DataLoader batch: a slice would keep (and be charged for) all of x
            xb = x[start:start + micro].to(device, copy=True)
            yb = y[start:start + micro].to(device, copy=True)
            if budget_bytes is None:
                loss = loss_fn(model(xb), yb)
            else:
                with SavedTensorMeter(exclude=model) as meter:
                    loss = loss_fn(model(xb), yb)
                needed = fixed + meter.live_bytes
                if needed > budget_bytes:
                    raise MemoryBudgetExceeded(
                        f"Hết bộ nhớ (out of memory, mô phỏng): micro-batch {len(xb)} cần {format_bytes(needed)} "
                        f"(trạng thái {format_bytes(fixed)} + activation {format_bytes(meter.live_bytes)}) "
                        f"> ngân sách {format_bytes(budget_bytes)}.")
            (loss * (len(xb) / n)).backward()
            total += loss.item() * len(xb)
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return total / n
    except Exception as exc:  # noqa: BLE001 - only out-of-memory errors are handled, the rest re-raised
        if not is_oom_error(exc):
            raise
        loss = meter = xb = yb = None  # drop this frame's references to the graph
        _zero(model, optimizer)
        release_cached_memory()
        raise  # the caller lowers the batch and retries (after leaving its except block)


@dataclass(repr=False)
class RetryLog(Printable):
    """What `train_with_oom_retry` did: each step's loss and micro-batch, and each OOM (step from 0, size, message)."""

    batch_size: int
    losses: list[float] = field(default_factory=list)
    micro_batch_sizes: list[int] = field(default_factory=list)
    oom_events: list[tuple[int, int, str]] = field(default_factory=list)

    def __str__(self) -> str:
        last = self.micro_batch_sizes[-1] if self.micro_batch_sizes else "-"
        lines = [f"{len(self.losses)} bước, batch hiệu dụng {self.batch_size}; micro-batch cuối {last}; "
                 f"{len(self.oom_events)} lần OOM."]
        for step, micro, message in self.oom_events:
            lines.append(f"  bước {step + 1}: OOM với micro-batch {micro} → thử lại với {max(1, micro // 2)}")
            lines.append("    " + (message.splitlines() or [""])[0][:160])
        return "\n".join(lines)


def train_with_oom_retry(model: torch.nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor,
                         optimizer: torch.optim.Optimizer, *, batch_size: int,
                         budget_bytes: int | None = None) -> RetryLog:
    """Train one pass over (x, y); when a step runs out of memory, halve the micro-batch and redo that batch."""
    _check_step_args(model, loss_fn, x, y, optimizer)
    check_optimizer(optimizer, allow_none=False)
    check_int("batch_size", batch_size, 1)
    if budget_bytes is not None:
        check_int("budget_bytes", budget_bytes, 1)
    log = RetryLog(batch_size)
    micro = batch_size
    for step, start in enumerate(range(0, len(x), batch_size)):
        xb, yb = x[start:start + batch_size], y[start:start + batch_size]
        while True:
            try:
                loss = _safe_step(model, loss_fn, xb, yb, optimizer, micro, budget_bytes)
                break
            except Exception as exc:  # noqa: BLE001 - only out-of-memory errors are handled
                if not is_oom_error(exc) or micro == 1:
                    raise
                message = str(exc)
            release_cached_memory()  # outside the except block: the failed step's tensors are gone now
            log.oom_events.append((step, micro, message))
            micro //= 2
        log.losses.append(loss)
        log.micro_batch_sizes.append(micro)
    return log

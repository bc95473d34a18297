"""Train without dying on out-of-memory: free and re-raise, then retry with smaller micro-batches."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ..i18n import tr
from ._bytes import format_bytes
from ._checks import _check_int, _check_module, _check_optimizer
from .cuda import release_cached_memory
from .meter import SavedTensorMeter
from .oom import MemoryBudgetExceeded, is_oom_error
from .sizes import trainable_bytes, training_state_sizes


def _model_device(model: torch.nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _zero(model: torch.nn.Module, optimizer) -> None:
    if optimizer is not None:
        optimizer.zero_grad(set_to_none=True)
    model.zero_grad(set_to_none=True)


def oom_safe_train_step(model: torch.nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor,
                        optimizer: torch.optim.Optimizer | None = None, *, micro_batch_size: int | None = None,
                        budget_bytes: int | None = None) -> float:
    """Run one training step; on out-of-memory, free the gradients and the cache, then re-raise.

    The seed's ``train_step`` pattern: ``try`` forward / backward / step / zero_grad; ``except`` OOM:
    ``zero_grad``, ``empty_cache``, ``raise`` so the caller can lower the batch. Extras:

    - ``micro_batch_size``: split the batch and accumulate gradients (each chunk's mean loss is weighted
      by its share of the batch), so the gradients equal the full-batch ones for a mean-reduced loss.
    - ``budget_bytes``: simulate a GPU of that size on any device. After each micro-batch's forward,
      params + buffers + gradients (as after backward) + current optimizer state + saved activations
      (measured with `SavedTensorMeter`) are compared with the budget; over it raises
      `MemoryBudgetExceeded`. The optimizer state counts as 0 before its first step.

    With ``optimizer=None`` no step is taken and the gradients are left in ``.grad`` (to compare them).

    Returns:
        The mean loss over the batch (a float: no graph is kept).
    """
    _check_module(model)
    _check_optimizer(optimizer)
    if not callable(loss_fn):
        raise TypeError(tr(f"loss_fn phải gọi được (vd nn.CrossEntropyLoss()), không phải {type(loss_fn).__name__}",
                           f"loss_fn must be callable (e.g. nn.CrossEntropyLoss()), not {type(loss_fn).__name__}"))
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError(tr("x và y phải là tensor (một batch đầu vào và nhãn).",
                           "x and y must be tensors (a batch of inputs and targets)."))
    n = len(x)
    if n == 0 or len(y) != n:
        raise ValueError(tr(f"x và y phải có cùng số mẫu > 0, nhận {n} và {len(y)}",
                            f"x and y must hold the same number (> 0) of samples, got {n} and {len(y)}"))
    micro = n if micro_batch_size is None else _check_int("micro_batch_size", micro_batch_size, 1)
    if budget_bytes is not None:
        _check_int("budget_bytes", budget_bytes, 1)
    device = _model_device(model)
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
                        tr(f"Hết bộ nhớ (out of memory, mô phỏng): micro-batch {len(xb)} cần {format_bytes(needed)} "
                           f"(trạng thái {format_bytes(fixed)} + activation {format_bytes(meter.live_bytes)}) "
                           f"> ngân sách {format_bytes(budget_bytes)}.",
                           f"Out of memory (simulated): micro-batch {len(xb)} needs {format_bytes(needed)} "
                           f"(state {format_bytes(fixed)} + activations {format_bytes(meter.live_bytes)}) "
                           f"> budget {format_bytes(budget_bytes)}."),
                        needed=needed, budget=budget_bytes)
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


@dataclass
class RetryLog:
    """What `train_with_oom_retry` did: the loss of each step, its micro-batch size, and each OOM.

    ``oom_events`` holds (step index from 0, micro-batch size, message); the printed log counts steps from 1.
    """

    batch_size: int
    losses: list[float] = field(default_factory=list)
    micro_batch_sizes: list[int] = field(default_factory=list)
    oom_events: list[tuple[int, int, str]] = field(default_factory=list)  # (step, micro-batch size, message)

    def __str__(self) -> str:
        lines = [tr(f"{len(self.losses)} bước, batch hiệu dụng {self.batch_size}; micro-batch cuối "
                    f"{self.micro_batch_sizes[-1] if self.micro_batch_sizes else '-'}; {len(self.oom_events)} lần OOM.",
                    f"{len(self.losses)} steps, effective batch {self.batch_size}; last micro-batch "
                    f"{self.micro_batch_sizes[-1] if self.micro_batch_sizes else '-'}; {len(self.oom_events)} OOM(s).")]
        for step, micro, message in self.oom_events:
            lines.append(tr(f"  bước {step + 1}: OOM với micro-batch {micro} → thử lại với {max(1, micro // 2)}",
                            f"  step {step + 1}: OOM at micro-batch {micro} → retry with {max(1, micro // 2)}"))
            lines.append("    " + (message.splitlines() or [""])[0][:160])
        return "\n".join(lines)


def train_with_oom_retry(model: torch.nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor,
                         optimizer: torch.optim.Optimizer, *, batch_size: int, min_micro_batch_size: int = 1,
                         budget_bytes: int | None = None) -> RetryLog:
    """Train one pass over (x, y); when a step runs out of memory, halve the micro-batch and retry it.

    The effective batch stays `batch_size`: after an OOM the same batch is redone as smaller micro-batches
    with gradient accumulation, and later steps keep the smaller micro-batch. Memory is released after
    leaving the ``except`` block. Gives up (re-raises) when even `min_micro_batch_size` does not fit.
    ``budget_bytes`` simulates a GPU of that size (see `oom_safe_train_step`).
    """
    _check_optimizer(optimizer, allow_none=False)
    _check_int("batch_size", batch_size, 1)
    _check_int("min_micro_batch_size", min_micro_batch_size, 1)
    if min_micro_batch_size > batch_size:
        raise ValueError(tr(f"min_micro_batch_size ({min_micro_batch_size}) phải ≤ batch_size ({batch_size})",
                            f"min_micro_batch_size ({min_micro_batch_size}) must be <= batch_size ({batch_size})"))
    log = RetryLog(batch_size)
    micro = batch_size
    for step, start in enumerate(range(0, len(x), batch_size)):
        xb, yb = x[start:start + batch_size], y[start:start + batch_size]
        while True:
            message = None
            try:
                loss = oom_safe_train_step(model, loss_fn, xb, yb, optimizer, micro_batch_size=micro,
                                           budget_bytes=budget_bytes)
            except Exception as exc:  # noqa: BLE001 - only out-of-memory errors are handled
                if not is_oom_error(exc) or micro <= min_micro_batch_size:
                    raise
                message = str(exc)
            if message is None:
                break
            release_cached_memory()  # outside the except block: the failed step's tensors are gone now
            log.oom_events.append((step, micro, message))
            micro = max(min_micro_batch_size, micro // 2)
        log.losses.append(loss)
        log.micro_batch_sizes.append(micro)
    return log

"""Count the bytes of parameters, gradients and optimizer state, measured or per GPU under ZeRO sharding."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..i18n import tr
from ._bytes import format_bytes
from ._checks import _check_int, _check_module, _check_number, _check_optimizer
from ._storage import _storage_key_and_bytes, _unique_bytes

_COMPONENTS = ("params", "grads", "optimizer", "activations")


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Return the bytes the optimizer's state really holds, by state name (e.g. {"exp_avg": ..., "step": ...}).

    Empty for SGD without momentum; ``momentum_buffer`` for SGD with momentum; ``exp_avg``,
    ``exp_avg_sq`` and the tiny ``step`` counters for Adam. State appears only after the first
    ``optimizer.step()``. Tensors sharing memory are counted once.
    """
    _check_optimizer(optimizer, allow_none=False)
    by_key: dict[str, dict[object, int]] = {}
    for state in optimizer.state.values():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                storage_key, nbytes = _storage_key_and_bytes(value)
                by_key.setdefault(str(key), {})[storage_key] = nbytes
    return {key: sum(seen.values()) for key, seen in by_key.items()}


@dataclass(frozen=True)
class StateSizes:
    """Bytes of a model's training state, counted from the real tensors (see `training_state_sizes`)."""

    params: int
    grads: int
    optimizer: int
    buffers: int = 0
    optimizer_by_key: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Return params + buffers + grads + optimizer state, in bytes."""
        return self.params + self.buffers + self.grads + self.optimizer

    def breakdown(self, activations: int = 0) -> dict[str, int]:
        """Return {"params", "grads", "optimizer", "activations"} in bytes (buffers added to params)."""
        _check_int("activations", activations, 0)
        return {"params": self.params + self.buffers, "grads": self.grads, "optimizer": self.optimizer,
                "activations": activations}

    def __str__(self) -> str:
        keys = ", ".join(f"{k} {format_bytes(v)}" for k, v in self.optimizer_by_key.items())
        opt = format_bytes(self.optimizer) + (f" ({keys})" if keys else "")
        parts = [tr("tham số ", "params ") + format_bytes(self.params)]
        if self.buffers:
            parts.append("buffer " + format_bytes(self.buffers))
        parts += ["gradient " + format_bytes(self.grads), "optimizer " + opt,
                  tr("tổng ", "total ") + format_bytes(self.total)]
        return " · ".join(parts)


def training_state_sizes(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> StateSizes:
    """Return the exact bytes of `model`'s parameters, buffers and gradients and of `optimizer`'s state.

    Counted from the tensors that exist now: gradients appear after ``backward()`` (and vanish with
    ``zero_grad(set_to_none=True)``), optimizer state after the first ``optimizer.step()``. Works on
    every device, including ``meta`` (sizes without memory).
    """
    _check_module(model)
    _check_optimizer(optimizer)
    params = list(model.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    by_key = optimizer_state_bytes(optimizer) if optimizer is not None else {}
    optimizer_total = _unique_bytes(
        v for state in (optimizer.state.values() if optimizer is not None else ())
        for v in state.values() if isinstance(v, torch.Tensor)
    )
    return StateSizes(
        params=_unique_bytes(params),
        grads=_unique_bytes(grads),
        optimizer=optimizer_total,
        buffers=_unique_bytes(model.buffers()),
        optimizer_by_key=by_key,
    )


def trainable_bytes(model: torch.nn.Module) -> int:
    """Return the bytes of the parameters that require grad: what their gradients will occupy."""
    _check_module(model)
    return _unique_bytes(p for p in model.parameters() if p.requires_grad)


# --------------------------------------------------------------------------- sharding arithmetic

_STAGE_NAMES = {0: "DDP (không shard)", 1: "ZeRO-1 (shard optimizer)", 2: "ZeRO-2 (+ gradient)",
                3: "ZeRO-3 / FSDP full shard (+ tham số)"}
_STAGE_NAMES_EN = {0: "DDP (no sharding)", 1: "ZeRO-1 (shard optimizer)", 2: "ZeRO-2 (+ gradients)",
                   3: "ZeRO-3 / FSDP full shard (+ params)"}


@dataclass(frozen=True)
class ShardedMemory:
    """Per-GPU bytes of the model state (params, grads, optimizer) under one sharding stage."""

    num_params: int
    num_gpus: int
    stage: int
    params: int
    grads: int
    optimizer: int

    @property
    def total(self) -> int:
        """Return params + grads + optimizer bytes on each GPU (activations and buffers not included)."""
        return self.params + self.grads + self.optimizer

    @property
    def name(self) -> str:
        """Return the stage's name, e.g. "ZeRO-2 (+ gradient)"."""
        return tr(_STAGE_NAMES[self.stage], _STAGE_NAMES_EN[self.stage])

    def __str__(self) -> str:
        gb = 1e9
        return tr(f"{self.name:<38} {self.num_gpus} GPU: mỗi GPU {self.total / gb:8.2f} GB "
                  f"(tham số {self.params / gb:.2f} + gradient {self.grads / gb:.2f} + optimizer {self.optimizer / gb:.2f})",
                  f"{self.name:<38} {self.num_gpus} GPU(s): per GPU {self.total / gb:8.2f} GB "
                  f"(params {self.params / gb:.2f} + grads {self.grads / gb:.2f} + optimizer {self.optimizer / gb:.2f})")


def sharded_training_memory(num_params: int, num_gpus: int = 1, stage: int = 0, *, param_bytes: float = 2,
                            grad_bytes: float = 2, optimizer_bytes: float = 12) -> ShardedMemory:
    """Return the per-GPU bytes of parameters, gradients and optimizer state under DDP or ZeRO stage 1/2/3.

    The defaults are the ZeRO paper's accounting for mixed-precision Adam (Rajbhandari et al., 2020,
    "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", section 3.1): fp16 parameters
    (2 bytes) + fp16 gradients (2) + optimizer state K = 12 bytes (fp32 master copy, momentum, variance),
    16 bytes per parameter in all. Stage 0 (DDP) replicates everything; stage 1 shards the optimizer state
    over `num_gpus`, stage 2 also the gradients, stage 3 also the parameters (PyTorch FSDP's full
    sharding; FSDP's SHARD_GRAD_OP is like stage 2). A shard is ``ceil(num_params / num_gpus)`` parameters.
    Activations, buffers, temporary all-gather buffers and fragmentation are not included.

    Args:
        num_params: Number of model parameters (e.g. 7_000_000_000).
        num_gpus: Data-parallel GPUs sharing the state.
        stage: 0 (DDP), 1, 2 or 3 (ZeRO stage).
        param_bytes, grad_bytes, optimizer_bytes: Bytes per parameter of each part (fp32 Adam
            without mixed precision: 4, 4, 8).
    """
    _check_int("num_params", num_params, 0)
    _check_int("num_gpus", num_gpus, 1)
    _check_int("stage", stage, 0)
    if stage > 3:
        raise ValueError(tr(f"stage phải là 0 (DDP), 1, 2 hoặc 3 (ZeRO), nhận {stage}",
                            f"stage must be 0 (DDP), 1, 2 or 3 (ZeRO), got {stage}"))
    for name, value in (("param_bytes", param_bytes), ("grad_bytes", grad_bytes),
                        ("optimizer_bytes", optimizer_bytes)):
        _check_number(name, value, 0)
    shard = math.ceil(num_params / num_gpus)

    def part(bytes_per_param: float, sharded: bool) -> int:
        return round((shard if sharded else num_params) * bytes_per_param)

    return ShardedMemory(
        num_params=num_params,
        num_gpus=num_gpus,
        stage=stage,
        params=part(param_bytes, stage >= 3),
        grads=part(grad_bytes, stage >= 2),
        optimizer=part(optimizer_bytes, stage >= 1),
    )

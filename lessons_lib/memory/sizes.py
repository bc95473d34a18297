"""Count bytes: format them, and measure parameters, gradients and optimizer state or their ZeRO shards."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from .._validate import check_int, check_number
from ..display import Printable

# Binary units and their bytes, smallest first.
UNIT_BYTES = {unit: 1024**i for i, unit in enumerate(("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"))}


def format_bytes(num_bytes: int | float) -> str:
    """Return a byte count in binary units, e.g. 1536 -> "1.50 KiB", 512 -> "512 B", -2**20 -> "-1.00 MiB"."""
    check_number("num_bytes", num_bytes)
    sign = "-" if num_bytes < 0 else ""
    value = float(abs(num_bytes))
    if value < 1024:
        return f"{sign}{value:.0f} B" if value == int(value) else f"{sign}{value:.2f} B"
    unit = [name for name, size in UNIT_BYTES.items() if size <= value][-1]
    return f"{sign}{value / UNIT_BYTES[unit]:.2f} {unit}"


_SIZE = re.compile(r"([\d.]+)\s*(bytes|B|KiB|MiB|GiB|TiB|PiB)")


def parse_bytes(text: str) -> int:
    """Return the bytes of a size written as PyTorch prints it, e.g. "2.00 GiB", "0 bytes"."""
    match = _SIZE.fullmatch(text.strip())
    return round(float(match.group(1)) * {"bytes": 1, **UNIT_BYTES}[match.group(2)])


def storage_key_and_bytes(t: torch.Tensor) -> tuple[object, int]:
    """Return a key equal for tensors that share memory, and the bytes that memory holds."""
    try:
        storage = t.untyped_storage()
        return ("storage", storage._cdata), int(storage.nbytes())
    except (RuntimeError, NotImplementedError, AttributeError):  # sparse, nested or exotic tensors
        return ("tensor", id(t)), int(t.numel() * t.element_size())


def _unique_bytes(tensors: Iterable[torch.Tensor]) -> int:
    return sum(dict(storage_key_and_bytes(t) for t in tensors).values())


def check_module(model) -> None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model phải là một torch.nn.Module (vd nn.Linear(4, 2)), không phải {type(model).__name__}")


def check_optimizer(optimizer, allow_none: bool = True) -> None:
    if (optimizer is not None or not allow_none) and not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer phải là một torch.optim.Optimizer (vd torch.optim.Adam(model.parameters())) "
                        f"hoặc None, không phải {type(optimizer).__name__}")


def _state_tensors(optimizer) -> list[tuple[str, torch.Tensor]]:
    return [(str(key), value) for state in optimizer.state.values() for key, value in state.items()
            if isinstance(value, torch.Tensor)]


def _optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Return the bytes the optimizer's state holds now, by state name (e.g. {"exp_avg": ..., "step": ...})."""
    by_key: dict[str, list[torch.Tensor]] = {}
    for key, value in _state_tensors(optimizer):
        by_key.setdefault(key, []).append(value)
    return {key: _unique_bytes(tensors) for key, tensors in by_key.items()}


@dataclass(frozen=True, repr=False)
class StateSizes(Printable):
    """Bytes of a model's training state, counted from the real tensors (see `training_state_sizes`)."""

    params: int
    grads: int
    optimizer: int
    buffers: int = 0
    optimizer_by_key: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.params + self.buffers + self.grads + self.optimizer

    def breakdown(self, activations: int = 0) -> dict[str, int]:
        """Return {"params", "grads", "optimizer", "activations"} in bytes (buffers added to params)."""
        check_int("activations", activations, 0)
        return {"params": self.params + self.buffers, "grads": self.grads, "optimizer": self.optimizer,
                "activations": activations}

    def __str__(self) -> str:
        keys = ", ".join(f"{k} {format_bytes(v)}" for k, v in self.optimizer_by_key.items())
        parts = ["tham số " + format_bytes(self.params)]
        if self.buffers:
            parts.append("buffer " + format_bytes(self.buffers))
        parts += ["gradient " + format_bytes(self.grads),
                  "optimizer " + format_bytes(self.optimizer) + (f" ({keys})" if keys else ""),
                  "tổng " + format_bytes(self.total)]
        return " · ".join(parts)


def training_state_sizes(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> StateSizes:
    """Return the bytes of `model`'s parameters, buffers and gradients and of `optimizer`'s state, as they are now."""
    check_module(model)
    check_optimizer(optimizer)
    params = list(model.parameters())
    state = _state_tensors(optimizer) if optimizer is not None else []
    return StateSizes(
        params=_unique_bytes(params),
        grads=_unique_bytes(p.grad for p in params if p.grad is not None),
        optimizer=_unique_bytes(t for _, t in state),
        buffers=_unique_bytes(model.buffers()),
        optimizer_by_key=_optimizer_state_bytes(optimizer) if optimizer is not None else {},
    )


def trainable_bytes(model: torch.nn.Module) -> int:
    """Return the bytes of the parameters that require grad: what their gradients will occupy."""
    return _unique_bytes(p for p in model.parameters() if p.requires_grad)


_STAGE_NAMES = {0: "DDP (không shard)", 1: "ZeRO-1 (shard optimizer)", 2: "ZeRO-2 (+ gradient)",
                3: "ZeRO-3 / FSDP full shard (+ tham số)"}


@dataclass(frozen=True, repr=False)
class ShardedMemory(Printable):
    """Per-GPU bytes of the model state (params, grads, optimizer) under one sharding stage."""

    num_gpus: int
    stage: int
    params: int
    grads: int
    optimizer: int

    @property
    def total(self) -> int:
        return self.params + self.grads + self.optimizer

    @property
    def name(self) -> str:
        return _STAGE_NAMES[self.stage]

    def __str__(self) -> str:
        gb = 1e9
        return (f"{self.name:<38} {self.num_gpus} GPU: mỗi GPU {self.total / gb:8.2f} GB (tham số "
                f"{self.params / gb:.2f} + gradient {self.grads / gb:.2f} + optimizer {self.optimizer / gb:.2f})")


def sharded_training_memory(num_params: int, num_gpus: int = 1, stage: int = 0) -> ShardedMemory:
    """Return the per-GPU bytes of parameters, gradients and optimizer state under DDP or ZeRO stage 1/2/3."""
    check_int("num_params", num_params, 0)
    check_int("num_gpus", num_gpus, 1)
    check_int("stage", stage, 0)
    if stage > 3:
        raise ValueError(f"stage phải là 0 (DDP), 1, 2 hoặc 3 (ZeRO), nhận {stage}")
    shard = math.ceil(num_params / num_gpus)

    def part(bytes_per_param: int, sharded: bool) -> int:
        return (shard if sharded else num_params) * bytes_per_param

    # The ZeRO paper's mixed-precision Adam (Rajbhandari et al., 2020, section 3.1): 2 + 2 + 12 bytes per parameter.
    return ShardedMemory(num_gpus, stage, params=part(2, stage >= 3), grads=part(2, stage >= 2),
                         optimizer=part(12, stage >= 1))

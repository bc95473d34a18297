"""Run AMP training steps (``AmpTrainer``) and a seeded mini-batch training loop (``train``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from ..i18n import tr
from ._checks import _check_int, _check_positive
from .amp import AmpPlan, plan_amp

_OPTIMIZERS = ("adam", "sgd")


@dataclass(frozen=True)
class StepResult:
    """What one training step did: its loss, whether the GradScaler skipped it, the scale, the clipped norm."""

    loss: float
    skipped: bool = False
    scale: float | None = None
    grad_norm: float | None = None


def _model_device(model: nn.Module) -> torch.device:
    if not isinstance(model, nn.Module):
        raise TypeError(tr(f"model phải là một nn.Module, không phải {type(model).__name__}.",
                           f"model must be an nn.Module, not {type(model).__name__}."))
    param = next(model.parameters(), None)
    if param is None:
        raise ValueError(tr("model không có tham số nào để huấn luyện.", "model has no parameters to train."))
    return param.device


def _same_device(a: torch.device, b: torch.device) -> bool:
    if a.type != b.type:
        return False
    if a.type != "cuda":
        return True
    current = torch.cuda.current_device()
    return (a.index if a.index is not None else current) == (b.index if b.index is not None else current)


class AmpTrainer:
    """Run training steps the standard AMP way: autocast forward, scaled backward, unscale, clip, step, update.

    Example::

        trainer = AmpTrainer(model, torch.optim.Adam(model.parameters()), plan_amp(device, "fp16"))
        result = trainer.step(x, y)   # StepResult(loss=..., skipped=False, scale=65536.0)

    Args:
        model: The model; its parameters must be on the plan's device (float32 when a GradScaler is used).
        optimizer: A torch optimizer over the model's parameters.
        plan: An ``AmpPlan`` from ``plan_amp``.
        loss_fn: ``loss_fn(outputs, targets)``; default ``F.cross_entropy``.
        clip_grad_norm: Clip the gradient norm to this value (after ``scaler.unscale_``); None: no clipping.
    """

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, plan: AmpPlan,
                 loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
                 clip_grad_norm: float | None = None):
        where = _model_device(model)
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(tr(f"optimizer phải là một torch.optim.Optimizer, không phải {type(optimizer).__name__}.",
                               f"optimizer must be a torch.optim.Optimizer, not {type(optimizer).__name__}."))
        if not isinstance(plan, AmpPlan):
            raise TypeError(tr(f"plan phải là một AmpPlan (từ plan_amp(...)), không phải {type(plan).__name__}.",
                               f"plan must be an AmpPlan (from plan_amp(...)), not {type(plan).__name__}."))
        if not _same_device(where, plan.device):
            raise ValueError(tr(f"Model nằm trên {where} nhưng plan dành cho {plan.device}: gọi model.to(device) trước.",
                                f"The model is on {where} but the plan is for {plan.device}: call model.to(device) first."))
        if plan.use_scaler:
            odd = sorted({str(p.dtype) for p in model.parameters() if p.dtype != torch.float32})
            if odd:
                raise ValueError(
                    tr(
                        f"GradScaler cần trọng số FP32 (có {', '.join(odd)}): giữ model ở float32 và để autocast tự "
                        "ép kiểu, đừng gọi model.half().",
                        f"GradScaler needs FP32 master weights (found {', '.join(odd)}): keep the model in float32 "
                        "and let autocast cast, do not call model.half().",
                    )
                )
        if loss_fn is not None and not callable(loss_fn):
            raise TypeError(tr("loss_fn phải là một hàm loss_fn(outputs, targets).",
                               "loss_fn must be a function loss_fn(outputs, targets)."))
        if clip_grad_norm is not None:
            clip_grad_norm = _check_positive("clip_grad_norm", clip_grad_norm)
        self.model = model
        self.optimizer = optimizer
        self.plan = plan
        self.loss_fn = loss_fn or F.cross_entropy
        self.clip_grad_norm = clip_grad_norm
        self.scaler = plan.make_scaler()

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> StepResult:
        """Run one step on a batch and return what happened (the loss is the unscaled FP32 value)."""
        if not isinstance(inputs, torch.Tensor) or not isinstance(targets, torch.Tensor):
            raise TypeError(tr("inputs và targets phải là tensor.", "inputs and targets must be tensors."))
        self.optimizer.zero_grad(set_to_none=True)
        with self.plan.autocast():
            loss = self.loss_fn(self.model(inputs), targets)
        self.scaler.scale(loss).backward()
        grad_norm = None
        if self.clip_grad_norm is not None:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the scaled ones
            grad_norm = float(nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_grad_norm))
        scale_before = self.scaler.get_scale() if self.plan.use_scaler else None
        self.scaler.step(self.optimizer)  # skipped when a gradient is inf/NaN
        self.scaler.update()
        scale = self.scaler.get_scale() if self.plan.use_scaler else None
        skipped = scale is not None and scale < scale_before
        return StepResult(float(loss.detach()), skipped, scale, grad_norm)


def _make_optimizer(name: str, model: nn.Module, lr: float) -> torch.optim.Optimizer:
    if not isinstance(name, str) or name.lower() not in _OPTIMIZERS:
        raise ValueError(tr(f"optimizer phải là một trong {_OPTIMIZERS}, không phải {name!r}.",
                            f"optimizer must be one of {_OPTIMIZERS}, not {name!r}."))
    if name.lower() == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr)
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)


def _check_batch(inputs, targets, where: torch.device) -> int:
    if not isinstance(inputs, torch.Tensor) or not isinstance(targets, torch.Tensor):
        raise TypeError(tr("inputs và targets phải là tensor (vd từ make_classification_data).",
                           "inputs and targets must be tensors (e.g. from make_classification_data)."))
    if inputs.shape[0] != targets.shape[0] or inputs.shape[0] == 0:
        raise ValueError(tr(f"inputs ({inputs.shape[0]} hàng) và targets ({targets.shape[0]}) phải có cùng số hàng > 0.",
                            f"inputs ({inputs.shape[0]} rows) and targets ({targets.shape[0]}) need the same row count > 0."))
    for name, t in (("inputs", inputs), ("targets", targets)):
        if not _same_device(t.device, where):
            raise ValueError(tr(f"{name} nằm trên {t.device} nhưng model trên {where}: gọi {name}.to(device).",
                                f"{name} is on {t.device} but the model is on {where}: call {name}.to(device)."))
    return inputs.shape[0]


@dataclass
class TrainResult:
    """The record of a training run: the loss of every step, the skipped steps and the GradScaler scales."""

    plan: AmpPlan
    losses: list[float] = field(default_factory=list)
    skipped_steps: list[int] = field(default_factory=list)
    scales: list[float] = field(default_factory=list)

    @property
    def final_loss(self) -> float:
        """Return the loss of the last step."""
        return self.losses[-1]

    def __str__(self) -> str:
        skipped = tr(f", {len(self.skipped_steps)} bước bị bỏ qua", f", {len(self.skipped_steps)} steps skipped")
        return (f"{self.plan}: {len(self.losses)} " + tr("bước", "steps")
                + f", loss {self.losses[0]:.4f} → {self.final_loss:.4f}"
                + (skipped if self.plan.use_scaler else ""))


def train(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    steps: int = 100,
    batch_size: int = 64,
    lr: float = 1e-2,
    optimizer: str = "adam",
    amp: str | torch.dtype | None = "off",
    scaler: bool | None = None,
    allow_emulated: bool = False,
    clip_grad_norm: float | None = None,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    seed: int = 0,
) -> TrainResult:
    """Train `model` in place on shuffled mini-batches of ``(inputs, targets)`` and return the record.

    The device is the model's; data must be there too. The batch order depends only on `seed`, so two runs
    from the same model weights differ only by the arithmetic (e.g. FP32 vs autocast).

    Args:
        model: The model to train (float32 weights for AMP).
        inputs: Inputs, first dimension = samples.
        targets: Targets for ``loss_fn`` (class indices for the default cross-entropy).
        steps: Number of optimizer steps.
        batch_size: Rows per step (at most the number of samples).
        lr: Learning rate.
        optimizer: "adam" or "sgd" (momentum 0.9).
        amp: "off", "bf16" or "fp16" (see ``plan_amp``).
        scaler: GradScaler on/off; None: on for fp16.
        allow_emulated: Accept bf16 on a GPU without native bf16, or fp16 on the CPU.
        clip_grad_norm: Clip gradients to this norm (after unscaling); None: no clipping.
        loss_fn: ``loss_fn(outputs, targets)``; default cross-entropy.
        seed: Seed of the batch order.

    Returns:
        A ``TrainResult`` with one loss per step.
    """
    where = _model_device(model)
    n = _check_batch(inputs, targets, where)
    _check_int("steps", steps)
    _check_int("batch_size", batch_size)
    _check_int("seed", seed, minimum=0)
    if batch_size > n:
        raise ValueError(tr(f"batch_size={batch_size} lớn hơn số mẫu ({n}).",
                            f"batch_size={batch_size} is larger than the number of samples ({n})."))
    lr = _check_positive("lr", lr)
    plan = plan_amp(where, amp, scaler=scaler, allow_emulated=allow_emulated)
    trainer = AmpTrainer(model, _make_optimizer(optimizer, model, lr), plan, loss_fn, clip_grad_norm)
    gen = torch.Generator().manual_seed(seed)
    result = TrainResult(plan)
    order, pos = torch.randperm(n, generator=gen), 0
    model.train()
    for step in range(steps):
        if pos + batch_size > n:
            order, pos = torch.randperm(n, generator=gen), 0
        idx = order[pos:pos + batch_size].to(where)
        pos += batch_size
        out = trainer.step(inputs[idx], targets[idx])
        result.losses.append(out.loss)
        if out.skipped:
            result.skipped_steps.append(step)
        if out.scale is not None:
            result.scales.append(out.scale)
    return result

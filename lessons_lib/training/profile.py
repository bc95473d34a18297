"""Measure the median time and peak CUDA memory of one training step."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..bench import Timing, measure, synchronize
from ..i18n import tr
from ._checks import _check_int, _check_positive
from .amp import AmpPlan, plan_amp
from .trainer import AmpTrainer, _check_batch, _make_optimizer, _model_device


@dataclass(frozen=True)
class StepProfile:
    """Median time of one training step (a ``bench.Timing``) and the peak CUDA memory it needed (None elsewhere)."""

    plan: AmpPlan
    timing: Timing
    peak_memory_bytes: int | None
    baseline_memory_bytes: int | None

    @property
    def median_s(self) -> float:
        """Return the median step time in seconds."""
        return self.timing.median_s

    def __str__(self) -> str:
        label = self.plan.amp if self.plan.enabled else "fp32"
        text = f"{label:>4}: {self.median_s * 1e3:.2f} ms/" + tr("bước", "step") + f" ({self.timing.conditions()})"
        if self.peak_memory_bytes is not None:
            text += (tr(" · đỉnh bộ nhớ ", " · peak memory ") + f"{self.peak_memory_bytes / 2**20:.0f} MiB"
                     + tr(f" (nền {self.baseline_memory_bytes / 2**20:.0f} MiB: trọng số, gradient, optimizer, dữ liệu)",
                          f" (baseline {self.baseline_memory_bytes / 2**20:.0f} MiB: weights, grads, optimizer, data)"))
        return text


def profile_train_step(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    amp: str | torch.dtype | None = "off",
    scaler: bool | None = None,
    allow_emulated: bool = False,
    warmup: int = 2,
    repeats: int = 10,
    lr: float = 1e-3,
    optimizer: str = "adam",
) -> StepProfile:
    """Time full training steps (forward, backward, optimizer) on one batch and read the peak CUDA memory.

    One untimed step creates the optimizer state; then ``bench.measure`` times single steps (warm-up,
    synchronize, median of `repeats`). The model is trained in place. On CUDA the peak is
    ``torch.cuda.max_memory_allocated`` over the measured steps and the baseline is what was allocated
    just before them (weights, gradients, optimizer state, data).

    Args:
        model: The model (on the device to measure).
        inputs: One batch of inputs on the model's device.
        targets: Its targets.
        amp: "off", "bf16" or "fp16".
        scaler: GradScaler on/off; None: on for fp16.
        allow_emulated: Accept an emulated format (see ``plan_amp``).
        warmup: Further untimed steps (kernel selection, allocator).
        repeats: Timed steps; the median is reported.
        lr: Learning rate.
        optimizer: "adam" or "sgd".

    Returns:
        A ``StepProfile``.
    """
    where = _model_device(model)
    _check_batch(inputs, targets, where)
    _check_int("warmup", warmup, minimum=0)
    _check_int("repeats", repeats)
    lr = _check_positive("lr", lr)
    plan = plan_amp(where, amp, scaler=scaler, allow_emulated=allow_emulated)
    trainer = AmpTrainer(model, _make_optimizer(optimizer, model, lr), plan)
    model.train()
    trainer.step(inputs, targets)
    synchronize(where)
    baseline = peak = None
    if where.type == "cuda":
        torch.cuda.reset_peak_memory_stats(where)
        baseline = torch.cuda.memory_allocated(where)
    label = f"train step {plan.amp if plan.enabled else 'fp32'}"
    timing = measure(lambda: trainer.step(inputs, targets), device=where, repeats=repeats, warmup=warmup,
                     number=1, label=label)
    if where.type == "cuda":
        peak = torch.cuda.max_memory_allocated(where)
    return StepProfile(plan, timing, peak, baseline)

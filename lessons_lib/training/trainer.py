"""Run a seeded mini-batch loop (`train`), and time one step (`profile_train_step`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .._validate import check_int, check_number
from ..bench import Timing, measure, noise_warning, synchronize
from ..display import Printable
from .amp import AmpPlan, plan_amp

_PROFILE_WARMUP, _PROFILE_REPEATS, _PROFILE_LR = 2, 10, 1e-3
_FLOOR_FLOPS_PER_S = 1e9   # even a busy CPU core multiplies small matrices at >= 1 GFLOP/s
_FLOOR_STEP_S = 2e-3       # a small model's training step costs at most ~2 ms of framework overhead on a CPU


@dataclass(frozen=True)
class _StepResult:
    """What one training step did: its loss, whether the GradScaler skipped it, and the scale after it."""

    loss: float
    skipped: bool = False
    scale: float | None = None


def _model_device(model: nn.Module) -> torch.device:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model phải là một nn.Module, không phải {type(model).__name__}.")
    param = next(model.parameters(), None)
    if param is None:
        raise ValueError("model không có tham số nào để huấn luyện.")
    return param.device


def _same_device(a: torch.device, b: torch.device) -> bool:
    if a.type != b.type:
        return False
    if a.type != "cuda":
        return True
    current = torch.cuda.current_device()
    return (a.index if a.index is not None else current) == (b.index if b.index is not None else current)


class _AmpTrainer:
    """Train `model` in place with Adam the standard AMP way: autocast forward, scaled backward, step, update."""

    def __init__(self, model: nn.Module, plan: AmpPlan, lr: float):
        odd = sorted({str(p.dtype) for p in model.parameters() if p.dtype != torch.float32})
        if plan.use_scaler and odd:
            raise ValueError(f"GradScaler cần trọng số FP32 (có {', '.join(odd)}): giữ model ở float32 và để "
                             "autocast tự ép kiểu, đừng gọi model.half().")
        self.model, self.optimizer, self.plan = model, torch.optim.Adam(model.parameters(), lr=lr), plan
        self.scaler = torch.amp.GradScaler(plan.device.type, enabled=plan.use_scaler)  # off: a pass-through
        model.train()

    def step(self, inputs: torch.Tensor, targets: torch.Tensor) -> _StepResult:
        """Run one step on a batch and return what happened (the loss is the unscaled FP32 value)."""
        self.optimizer.zero_grad(set_to_none=True)
        with self.plan.autocast():
            loss = F.cross_entropy(self.model(inputs), targets)
        self.scaler.scale(loss).backward()
        scale_before = self.scaler.get_scale() if self.plan.use_scaler else None
        self.scaler.step(self.optimizer)  # skipped when a gradient is inf/NaN
        self.scaler.update()
        scale = self.scaler.get_scale() if self.plan.use_scaler else None
        return _StepResult(float(loss.detach()), scale is not None and scale < scale_before, scale)


def _check_batch(model, inputs, targets) -> torch.device:
    """Return the model's device after checking that `inputs` and `targets` are one batch there."""
    where = _model_device(model)
    if not isinstance(inputs, torch.Tensor) or not isinstance(targets, torch.Tensor):
        raise TypeError("inputs và targets phải là tensor (vd từ make_classification_data).")
    if inputs.shape[0] != targets.shape[0] or inputs.shape[0] == 0:
        raise ValueError(f"inputs ({inputs.shape[0]} hàng) và targets ({targets.shape[0]}) phải có cùng số hàng > 0.")
    for name, t in (("inputs", inputs), ("targets", targets)):
        if not _same_device(t.device, where):
            raise ValueError(f"{name} nằm trên {t.device} nhưng model trên {where}: gọi {name}.to(device).")
    return where


@dataclass(repr=False)
class TrainResult(Printable):
    """The record of a training run: the loss of every step, the skipped steps and the GradScaler scales."""

    plan: AmpPlan
    losses: list[float] = field(default_factory=list)
    skipped_steps: list[int] = field(default_factory=list)
    scales: list[float] = field(default_factory=list)

    def __str__(self) -> str:
        skipped = f", {len(self.skipped_steps)} bước bị bỏ qua" if self.plan.use_scaler else ""
        return f"{self.plan}: {len(self.losses)} bước, loss {self.losses[0]:.4f} → {self.losses[-1]:.4f}{skipped}"


def train(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, *, steps: int = 100, batch_size: int = 64,
          lr: float = 1e-2, amp: str = "off", seed: int = 0) -> TrainResult:
    """Train `model` in place with Adam on shuffled mini-batches of ``(inputs, targets)``; return the record."""
    where = _check_batch(model, inputs, targets)
    n = inputs.shape[0]
    check_int("steps", steps, 1)
    check_int("batch_size", batch_size, 1)
    check_int("seed", seed, 0)
    if batch_size > n:
        raise ValueError(f"batch_size={batch_size} lớn hơn số mẫu ({n}).")
    check_number("lr", lr, positive=True)
    trainer = _AmpTrainer(model, plan_amp(where, amp), lr)
    gen = torch.Generator().manual_seed(seed)
    result = TrainResult(trainer.plan)
    order, pos = torch.randperm(n, generator=gen), 0
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


@dataclass(frozen=True, repr=False)
class StepProfile(Printable):
    """Median time of one training step (a ``bench.Timing``) and the peak CUDA memory it needed (None elsewhere)."""

    plan: AmpPlan
    timing: Timing
    peak_memory_bytes: int | None
    baseline_memory_bytes: int | None
    expected_s: float | None = None  # the most a step should take here (CPU: from its FLOPs), None: unknown

    @property
    def median_s(self) -> float:
        return self.timing.median_s

    @property
    def noise(self) -> str | None:
        """The "⚠️ số đo nhiễu" line for these repeats (shown once, under the result), else None."""
        return noise_warning(self.timing.times_s, expected_s=self.expected_s)

    def __str__(self) -> str:
        label = self.plan.amp if self.plan.enabled else "fp32"
        text = f"{label:>4}: {self.median_s * 1e3:.2f} ms/bước ({self.timing.conditions()})"
        if self.peak_memory_bytes is not None:
            text += (f" · đỉnh bộ nhớ {self.peak_memory_bytes / 2**20:.0f} MiB (nền "
                     f"{self.baseline_memory_bytes / 2**20:.0f} MiB: trọng số, gradient, optimizer, dữ liệu)")
        if self.noise:
            text += f"\n      bước {label}: {self.noise}"
        return text


def profile_train_step(model: nn.Module, inputs: torch.Tensor, targets: torch.Tensor, *,
                       amp: str = "off") -> StepProfile:
    """Time full training steps (forward, backward, Adam) on one batch and read the peak CUDA memory."""
    where = _check_batch(model, inputs, targets)
    plan = plan_amp(where, amp)
    trainer = _AmpTrainer(model, plan, _PROFILE_LR)
    trainer.step(inputs, targets)
    synchronize(where)
    baseline = peak = None
    if where.type == "cuda":
        torch.cuda.reset_peak_memory_stats(where)
        baseline = torch.cuda.memory_allocated(where)
    label = f"train step {plan.amp if plan.enabled else 'fp32'}"
    # not printed while measuring: StepProfile shows the noise warning once, labelled
    timing = measure(lambda: trainer.step(inputs, targets), device=where, repeats=_PROFILE_REPEATS,
                     warmup=_PROFILE_WARMUP, number=1, label=label, warn=False)
    if where.type == "cuda":
        peak = torch.cuda.max_memory_allocated(where)
    expected_s = None
    if where.type == "cpu":   # ~6 FLOP per parameter per sample (forward 2, backward 4)
        flops = 6 * sum(p.numel() for p in model.parameters()) * inputs.shape[0]
        expected_s = max(flops / _FLOOR_FLOPS_PER_S, _FLOOR_STEP_S)
    return StepProfile(plan, timing, peak, baseline, expected_s)

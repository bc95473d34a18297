"""Tiny models, synthetic data and an AMP-aware training step that runs on CPU, CUDA and MPS.

The public pieces, in the order a notebook uses them:

- ``make_classification_data`` and ``make_mlp``: a seeded synthetic task and a small MLP (no downloads).
- ``recommend_amp`` and ``plan_amp``: which low-precision format to use on a device, and a checked
  ``AmpPlan`` (autocast dtype, GradScaler on/off) that refuses combinations that cannot work or make no sense.
- ``AmpTrainer`` (one step: autocast forward, scaled backward, optional clipping) and ``train`` (a loop).
- ``profile_train_step``: median step time and peak GPU memory of one configuration.
- ``autocast_dtypes``: which dtype each common op returns inside autocast on a device.
"""

from __future__ import annotations

import contextlib
import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .bench import Timing, measure, synchronize
from .device import has_native_bf16, pick_device
from .i18n import tr
from .precision import Table

AMP_MODES = ("off", "bf16", "fp16")
_AMP_DTYPES = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}
_AMP_ALIASES = {
    "off": "off", "none": "off", "fp32": "off", "float32": "off", "no": "off",
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16",
}
_OPTIMIZERS = ("adam", "sgd")


# --------------------------------------------------------------------------- argument checks


def _check_int(name: str, value, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(
            tr(f"{name} phải là số nguyên, không phải {type(value).__name__}.",
               f"{name} must be an int, not {type(value).__name__}.")
        )
    if value < minimum:
        raise ValueError(tr(f"{name} phải ≥ {minimum}, nhận {value}.", f"{name} must be >= {minimum}, got {value}."))
    return value


def _check_positive(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            tr(f"{name} phải là số dương, không phải {type(value).__name__}.",
               f"{name} must be a positive number, not {type(value).__name__}.")
        )
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(tr(f"{name} phải là số dương hữu hạn, nhận {value}.",
                            f"{name} must be a finite positive number, got {value}."))
    return float(value)


def _check_float_dtype(dtype) -> torch.dtype:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(
            tr(f"dtype phải là một torch dtype số thực như torch.float32, không phải {dtype!r}.",
               f"dtype must be a floating torch dtype such as torch.float32, not {dtype!r}.")
        )
    return dtype


def _factory_device(device) -> torch.device:
    return torch.device("cpu") if device is None else pick_device(device)


def parse_amp(amp: str | torch.dtype | None) -> str:
    """Return the AMP mode "off", "bf16" or "fp16" for a name ("bfloat16", "half", "fp32", ...), dtype or None.

    Raises:
        TypeError: `amp` is not a str, torch.dtype or None.
        ValueError: `amp` names no known mode.
    """
    if amp is None or amp is False:
        return "off"
    if isinstance(amp, torch.dtype):
        for name, dtype in (("off", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)):
            if amp == dtype:
                return name
        raise ValueError(tr(f"amp={amp} không dùng được; chọn torch.float16 hoặc torch.bfloat16.",
                            f"amp={amp} is not usable; pick torch.float16 or torch.bfloat16."))
    if not isinstance(amp, str):
        raise TypeError(
            tr(f"amp phải là 'off', 'bf16' hoặc 'fp16' (chuỗi), không phải {type(amp).__name__}.",
               f"amp must be 'off', 'bf16' or 'fp16' (a string), not {type(amp).__name__}.")
        )
    key = amp.strip().lower().removeprefix("torch.")
    if key not in _AMP_ALIASES:
        raise ValueError(tr(f"Không hiểu amp={amp!r}. Dùng 'off', 'bf16' hoặc 'fp16'.",
                            f"Unknown amp={amp!r}. Use 'off', 'bf16' or 'fp16'."))
    return _AMP_ALIASES[key]


# --------------------------------------------------------------------------- data and models


def make_classification_data(
    n_samples: int = 1024,
    n_features: int = 32,
    n_classes: int = 4,
    *,
    seed: int = 0,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return a seeded synthetic classification task ``(x, y)``: Gaussian inputs, labels from a random teacher net.

    The same seed gives the same numbers on every machine (they are drawn on the CPU, then moved).

    Args:
        n_samples: Number of rows.
        n_features: Input width.
        n_classes: Number of labels (at least 2).
        seed: Random seed; the global RNG is not touched.
        device: Where to put the tensors (None: CPU).
        dtype: Float dtype of ``x`` (``y`` is int64).

    Returns:
        ``x`` of shape (n_samples, n_features) and ``y`` of shape (n_samples,) with values in [0, n_classes).
    """
    _check_int("n_samples", n_samples)
    _check_int("n_features", n_features)
    _check_int("n_classes", n_classes, minimum=2)
    _check_int("seed", seed, minimum=0)
    _check_float_dtype(dtype)
    device = _factory_device(device)
    gen = torch.Generator().manual_seed(seed)
    hidden = 32
    x = torch.randn(n_samples, n_features, generator=gen)
    w1 = torch.randn(n_features, hidden, generator=gen) / math.sqrt(n_features)
    w2 = torch.randn(hidden, n_classes, generator=gen) / math.sqrt(hidden)
    y = (torch.tanh(2.0 * (x @ w1)) @ w2).argmax(dim=1)
    return x.to(device=device, dtype=dtype), y.to(device)


def make_mlp(
    in_features: int = 32,
    out_features: int = 4,
    hidden: int = 64,
    depth: int = 2,
    *,
    seed: int = 0,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
) -> nn.Sequential:
    """Return a seeded MLP: ``depth`` hidden layers of width ``hidden`` (Linear + ReLU), then a Linear head.

    The same seed gives the same weights on every device (built on the CPU, then moved); the global RNG
    is left as it was.

    Args:
        in_features: Input width.
        out_features: Output width (number of classes).
        hidden: Width of the hidden layers.
        depth: Number of hidden layers (at least 1).
        seed: Random seed of the initialisation.
        device: Where to put the parameters (None: CPU).
        dtype: Float dtype of the parameters (keep float32 for AMP).

    Returns:
        An ``nn.Sequential``.
    """
    for name, value in (("in_features", in_features), ("out_features", out_features), ("hidden", hidden),
                        ("depth", depth)):
        _check_int(name, value)
    _check_int("seed", seed, minimum=0)
    _check_float_dtype(dtype)
    device = _factory_device(device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers: list[nn.Module] = [nn.Linear(in_features, hidden), nn.ReLU()]
        for _ in range(depth - 1):
            layers += [nn.Linear(hidden, hidden), nn.ReLU()]
        layers.append(nn.Linear(hidden, out_features))
        model = nn.Sequential(*layers)
    return model.to(device=device, dtype=dtype)


# --------------------------------------------------------------------------- what this machine supports


@functools.cache
def _autocast_problem(device: str, amp: str) -> str | None:
    """Return None when autocast to `amp` really produces that dtype on `device`, else the reason."""
    dtype = _AMP_DTYPES[amp]
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            a = torch.ones(4, 4, device=device)
            with torch.amp.autocast(device_type=torch.device(device).type, dtype=dtype):
                out = a @ a
    except (RuntimeError, ValueError, TypeError, AssertionError) as exc:
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if out.dtype != dtype:
        said = "; ".join(str(w.message).splitlines()[0] for w in caught)
        return said or f"matmul returned {out.dtype}"
    return None


@functools.cache
def _grad_scaler_problem(device: str) -> str | None:
    """Return None when ``torch.amp.GradScaler`` runs a scale/step/update on `device`, else the reason."""
    scaler_cls = getattr(torch.amp, "GradScaler", None)
    if scaler_cls is None:  # pragma: no cover - torch < 2.3
        return f"torch {torch.__version__} has no torch.amp.GradScaler"
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            param = nn.Parameter(torch.ones(2, device=device))
            opt = torch.optim.SGD([param], lr=0.1)
            scaler = scaler_cls(torch.device(device).type, init_scale=2.0)
            scaler.scale(param.sum()).backward()
            scaler.step(opt)
            scaler.update()
    except (RuntimeError, NotImplementedError, ValueError, TypeError, AssertionError) as exc:
        return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if not scaler.is_enabled():
        return "; ".join(str(w.message) for w in caught) or "GradScaler disabled itself"
    return None


def autocast_supported(device: str | torch.device | None = None, amp: str | torch.dtype = "bf16") -> bool:
    """Return True when autocast to `amp` ("bf16" or "fp16") really runs matmuls in that dtype on `device`."""
    device = pick_device(device)
    mode = parse_amp(amp)
    return mode == "off" or _autocast_problem(str(device), mode) is None


def grad_scaler_supported(device: str | torch.device | None = None) -> bool:
    """Return True when ``torch.amp.GradScaler(device.type)`` works here (CUDA; CPU since torch 2.3; MPS: newer)."""
    return _grad_scaler_problem(str(pick_device(device))) is None


def recommend_amp(device: str | torch.device | None = None) -> str:
    """Return the low-precision format to use with autocast on `device`: "bf16", "fp16" or "off".

    CUDA: "bf16" on compute capability 8.0+ (native bf16), "fp16" (with GradScaler) below, e.g. a T4.
    CPU: "bf16" (the CPU autocast format; whether it is faster than FP32 depends on the CPU).
    Other devices (MPS, XPU): "bf16" if autocast to bf16 works, else "fp16" if autocast and GradScaler work,
    else "off".
    """
    device = pick_device(device)
    if device.type == "cuda":
        return "bf16" if has_native_bf16(device) else "fp16"
    if device.type == "cpu":
        return "bf16"
    if autocast_supported(device, "bf16"):
        return "bf16"
    if autocast_supported(device, "fp16") and grad_scaler_supported(device):
        return "fp16"
    return "off"


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class AmpPlan:
    """A checked AMP configuration: device, autocast dtype (None = off) and whether a GradScaler is used."""

    device: torch.device
    amp: str
    dtype: torch.dtype | None
    use_scaler: bool
    emulated: bool = False

    @property
    def enabled(self) -> bool:
        """Return True when autocast is on."""
        return self.amp != "off"

    def autocast(self) -> contextlib.AbstractContextManager:
        """Return the autocast context for the forward pass (a no-op context when AMP is off)."""
        if not self.enabled:  # also where this torch has no autocast for the device at all
            return contextlib.nullcontext()
        return torch.amp.autocast(device_type=self.device.type, dtype=self.dtype)

    def make_scaler(self) -> torch.amp.GradScaler:
        """Return a fresh GradScaler (disabled, i.e. a pass-through, unless the plan uses one)."""
        return torch.amp.GradScaler(self.device.type, enabled=self.use_scaler)

    def __str__(self) -> str:
        if not self.enabled:
            what = tr("FP32 (không autocast)", "FP32 (no autocast)")
        else:
            what = f"autocast {self.amp}" + (tr(" + GradScaler", " + GradScaler") if self.use_scaler
                                              else tr(", không GradScaler", ", no GradScaler"))
        note = tr(" (định dạng chỉ được giả lập trên thiết bị này)", " (format only emulated on this device)")
        return f"{self.device} · {what}" + (note if self.emulated else "")


def plan_amp(
    device: str | torch.device | None = None,
    amp: str | torch.dtype | None = "off",
    *,
    scaler: bool | None = None,
    allow_emulated: bool = False,
) -> AmpPlan:
    """Check an AMP configuration for `device` and return it as an ``AmpPlan``.

    Args:
        device: "cpu", "cuda", "mps", a torch.device, or None for ``pick_device()``.
        amp: "off", "bf16" or "fp16" (or "bfloat16", "half", a dtype, None).
        scaler: Use a GradScaler? None (default) means yes for fp16 and no otherwise.
        allow_emulated: Accept a format the device only emulates (bf16 on a CUDA GPU below compute capability
            8.0 such as a T4; fp16 on a CPU). It runs, but usually slower than FP32.

    Returns:
        The checked plan.

    Raises:
        TypeError: `scaler` or `allow_emulated` has the wrong type, or `amp` is not a str/dtype/None.
        ValueError: the combination cannot work or makes no sense here; the message says what to pass.
    """
    device = pick_device(device)
    mode = parse_amp(amp)
    if scaler is not None and not isinstance(scaler, bool):
        raise TypeError(tr(f"scaler phải là True, False hoặc None (tự chọn), không phải {scaler!r}.",
                           f"scaler must be True, False or None (automatic), not {scaler!r}."))
    if not isinstance(allow_emulated, bool):
        raise TypeError(tr(f"allow_emulated phải là True hoặc False, không phải {allow_emulated!r}.",
                           f"allow_emulated must be True or False, not {allow_emulated!r}."))
    if scaler and mode != "fp16":
        raise ValueError(
            tr(
                f"GradScaler chỉ dùng với amp='fp16' (ở đây amp={mode!r}). BF16 có cùng dải số mũ với FP32 nên "
                "gradient không bị underflow: bỏ scaler (scaler=None hoặc False).",
                f"GradScaler is only for amp='fp16' (here amp={mode!r}). BF16 has FP32's exponent range, so "
                "gradients do not underflow: drop the scaler (scaler=None or False).",
            )
        )
    if mode == "off":
        return AmpPlan(device, "off", None, False)
    emulated = False
    if mode == "fp16" and device.type == "cpu":
        if not allow_emulated:
            raise ValueError(
                tr(
                    "amp='fp16' trên CPU: đa số CPU không có phép tính FP16 gốc nên thường chậm hơn FP32, lại phải "
                    "kèm GradScaler. Trên CPU hãy dùng amp='bf16' (không cần GradScaler); nếu chỉ để minh hoạ, "
                    "truyền allow_emulated=True.",
                    "amp='fp16' on the CPU: most CPUs have no native FP16 arithmetic, so it is usually slower than "
                    "FP32 and still needs a GradScaler. On the CPU use amp='bf16' (no GradScaler); to demonstrate "
                    "it anyway, pass allow_emulated=True.",
                )
            )
        emulated = True
    if mode == "bf16" and device.type == "cuda" and not has_native_bf16(device):
        index = device.index if device.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        name = torch.cuda.get_device_name(index)
        if not allow_emulated:
            raise ValueError(
                tr(
                    f"{name} (compute capability {major}.{minor}) không có BF16 gốc — cần 8.0+ (Ampere: A100, "
                    "RTX 30xx trở lên). torch.cuda.is_bf16_supported() vẫn có thể trả True vì BF16 được giả lập, "
                    "nhưng chậm. Dùng amp='fp16' (kèm GradScaler), hoặc allow_emulated=True nếu chấp nhận chậm.",
                    f"{name} (compute capability {major}.{minor}) has no native BF16 — that needs 8.0+ (Ampere: "
                    "A100, RTX 30xx or newer). torch.cuda.is_bf16_supported() may still say True because BF16 is "
                    "emulated, slowly. Use amp='fp16' (with GradScaler), or allow_emulated=True to accept the cost.",
                )
            )
        emulated = True
    problem = _autocast_problem(str(device), mode)
    if problem is not None:
        raise ValueError(
            tr(
                f"autocast {mode} không chạy trên {device} với torch {torch.__version__}: {problem}. "
                f"Dùng amp='off' hoặc định dạng khác (gợi ý cho máy này: {recommend_amp(device)!r}).",
                f"autocast {mode} does not run on {device} with torch {torch.__version__}: {problem}. "
                f"Use amp='off' or another format (suggested here: {recommend_amp(device)!r}).",
            )
        )
    use_scaler = mode == "fp16" if scaler is None else scaler
    if use_scaler:
        problem = _grad_scaler_problem(str(device))
        if problem is not None:
            raise ValueError(
                tr(
                    f"GradScaler không chạy trên {device} với torch {torch.__version__}: {problem}. "
                    "Dùng amp='bf16' (không cần GradScaler) hoặc scaler=False (gradient FP16 có thể underflow).",
                    f"GradScaler does not run on {device} with torch {torch.__version__}: {problem}. "
                    "Use amp='bf16' (no GradScaler needed) or scaler=False (FP16 gradients may underflow).",
                )
            )
    return AmpPlan(device, mode, _AMP_DTYPES[mode], use_scaler, emulated)


# --------------------------------------------------------------------------- one training step


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


# --------------------------------------------------------------------------- measuring a step


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


# --------------------------------------------------------------------------- what autocast does per op


def autocast_dtypes(device: str | torch.device | None = "cpu", amp: str | torch.dtype = "bf16", *,
                    allow_emulated: bool = False) -> Table:
    """Run common ops on FP32 inputs inside autocast on `device` and return the dtype each one produced.

    The ops: ``nn.Linear``, ``@``, ``relu``, adding an FP32 tensor, ``softmax``, ``log_softmax``, ``sum``,
    ``layer_norm``, ``cross_entropy``, ``mse_loss``. Which ones stay FP32 differs between devices (each
    device has its own autocast op lists), so this is measured, not looked up.
    """
    plan = plan_amp(device, amp, scaler=False, allow_emulated=allow_emulated)  # no scaler: no backward here
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, generator=gen).to(plan.device)
    labels = torch.randint(0, 4, (8,), generator=gen).to(plan.device)
    layer = make_mlp(16, 4, hidden=16, depth=1, device=plan.device)[0]
    with plan.autocast():
        h = layer(x)
        ops = [
            ("nn.Linear(x)", h),
            ("x @ x.T", x @ x.T),
            ("torch.relu(h)", torch.relu(h)),
            ("h + fp32_tensor", h + torch.ones(16, device=plan.device)),
            ("torch.softmax(h, dim=1)", torch.softmax(h, dim=1)),
            ("torch.log_softmax(h, dim=1)", torch.log_softmax(h, dim=1)),
            ("h.sum()", h.sum()),
            ("F.layer_norm(h, (16,))", F.layer_norm(h, (16,))),
            ("F.cross_entropy(h, y)", F.cross_entropy(h[:, :4], labels)),
            ("F.mse_loss(h, 0)", F.mse_loss(h, torch.zeros_like(h))),
        ]
    rows = tuple((name, str(out.dtype).removeprefix("torch.")) for name, out in ops)
    title = f"{tr('phép toán trong autocast', 'op inside autocast')} ({plan.device}, {plan.amp})"
    return Table((title, tr("dtype kết quả", "result dtype")), rows)

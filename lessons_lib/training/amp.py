"""Parse AMP modes, probe (and cache) what autocast and GradScaler run here, recommend and plan AMP."""

from __future__ import annotations

import contextlib
import functools
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from ..bench import noise_warning
from ..device import has_native_bf16, pick_device
from ..i18n import tr

AMP_MODES = ("off", "bf16", "fp16")
_AMP_DTYPES = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}
_AMP_ALIASES = {
    "off": "off", "none": "off", "fp32": "off", "float32": "off", "no": "off",
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16",
}


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
            8.0 such as a T4; fp16 on a CPU). Matmuls run, usually slower than FP32; on a T4, bf16
            convolutions (no cuDNN bf16 kernels below 8.0) and Triton kernels (bf16 needs sm_80) may be far
            slower or fail.

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
                f"{name} (compute capability {major}.{minor}) không có BF16 gốc — cần 8.0+ (Ampere: A100, "
                "RTX 30xx trở lên). torch.cuda.is_bf16_supported() vẫn có thể trả True vì BF16 được giả lập: "
                "nhân ma trận chạy qua đường FP32 nên chậm hơn, còn convolution (cuDNN không có kernel BF16 dưới "
                "8.0) và kernel của torch.compile (Triton cần sm_80) có thể chậm hơn nhiều hoặc báo lỗi. Dùng "
                "amp='fp16' (kèm GradScaler), hoặc allow_emulated=True nếu vẫn muốn thử."
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


# --------------------------------------------------------------------------- the verdict on a measured speed-up

_FLOOR_FLOPS_PER_S = 1e9   # even a busy CPU core multiplies small matrices at >= 1 GFLOP/s
_FLOOR_STEP_S = 2e-3       # a small model's training step costs at most ~2 ms of framework overhead on a CPU


def amp_speed_verdict(fp32, amp, *, flops_per_step: float | None = None) -> str:
    """Return Vietnamese lines that compare two measured training steps (FP32 and AMP) and say what they mean.

    The lines are built from the measurements only: the speed ratio, whether it matches what the hardware
    predicts (bf16 on a CPU without bf16 instructions is usually slower), and a "⚠️ số đo nhiễu" line when
    the repeats disagree or a step takes far longer than its work explains.

    Args:
        fp32: The ``StepProfile`` of the FP32 step (``profile_train_step(..., amp="off")``).
        amp: The ``StepProfile`` of the AMP step on the same device.
        flops_per_step: Floating-point operations of one step (≈ 6 × parameters × batch for an MLP), or None.

    Raises:
        TypeError: a profile is not a ``StepProfile``-like object, or `flops_per_step` is not a number.
        ValueError: the profiles are for different devices, the first is not FP32, or `flops_per_step` <= 0.
    """
    for name, profile in (("fp32", fp32), ("amp", amp)):
        if not all(hasattr(profile, attr) for attr in ("plan", "timing", "median_s")):
            raise TypeError(f"{name} phải là kết quả của profile_train_step(...), không phải {type(profile).__name__}.")
    if fp32.plan.enabled:
        raise ValueError(f"fp32 phải là bước FP32 (amp='off'), ở đây là {fp32.plan.amp!r}.")
    if fp32.plan.device != amp.plan.device:
        raise ValueError(f"Hai bước phải đo trên cùng thiết bị, ở đây là {fp32.plan.device} và {amp.plan.device}.")
    if flops_per_step is not None:
        if isinstance(flops_per_step, bool) or not isinstance(flops_per_step, (int, float)):
            raise TypeError(f"flops_per_step phải là một số (hoặc None), không phải {type(flops_per_step).__name__}.")
        if not flops_per_step > 0:
            raise ValueError(f"flops_per_step phải dương, nhận {flops_per_step!r}.")
    device, label = amp.plan.device, amp.plan.amp if amp.plan.enabled else "fp32"
    ratio = fp32.median_s / amp.median_s
    if ratio >= 1.1:
        lines = [f"→ {label} nhanh hơn FP32 {ratio:.1f} lần trên {device}, với mô hình này"]
    elif ratio <= 1 / 1.1:
        lines = [f"→ {label} CHẬM hơn FP32 {1 / ratio:.1f} lần trên {device}, với mô hình này"]
    else:
        lines = [f"→ {label} và FP32 gần như bằng nhau (±10%) trên {device}, với mô hình này"]
    expected_s = None
    if flops_per_step is not None and device.type == "cpu":
        expected_s = max(flops_per_step / _FLOOR_FLOPS_PER_S, _FLOOR_STEP_S)
    warnings_ = [f"bước {name}: {w}" for name, p in (("fp32", fp32), (label, amp))
                 if (w := noise_warning(p.timing.times_s, expected_s=expected_s))]
    if device.type == "cpu" and label == "bf16" and ratio >= 1.1:
        hardware = has_native_bf16(device)
        if hardware is False:
            lines.append("Trái với dự đoán: CPU này không báo lệnh bf16 (AVX512_BF16/AMX), nên bf16 thường chậm hơn. "
                         + ("Số đo ở trên bị nhiễu, đó là lời giải thích đầu tiên." if warnings_ else
                            "Với mô hình nhỏ, khác biệt nằm ở overhead chứ không ở phép nhân: chạy lại để xem có lặp lại không."))
        elif hardware is None:
            lines.append("Khoá học không kiểm tra được CPU này có lệnh bf16 hay không, nên không biết trước bf16 "
                         "sẽ nhanh hay chậm hơn.")
    if device.type == "cpu" and label == "bf16" and ratio <= 1 / 1.1 and has_native_bf16(device) is True:
        lines.append("CPU này có lệnh bf16, nhưng với mô hình nhỏ thời gian nằm ở overhead (ép kiểu, gọi từng phép) "
                     "chứ không ở phép nhân ma trận, nên bf16 vẫn có thể chậm hơn"
                     + (". Lần này số đo còn bị nhiễu (dòng dưới), nên chưa kết luận được." if warnings_ else "."))
    if warnings_:
        lines.append(warnings_[0])
    return "\n".join(lines)

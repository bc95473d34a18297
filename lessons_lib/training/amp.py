"""Choose and check AMP: parse modes, probe what autocast and GradScaler run here, plan, and judge a speed-up."""

from __future__ import annotations

import contextlib
import functools
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..device import has_native_bf16, pick_device
from ..display import Printable
from ..precision import Table
from .data import make_mlp

_AMP_DTYPES = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def _parse_amp(amp: str) -> str:
    """Return `amp` when it is "off", "bf16" or "fp16"; refuse anything else, saying what to pass."""
    if not isinstance(amp, str):
        raise TypeError(f"amp phải là 'off', 'bf16' hoặc 'fp16' (chuỗi), không phải {type(amp).__name__}.")
    if amp not in _AMP_DTYPES:
        raise ValueError(f"Không hiểu amp={amp!r}. Dùng 'off', 'bf16' hoặc 'fp16'.")
    return amp


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _problem(run, works, fallback: str) -> str | None:
    """Return None when ``run()``'s result `works`, else the reason: its error or its warnings' first lines."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = run()
    except (RuntimeError, NotImplementedError, ValueError, TypeError, AssertionError) as exc:
        return _first_line(exc)
    return None if works(result) else "; ".join(str(w.message).splitlines()[0] for w in caught) or fallback(result)


@functools.cache
def _autocast_problem(device: str, amp: str) -> str | None:
    """Return None when autocast to `amp` really produces that dtype on `device`, else the reason."""
    def run():
        a = torch.ones(4, 4, device=device)
        with torch.amp.autocast(device_type=torch.device(device).type, dtype=_AMP_DTYPES[amp]):
            return a @ a
    return _problem(run, lambda out: out.dtype == _AMP_DTYPES[amp], lambda out: f"phép nhân ma trận trả về {out.dtype}")


@functools.cache
def _grad_scaler_problem(device: str) -> str | None:
    """Return None when ``torch.amp.GradScaler`` runs a scale/step/update on `device`, else the reason."""
    def run():
        param = nn.Parameter(torch.ones(2, device=device))
        opt = torch.optim.SGD([param], lr=0.1)
        scaler = torch.amp.GradScaler(torch.device(device).type, init_scale=2.0)
        scaler.scale(param.sum()).backward()
        scaler.step(opt)
        scaler.update()
        return scaler
    return _problem(run, lambda scaler: scaler.is_enabled(), lambda scaler: "GradScaler tự tắt")


def _recommend(device: torch.device) -> str:
    if device.type == "cuda":
        return "bf16" if has_native_bf16(device) else "fp16"
    if device.type == "cpu" or _autocast_problem(str(device), "bf16") is None:
        return "bf16"
    if _autocast_problem(str(device), "fp16") is None and _grad_scaler_problem(str(device)) is None:
        return "fp16"
    return "off"


def recommend_amp(device: str | torch.device | None = None) -> str:
    """Return the low-precision format to use with autocast on `device`: "bf16", "fp16" or "off"."""
    return _recommend(pick_device(device))


@dataclass(frozen=True, repr=False)
class AmpPlan(Printable):
    """A checked AMP configuration: device, autocast dtype (None = off) and whether a GradScaler is used."""

    device: torch.device
    amp: str
    dtype: torch.dtype | None
    use_scaler: bool
    emulated: bool = False

    @property
    def enabled(self) -> bool:
        return self.amp != "off"

    def autocast(self) -> contextlib.AbstractContextManager:
        """Return the autocast context for the forward pass (a no-op context when AMP is off)."""
        if not self.enabled:  # also where this torch has no autocast for the device at all
            return contextlib.nullcontext()
        return torch.amp.autocast(device_type=self.device.type, dtype=self.dtype)

    def __str__(self) -> str:
        if not self.enabled:
            what = "FP32 (không autocast)"
        else:
            what = f"autocast {self.amp}" + (" + GradScaler" if self.use_scaler else ", không GradScaler")
        return f"{self.device} · {what}" + (" (định dạng chỉ được giả lập trên thiết bị này)" if self.emulated else "")


def plan_amp(device: str | torch.device | None = None, amp: str = "off", *,
             scaler: bool | None = None, allow_emulated: bool = False) -> AmpPlan:
    """Check an AMP configuration for `device` and return it as an ``AmpPlan``; refuse what cannot work here."""
    device = pick_device(device)
    mode = _parse_amp(amp)
    if scaler is not None and not isinstance(scaler, bool):
        raise TypeError(f"scaler phải là True, False hoặc None (tự chọn), không phải {scaler!r}.")
    if not isinstance(allow_emulated, bool):
        raise TypeError(f"allow_emulated phải là True hoặc False, không phải {allow_emulated!r}.")
    if scaler and mode != "fp16":
        raise ValueError(f"GradScaler chỉ dùng với amp='fp16' (ở đây amp={mode!r}). BF16 có cùng dải số mũ với FP32 "
                         "nên gradient không bị underflow: bỏ scaler (scaler=None hoặc False).")
    if mode == "off":
        return AmpPlan(device, "off", None, False)
    emulated = False
    if mode == "fp16" and device.type == "cpu":
        if not allow_emulated:
            raise ValueError("amp='fp16' trên CPU: đa số CPU không có phép tính FP16 gốc nên thường chậm hơn FP32, "
                             "lại phải kèm GradScaler. Trên CPU hãy dùng amp='bf16' (không cần GradScaler); nếu chỉ "
                             "để minh hoạ, truyền allow_emulated=True.")
        emulated = True
    if mode == "bf16" and device.type == "cuda" and not has_native_bf16(device):
        index = device.index if device.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        if not allow_emulated:
            raise ValueError(
                f"{torch.cuda.get_device_name(index)} (compute capability {major}.{minor}) không có BF16 gốc — cần "
                "8.0+ (Ampere: A100, RTX 30xx trở lên). torch.cuda.is_bf16_supported() vẫn có thể trả True vì BF16 "
                "được giả lập: nhân ma trận chạy qua đường FP32 nên chậm hơn, còn convolution (cuDNN không có "
                "kernel BF16 dưới 8.0) và kernel của torch.compile (Triton cần sm_80) có thể chậm hơn nhiều hoặc "
                "báo lỗi. Dùng amp='fp16' (kèm GradScaler), hoặc allow_emulated=True nếu vẫn muốn thử."
            )
        emulated = True
    problem = _autocast_problem(str(device), mode)
    if problem is not None:
        raise ValueError(f"autocast {mode} không chạy trên {device} với torch {torch.__version__}: {problem}. "
                         f"Dùng amp='off' hoặc định dạng khác (gợi ý cho máy này: {_recommend(device)!r}).")
    use_scaler = mode == "fp16" if scaler is None else scaler
    if use_scaler:
        problem = _grad_scaler_problem(str(device))
        if problem is not None:
            raise ValueError(f"GradScaler không chạy trên {device} với torch {torch.__version__}: {problem}. Dùng "
                             "amp='bf16' (không cần GradScaler) hoặc scaler=False (gradient FP16 có thể underflow).")
    return AmpPlan(device, mode, _AMP_DTYPES[mode], use_scaler, emulated)


def autocast_dtypes(device: str | torch.device | None = "cpu", amp: str = "bf16", *,
                    allow_emulated: bool = False) -> Table:
    """Run common ops on FP32 inputs inside autocast on `device` and return the dtype each one produced."""
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
    return Table((f"phép toán trong autocast ({plan.device}, {plan.amp})", "dtype kết quả"), rows)


def amp_speed_verdict(fp32, amp) -> str:
    """Return lines comparing an FP32 with an AMP ``profile_train_step`` result: speed ratio, expectation, noise."""
    for name, profile in (("fp32", fp32), ("amp", amp)):
        if not all(hasattr(profile, attr) for attr in ("plan", "median_s", "noise")):
            raise TypeError(f"{name} phải là kết quả của profile_train_step(...), không phải {type(profile).__name__}.")
    if fp32.plan.enabled:
        raise ValueError(f"fp32 phải là bước FP32 (amp='off'), ở đây là {fp32.plan.amp!r}.")
    if fp32.plan.device != amp.plan.device:
        raise ValueError(f"Hai bước phải đo trên cùng thiết bị, ở đây là {fp32.plan.device} và {amp.plan.device}.")
    device, label = amp.plan.device, amp.plan.amp if amp.plan.enabled else "fp32"
    ratio = fp32.median_s / amp.median_s
    speed = (f"nhanh hơn FP32 {ratio:.1f} lần" if ratio >= 1.1 else f"CHẬM hơn FP32 {1 / ratio:.1f} lần"
             if ratio <= 1 / 1.1 else "và FP32 gần như bằng nhau (±10%)")
    lines = [f"→ {label} {speed} trên {device}, với mô hình này"]
    noisy = [name for name, p in (("fp32", fp32), (label, amp)) if p.noise]   # each profile prints its own ⚠️ line
    if device.type == "cpu" and label == "bf16" and ratio >= 1.1:
        hardware = has_native_bf16(device)
        if hardware is False:
            lines.append("Trái với dự đoán: CPU này không báo lệnh bf16 (AVX512_BF16/AMX), nên bf16 thường chậm hơn. "
                         + ("Số đo ở trên bị nhiễu, đó là lời giải thích đầu tiên." if noisy else
                            "Với mô hình nhỏ, khác biệt nằm ở overhead chứ không ở phép nhân: chạy lại để xem có lặp lại không."))
        elif hardware is None:
            lines.append("Khoá học không kiểm tra được CPU này có lệnh bf16 hay không, nên không biết trước bf16 "
                         "sẽ nhanh hay chậm hơn.")
    if device.type == "cpu" and label == "bf16" and ratio <= 1 / 1.1 and has_native_bf16(device) is True:
        lines.append("CPU này có lệnh bf16, nhưng với mô hình nhỏ thời gian nằm ở overhead (ép kiểu, gọi từng phép) "
                     "chứ không ở phép nhân ma trận, nên bf16 vẫn có thể chậm hơn"
                     + (". Lần này số đo còn bị nhiễu (dòng dưới), nên chưa kết luận được." if noisy else "."))
    if noisy:
        lines.append("⚠️ số đo nhiễu: xem dòng ⚠️ của " + " và ".join(f"bước {name}" for name in noisy) + " ở trên.")
    return "\n".join(lines)

"""Exercise 5: a mixed-precision loop (autocast, GradScaler for fp16), trained twice and compared with FP32."""

from __future__ import annotations

import contextlib
import math
from unittest import mock

import torch

from ..device import pick_device
from ..memory import format_bytes
from ..training import make_classification_data, make_mlp, recommend_amp
from ._core import Exercise, Report, is_blank, on_gpu_note

_STEPS = 20
_TOLERANCE = {torch.bfloat16: 0.05, torch.float16: 0.02}  # largest |loss_amp - loss_fp32| / loss_fp32[0]


def _amp_dtype(device: torch.device) -> torch.dtype:
    """Return the autocast dtype used on `device`: float16 on CUDA (with GradScaler), else bfloat16."""
    return torch.float16 if device.type == "cuda" or recommend_amp(device) == "fp16" else torch.bfloat16


@contextlib.contextmanager
def _watch_scaler():
    """Yield mocks wrapping GradScaler.scale / step / update: their calls are recorded, their work still done."""
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(mock.patch.object(torch.amp.GradScaler, name, autospec=True,
                                                           side_effect=getattr(torch.amp.GradScaler, name)))
               for name in ("scale", "step", "update")}


def _losses(report: Report, what: str, value) -> list[float]:
    if value is None:
        report.missing_part("train_amp chưa trả về danh sách loss (thiếu return losses).", stop=True)
    if not isinstance(value, (list, tuple)) or not value:
        report.problem(f"{what} phải trả về một danh sách loss (mỗi bước một số), không phải {type(value).__name__}.",
                       stop=True)
    out = []
    for item in value:
        if isinstance(item, torch.Tensor) and item.grad_fn is not None:
            report.problem("danh sách loss giữ tensor còn gắn đồ thị autograd: mỗi bước giữ lại cả đồ thị trong "
                           "bộ nhớ (một nguyên nhân OOM). Lưu loss.item().", stop=True)
        if isinstance(item, torch.Tensor) and item.numel() != 1:
            report.problem("mỗi phần tử của danh sách loss phải là một số.", stop=True)
        if isinstance(item, bool) or not isinstance(item, (int, float, torch.Tensor)):
            report.problem(f"loss phải là số (loss.item()), không phải {type(item).__name__}.", stop=True)
        out.append(float(item.detach().float().cpu()) if isinstance(item, torch.Tensor) else float(item))
    return out


def _run(report: Report, train_amp, device: torch.device, dtype: torch.dtype | None):
    """Train a fresh seeded MLP with the learner's loop; return its losses, output dtypes and GradScaler calls."""
    x, y = make_classification_data(256, 32, 4, seed=0, device=device)
    model = make_mlp(32, 4, hidden=64, depth=2, seed=0, device=device)
    seen: set[torch.dtype] = set()
    hook = model.register_forward_hook(lambda _m, _i, out: seen.add(out.dtype))
    what = f"train_amp(model, x, y, {'None' if dtype is None else dtype}, steps={_STEPS})"
    try:
        with _watch_scaler() as calls:
            value = report.call(what, train_amp, model, x, y, dtype, steps=_STEPS)
    finally:
        hook.remove()
    counts = {name: called.call_count for name, called in calls.items()}
    counts["enabled"] = any(call.args[0].is_enabled() for call in calls["scale"].call_args_list)
    return _losses(report, what, value), seen, counts


def _check_autocast(report: Report, amp_dtype, short: str, seen32: set, seen_amp: set, counts: dict) -> None:
    if seen32 != {torch.float32}:
        report.problem(f"với amp_dtype=None, đầu ra của model là {sorted(map(str, seen32))}: phải tắt autocast "
                       "(enabled=amp_dtype is not None) để có đường FP32 để so sánh.")
    if amp_dtype not in seen_amp:
        report.problem(f"với amp_dtype={short}, đầu ra của model vẫn là {sorted(map(str, seen_amp))}: autocast chưa bật "
                       f"quanh forward. Dùng `with torch.autocast(device_type=x.device.type, dtype=amp_dtype):`.")
    scaled = counts["scale"] and counts["enabled"]
    if amp_dtype == torch.float16 and not scaled:
        report.problem("fp16 cần GradScaler: scaler = torch.amp.GradScaler(device.type), rồi "
                       "scaler.scale(loss).backward(), scaler.step(optimizer), scaler.update(). Không có nó, "
                       "gradient nhỏ bị làm tròn về 0 trong fp16.")
    elif amp_dtype == torch.float16 and not (counts["step"] and counts["update"]):
        report.problem("có scaler.scale(loss) nhưng thiếu scaler.step(optimizer) / scaler.update(): gradient vẫn "
                       "đang bị nhân với hệ số scale khi optimizer cập nhật.")
    elif amp_dtype != torch.float16 and scaled:
        report.note(f"{short} không cần GradScaler (cùng dải số mũ với FP32); dùng cũng không sai, chỉ thừa.")


def _evaluate(report: Report, train_amp=None) -> None:
    report.require_function(train_amp, "train_amp(model, x, y, amp_dtype, steps)")
    device = pick_device()
    amp_dtype = _amp_dtype(device)
    short = str(amp_dtype).removeprefix("torch.")
    fp32, seen32, _ = _run(report, train_amp, device, None)
    amp, seen_amp, counts = _run(report, train_amp, device, amp_dtype)
    if not all(math.isfinite(v) for v in fp32):
        report.problem("loss FP32 thành NaN/inf: kiểm tra learning rate.", stop=True)
    if not seen32:
        report.problem("train_amp không gọi model(x) (bộ chấm không thấy lần forward nào).", stop=True)
    _check_autocast(report, amp_dtype, short, seen32, seen_amp, counts)
    if report.problems:
        return
    if not all(math.isfinite(v) for v in amp):
        report.problem(f"loss {short} thành NaN/inf.", stop=True)
    if not min(fp32[-3:]) < fp32[0]:
        report.problem(f"loss FP32 không giảm ({fp32[0]:.3f} → {fp32[-1]:.3f}): có gọi optimizer.zero_grad(), "
                       "backward() và step() mỗi bước?", stop=True)
    if len(amp) != len(fp32):
        report.problem("hai lần chạy trả về số loss khác nhau: mỗi bước một loss.", stop=True)
    gap = max(abs(a - b) for a, b in zip(amp, fp32, strict=True)) / fp32[0]
    if gap > _TOLERANCE[amp_dtype]:
        report.problem(f"loss {short} lệch FP32 tới {gap:.0%} (cho phép {_TOLERANCE[amp_dtype]:.0%}): loss tính trong "
                       "autocast? Với fp16, đừng gọi optimizer.step() trực tiếp mà scaler.step(optimizer).", stop=True)
    report.success(f"autocast {short} bật đúng chỗ; loss {fp32[0]:.3f} → FP32 {fp32[-1]:.4f} / {short} {amp[-1]:.4f} "
                   f"sau {len(fp32)} bước (lệch tối đa {gap:.1%} loss ban đầu).")
    on_gpu_note(report, device,
                "autocast dùng float16 và cần GradScaler (T4 không có bf16 gốc); ô %%gpu bên dưới đo đỉnh bộ nhớ "
                "FP32 và AMP. Trên CPU, bf16 tiết kiệm bộ nhớ activation nhưng chưa chắc nhanh hơn FP32.")


ex5 = Exercise(
    "ex5", "Bài 5 · Vòng train mixed precision", _evaluate,
    hints=[
        "Mỗi bước: optimizer.zero_grad(); trong `with torch.autocast(device_type=x.device.type, dtype=amp_dtype, "
        "enabled=amp_dtype is not None):` tính loss; rồi scaler.scale(loss).backward(); scaler.step(optimizer); "
        "scaler.update(); lưu loss.item().",
        "scaler = torch.amp.GradScaler(x.device.type, enabled=(amp_dtype == torch.float16)): chỉ fp16 cần scale; "
        "với bf16 / FP32 scaler tắt và các lời gọi thành bình thường.",
    ],
)


def _evaluate_gpu(report: Report, peaks=None) -> None:
    report.require_gpu()
    if is_blank(peaks) or (isinstance(peaks, dict) and not peaks):
        report.missing_part("chưa đo peaks.", stop=True)
    if not isinstance(peaks, dict) or set(peaks) != {"fp32", "amp"}:
        report.problem("peaks phải là dict {'fp32': byte, 'amp': byte} (torch.cuda.max_memory_allocated()).",
                       stop=True)
    for name, value in peaks.items():
        if is_blank(value):
            report.missing_part(f"chưa đo peaks[{name!r}].", stop=True)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            report.problem(f"peaks[{name!r}] phải là số byte > 0, không phải {value!r}.", stop=True)
    fp32, amp = peaks["fp32"], peaks["amp"]
    if amp >= fp32:
        report.problem(f"đỉnh AMP ({format_bytes(amp)}) không thấp hơn FP32 ({format_bytes(fp32)}). "
                       "max_memory_allocated() là đỉnh từ lần reset gần nhất: gọi torch.cuda.reset_peak_memory_stats() "
                       "trước MỖI lần đo, và xoá model/dữ liệu của lần trước.", stop=True)
    report.success(f"đỉnh bộ nhớ FP32 {format_bytes(fp32)}, AMP {format_bytes(amp)}: giảm {1 - amp / fp32:.0%} "
                   "(đo trên GPU này).")
    report.note("AMP giảm bộ nhớ activation (lưu fp16), nhưng vẫn giữ trọng số FP32 và thêm bản fp16 của chúng, "
                "nên mức giảm tổng thường dưới 50%.")


ex5_gpu = Exercise(
    "ex5_gpu", "Bài 5 (GPU) · Đỉnh bộ nhớ FP32 và AMP", _evaluate_gpu,
    hints=["Trước mỗi lần chạy: torch.cuda.reset_peak_memory_stats(); sau khi chạy: "
           "peaks[name] = torch.cuda.max_memory_allocated()."],
    gpu=True,
)

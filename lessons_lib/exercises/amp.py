"""Exercise 5: a mixed-precision training loop (autocast, plus GradScaler for fp16), checked against FP32.

The checker trains two identical seeded MLPs with the learner's ``train_amp``: once in FP32
(``amp_dtype=None``) and once with autocast. It watches the model's output dtype (autocast on or off?),
counts GradScaler calls, and compares the two loss curves.
"""

from __future__ import annotations

import contextlib
import math

import torch

from ..device import pick_device
from ..memory import format_bytes
from ..training import make_classification_data, make_mlp, recommend_amp
from ._core import Exercise, Report, is_blank, on_gpu_note

STEPS = 20
_TOLERANCE = {torch.bfloat16: 0.05, torch.float16: 0.02}  # largest |loss_amp - loss_fp32| / loss_fp32[0]


def amp_dtype_for(device: str | torch.device | None = None) -> torch.dtype:
    """Return the autocast dtype this exercise uses on `device`: float16 on CUDA (with GradScaler), else bfloat16."""
    device = pick_device(device)
    if device.type == "cuda":
        return torch.float16
    return torch.float16 if recommend_amp(device) == "fp16" else torch.bfloat16


@contextlib.contextmanager
def _count_scaler_calls():
    """Count GradScaler.scale / step / update calls (and whether the scaler was enabled) while active."""
    cls = torch.amp.GradScaler
    counts = {"scale": 0, "step": 0, "update": 0, "enabled": False}
    originals = {name: getattr(cls, name) for name in ("scale", "step", "update")}

    def wrap(name, original):
        def wrapper(self, *args, **kwargs):
            counts[name] += 1
            counts["enabled"] |= bool(self.is_enabled())
            return original(self, *args, **kwargs)
        return wrapper

    for name, original in originals.items():
        setattr(cls, name, wrap(name, original))
    try:
        yield counts
    finally:
        for name, original in originals.items():
            setattr(cls, name, original)


def _losses(report: Report, what: str, value) -> list[float]:
    if value is None:
        report.missing_part("train_amp chưa trả về danh sách loss (thiếu return losses).",
                            "train_amp does not return the list of losses yet (no return losses).", stop=True)
    if not isinstance(value, (list, tuple)) or not value:
        report.problem(f"{what} phải trả về một danh sách loss (mỗi bước một số), không phải {type(value).__name__}.",
                       f"{what} must return a list of losses (one number per step), not {type(value).__name__}.",
                       stop=True)
    out = []
    for item in value:
        if isinstance(item, torch.Tensor):
            if item.grad_fn is not None:
                report.problem("danh sách loss giữ tensor còn gắn đồ thị autograd: mỗi bước giữ lại cả đồ thị trong "
                               "bộ nhớ (một nguyên nhân OOM). Lưu loss.item().",
                               "the loss list holds tensors still attached to the autograd graph: every step keeps its "
                               "graph in memory (a cause of OOM). Store loss.item().", stop=True)
            if item.numel() != 1:
                report.problem("mỗi phần tử của danh sách loss phải là một số.", "each loss must be one number.",
                               stop=True)
            out.append(float(item.detach().float().cpu()))
        elif isinstance(item, (int, float)) and not isinstance(item, bool):
            out.append(float(item))
        else:
            report.problem(f"loss phải là số (loss.item()), không phải {type(item).__name__}.",
                           f"a loss must be a number (loss.item()), not {type(item).__name__}.", stop=True)
    return out


def _evaluate(report: Report, train_amp=None) -> None:
    report.require_function(train_amp, "train_amp(model, x, y, amp_dtype, steps)")
    device = pick_device()
    amp_dtype = amp_dtype_for(device)
    x, y = make_classification_data(256, 32, 4, seed=0, device=device)
    runs = {}
    for label, dtype in (("fp32", None), ("amp", amp_dtype)):
        model = make_mlp(32, 4, hidden=64, depth=2, seed=0, device=device)
        seen: set[torch.dtype] = set()
        hook = model.register_forward_hook(lambda _m, _i, out, seen=seen: seen.add(out.dtype))
        try:
            with _count_scaler_calls() as counts:
                what = f"train_amp(model, x, y, {'None' if dtype is None else dtype}, steps={STEPS})"
                value = report.call(what, train_amp, model, x, y, dtype, steps=STEPS)
        finally:
            hook.remove()
        runs[label] = (_losses(report, what, value), seen, counts)
    (fp32, seen32, _), (amp, seen_amp, counts) = runs["fp32"], runs["amp"]
    short = str(amp_dtype).removeprefix("torch.")
    if not all(math.isfinite(v) for v in fp32):
        report.problem("loss FP32 thành NaN/inf: kiểm tra learning rate.", "the FP32 loss became NaN/inf: check the "
                       "learning rate.", stop=True)
    if not seen32:
        report.problem("train_amp không gọi model(x) (bộ chấm không thấy lần forward nào).",
                       "train_amp never calls model(x) (the checker saw no forward pass).", stop=True)
    if seen32 != {torch.float32}:
        report.problem(f"với amp_dtype=None, đầu ra của model là {sorted(map(str, seen32))}: phải tắt autocast "
                       "(enabled=amp_dtype is not None) để có đường FP32 để so sánh.",
                       f"with amp_dtype=None the model outputs {sorted(map(str, seen32))}: autocast must be off "
                       "(enabled=amp_dtype is not None) to get the FP32 baseline.")
    if amp_dtype not in seen_amp:
        report.problem(f"với amp_dtype={short}, đầu ra của model vẫn là {sorted(map(str, seen_amp))}: autocast chưa bật "
                       f"quanh forward. Dùng `with torch.autocast(device_type=x.device.type, dtype=amp_dtype):`.",
                       f"with amp_dtype={short} the model still outputs {sorted(map(str, seen_amp))}: autocast is not "
                       "on around the forward. Use `with torch.autocast(device_type=x.device.type, dtype=amp_dtype):`.")
    if amp_dtype == torch.float16:
        if not (counts["scale"] and counts["enabled"]):
            report.problem("fp16 cần GradScaler: scaler = torch.amp.GradScaler(device.type), rồi "
                           "scaler.scale(loss).backward(), scaler.step(optimizer), scaler.update(). Không có nó, "
                           "gradient nhỏ bị làm tròn về 0 trong fp16.",
                           "fp16 needs a GradScaler: scaler = torch.amp.GradScaler(device.type), then "
                           "scaler.scale(loss).backward(), scaler.step(optimizer), scaler.update(). Without it small "
                           "gradients round to 0 in fp16.")
        elif not counts["step"] or not counts["update"]:
            report.problem("có scaler.scale(loss) nhưng thiếu scaler.step(optimizer) / scaler.update(): gradient vẫn "
                           "đang bị nhân với hệ số scale khi optimizer cập nhật.",
                           "scaler.scale(loss) is there but scaler.step(optimizer) / scaler.update() is missing: the "
                           "gradients are still multiplied by the scale when the optimizer updates.")
    elif counts["scale"] and counts["enabled"]:
        report.note(f"{short} không cần GradScaler (cùng dải số mũ với FP32); dùng cũng không sai, chỉ thừa.",
                    f"{short} needs no GradScaler (FP32's exponent range); using one is not wrong, just unneeded.")
    if report.problems:
        return
    if not all(math.isfinite(v) for v in amp):
        report.problem(f"loss {short} thành NaN/inf.", f"the {short} loss became NaN/inf.", stop=True)
    if not min(fp32[-3:]) < fp32[0]:
        report.problem(f"loss FP32 không giảm ({fp32[0]:.3f} → {fp32[-1]:.3f}): có gọi optimizer.zero_grad(), "
                       "backward() và step() mỗi bước?",
                       f"the FP32 loss does not go down ({fp32[0]:.3f} → {fp32[-1]:.3f}): do you call "
                       "optimizer.zero_grad(), backward() and step() every step?", stop=True)
    if len(amp) != len(fp32):
        report.problem("hai lần chạy trả về số loss khác nhau: mỗi bước một loss.",
                       "the two runs returned different numbers of losses: one loss per step.", stop=True)
    gap = max(abs(a - b) for a, b in zip(amp, fp32, strict=True)) / fp32[0]
    if gap > _TOLERANCE[amp_dtype]:
        report.problem(f"loss {short} lệch FP32 tới {gap:.0%} (cho phép {_TOLERANCE[amp_dtype]:.0%}): loss tính trong "
                       "autocast? Với fp16, đừng gọi optimizer.step() trực tiếp mà scaler.step(optimizer).",
                       f"the {short} loss is {gap:.0%} away from FP32 (allowed {_TOLERANCE[amp_dtype]:.0%}): with fp16, "
                       "call scaler.step(optimizer), not optimizer.step() directly.")
        return
    report.success(f"autocast {short} bật đúng chỗ; loss {fp32[0]:.3f} → FP32 {fp32[-1]:.4f} / {short} {amp[-1]:.4f} "
                   f"sau {len(fp32)} bước (lệch tối đa {gap:.1%} loss ban đầu).",
                   f"autocast {short} on in the right place; loss {fp32[0]:.3f} → FP32 {fp32[-1]:.4f} / {short} "
                   f"{amp[-1]:.4f} after {len(fp32)} steps (largest gap {gap:.1%} of the initial loss).")
    on_gpu_note(report, device,
                "autocast dùng float16 và cần GradScaler (T4 không có bf16 gốc); ô %%gpu bên dưới đo đỉnh bộ nhớ "
                "FP32 và AMP. Trên CPU, bf16 tiết kiệm bộ nhớ activation nhưng chưa chắc nhanh hơn FP32.",
                "autocast uses float16 with a GradScaler (a T4 has no native bf16); the %%gpu cell below measures the "
                "peak memory of FP32 and AMP. On a CPU, bf16 saves activation memory but is not necessarily faster.")


ex5 = Exercise(
    "ex5",
    ("Bài 5 · Vòng train mixed precision", "Exercise 5 · A mixed-precision training loop"),
    _evaluate,
    hints=[
        ("Mỗi bước: optimizer.zero_grad(); trong `with torch.autocast(device_type=x.device.type, dtype=amp_dtype, "
         "enabled=amp_dtype is not None):` tính loss; rồi scaler.scale(loss).backward(); scaler.step(optimizer); "
         "scaler.update(); lưu loss.item().",
         "Each step: optimizer.zero_grad(); inside `with torch.autocast(device_type=x.device.type, dtype=amp_dtype, "
         "enabled=amp_dtype is not None):` compute the loss; then scaler.scale(loss).backward(); "
         "scaler.step(optimizer); scaler.update(); store loss.item()."),
        ("scaler = torch.amp.GradScaler(x.device.type, enabled=(amp_dtype == torch.float16)): chỉ fp16 cần scale; "
         "với bf16 / FP32 scaler tắt và các lời gọi thành bình thường.",
         "scaler = torch.amp.GradScaler(x.device.type, enabled=(amp_dtype == torch.float16)): only fp16 needs "
         "scaling; for bf16 / FP32 the disabled scaler passes everything through."),
    ],
    solution='''
def train_amp(model, x, y, amp_dtype, steps=20):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(x.device.type, enabled=(amp_dtype == torch.float16))
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        with torch.autocast(device_type=x.device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()     # fp16: nhân loss lên để gradient không về 0
        scaler.step(optimizer)            # unscale gradient rồi mới cập nhật
        scaler.update()
        losses.append(loss.item())        # .item(): không giữ đồ thị
    return losses
''',
)


def _evaluate_gpu(report: Report, peaks=None) -> None:
    if not torch.cuda.is_available():
        report.problem("phần này cần GPU CUDA; máy này không có (ô %%gpu lẽ ra đã bỏ qua nó).",
                       "this part needs a CUDA GPU; this machine has none (the %%gpu cell should have skipped it).",
                       stop=True)
    if is_blank(peaks) or (isinstance(peaks, dict) and not peaks):
        report.missing_part("chưa đo peaks.", "peaks not measured yet.", stop=True)
    if not isinstance(peaks, dict) or set(peaks) != {"fp32", "amp"}:
        report.problem("peaks phải là dict {'fp32': byte, 'amp': byte} (torch.cuda.max_memory_allocated()).",
                       "peaks must be a dict {'fp32': bytes, 'amp': bytes} (torch.cuda.max_memory_allocated()).",
                       stop=True)
    for name, value in peaks.items():
        if is_blank(value):
            report.missing_part(f"chưa đo peaks[{name!r}].", f"peaks[{name!r}] not measured yet.", stop=True)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            report.problem(f"peaks[{name!r}] phải là số byte > 0, không phải {value!r}.",
                           f"peaks[{name!r}] must be a byte count > 0, not {value!r}.", stop=True)
    fp32, amp = peaks["fp32"], peaks["amp"]
    if amp >= fp32:
        report.problem(f"đỉnh AMP ({format_bytes(amp)}) không thấp hơn FP32 ({format_bytes(fp32)}). "
                       "max_memory_allocated() là đỉnh từ lần reset gần nhất: gọi torch.cuda.reset_peak_memory_stats() "
                       "trước MỖI lần đo, và xoá model/dữ liệu của lần trước.",
                       f"the AMP peak ({format_bytes(amp)}) is not below FP32 ({format_bytes(fp32)}). "
                       "max_memory_allocated() is the peak since the last reset: call torch.cuda.reset_peak_memory_stats() "
                       "before EACH measurement, and delete the previous model/data.")
        return
    report.success(f"đỉnh bộ nhớ FP32 {format_bytes(fp32)}, AMP {format_bytes(amp)}: giảm {1 - amp / fp32:.0%} "
                   "(đo trên GPU này).",
                   f"peak memory FP32 {format_bytes(fp32)}, AMP {format_bytes(amp)}: {1 - amp / fp32:.0%} less "
                   "(measured on this GPU).")
    report.note("AMP giảm bộ nhớ activation (lưu fp16), nhưng vẫn giữ trọng số FP32 và thêm bản fp16 của chúng, "
                "nên mức giảm tổng thường dưới 50%.",
                "AMP halves the activations (kept in fp16) but keeps FP32 weights plus their fp16 copies, so the total "
                "saving is usually below 50%.")


ex5_gpu = Exercise(
    "ex5_gpu",
    ("Bài 5 (GPU) · Đỉnh bộ nhớ FP32 và AMP", "Exercise 5 (GPU) · Peak memory, FP32 vs AMP"),
    _evaluate_gpu,
    hints=[("Trước mỗi lần chạy: torch.cuda.reset_peak_memory_stats(); sau khi chạy: "
            "peaks[name] = torch.cuda.max_memory_allocated().",
            "Before each run: torch.cuda.reset_peak_memory_stats(); after it: "
            "peaks[name] = torch.cuda.max_memory_allocated().")],
    solution='''
peaks = {}
for name, dtype in (("fp32", None), ("amp", torch.float16)):
    model5 = make_mlp(1024, 10, hidden=4096, depth=4, device="cuda")
    xg, yg = make_classification_data(16384, 1024, 10, device="cuda")
    torch.cuda.reset_peak_memory_stats()             # đỉnh tính từ đây
    train_amp(model5, xg, yg, dtype, steps=3)
    peaks[name] = torch.cuda.max_memory_allocated()
    del model5, xg, yg                               # dọn trước lần đo sau
''',
    gpu=True,
)

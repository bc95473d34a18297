"""Exercise 4: the largest batch whose saved activations fit a budget; on a GPU, a real capped OOM and clean-up."""

from __future__ import annotations

import torch

from ..device import pick_device
from ..memory import SavedTensorMeter, format_bytes
from ._core import Exercise, Report, is_blank, on_gpu_note

_MAX_BATCH = 1 << 20
_SLACK = 2**20  # 1 MiB: small allocations other code may keep


def _in_features(model: object) -> int | None:
    first = next((m for m in model.modules() if isinstance(m, torch.nn.Linear)), None)
    return None if first is None else first.in_features


def _activation_bytes(model: torch.nn.Module, batch_size: int) -> int:
    """Return the bytes autograd saves for ``model(torch.randn(batch_size, in_features))`` (weights excluded)."""
    x = torch.randn(batch_size, _in_features(model), device=next(model.parameters()).device)
    with SavedTensorMeter(exclude=model) as meter:
        out = model(x)  # noqa: F841 - kept alive so the graph (and its saved tensors) is measured
        return meter.live_bytes


def _largest_fitting_batch(model: torch.nn.Module, budget: int) -> int:
    """Return the largest batch whose saved activations are ≤ `budget` bytes (0 if even 1 does not fit)."""
    if _activation_bytes(model, 1) > budget:
        return 0
    low, high = 1, 2
    while high <= _MAX_BATCH and _activation_bytes(model, high) <= budget:
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if _activation_bytes(model, mid) <= budget else (low, mid)
    return low


def _check_fits(report: Report, fits, model, budget: int, right: int) -> None:
    report.require_function(fits, "fits(batch_size) -> bool")
    for size in sorted({1, max(1, right // 2), right, right + 1, 2 * right + 2} - {0}):
        got = report.call(f"fits({size})", fits, size)
        report.require_return(got, "fits")
        if not isinstance(got, (bool, torch.Tensor)) or (isinstance(got, torch.Tensor) and got.numel() != 1):
            report.problem(f"fits({size}) phải trả về True/False, không phải {type(got).__name__}.", stop=True)
        need = _activation_bytes(model, size)
        if bool(got) != (need <= budget):
            report.problem(
                f"fits({size}) = {bool(got)}, nhưng batch {size} lưu {format_bytes(need)} activation so với ngân "
                f"sách {format_bytes(budget)} ({'không vừa' if got else 'vẫn vừa'}). Đo bằng "
                "SavedTensorMeter(exclude=model4) quanh model4(x) và so sánh meter.live_bytes <= BUDGET.", stop=True)


def _check_largest(report: Report, largest, model, budget: int, right: int) -> None:
    if isinstance(largest, bool) or not isinstance(largest, int):
        report.problem(f"largest phải là một số nguyên (batch size), không phải {type(largest).__name__}.", stop=True)
    power = 1 << (right.bit_length() - 1) if right else 0
    if largest == right + 1:
        report.problem(f"lệch một: batch {largest} đã vượt ngân sách; lớn nhất còn vừa là {largest - 1}.")
    elif largest == power != right:
        report.problem(f"{largest} là kết quả của nhân đôi / chia đôi, nhưng còn batch lớn hơn vẫn vừa (giữa "
                       f"{power} và {2 * power}): tìm nhị phân trong khoảng đó.")
    elif largest > right:
        report.problem(f"batch {largest} không vừa: nó lưu {format_bytes(_activation_bytes(model, largest))} "
                       f"> {format_bytes(budget)}.")
    elif largest < right:
        report.problem(f"batch {largest} vừa nhưng chưa phải lớn nhất: batch {largest + 1} vẫn vừa.")


def _evaluate(report: Report, fits=None, largest=None, model=None, budget=None) -> None:
    if is_blank(model) or is_blank(budget):
        report.problem("gọi ex4.check(fits, largest, model4, BUDGET): thiếu model hoặc ngân sách.", stop=True)
    if not isinstance(model, torch.nn.Module) or _in_features(model) is None:
        report.problem("model phải là model4 (một MLP bắt đầu bằng nn.Linear).", stop=True)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        report.problem(f"BUDGET phải là số byte nguyên dương, không phải {budget!r}.", stop=True)
    if is_blank(fits):
        report.missing_part("chưa viết hàm fits(batch_size).")
    if is_blank(largest):
        report.missing_part("chưa tìm largest.")
    if is_blank(fits) and is_blank(largest):
        return
    right = _largest_fitting_batch(model, budget)
    if not is_blank(fits):
        _check_fits(report, fits, model, budget, right)
    if not is_blank(largest):
        _check_largest(report, largest, model, budget, right)
    if report.problems or report.missing:
        return
    report.success(f"batch lớn nhất vừa {format_bytes(budget)} là {right} (mỗi mẫu lưu khoảng "
                   f"{format_bytes(_activation_bytes(model, 1))} activation, đo bằng SavedTensorMeter).")
    on_gpu_note(report, pick_device(),
                "ngân sách là VRAM còn trống, và vượt nó là torch.OutOfMemoryError thật (ô %%gpu bên dưới). "
                "Ngoài activation còn trọng số, gradient, trạng thái optimizer và bộ nhớ tạm của kernel.")


ex4 = Exercise(
    "ex4", "Bài 4 · Batch lớn nhất vừa bộ nhớ", _evaluate,
    hints=[
        "fits(b): tạo x = torch.randn(b, 64, device=device); bên trong `with SavedTensorMeter(exclude=model4) as m:` "
        "chạy out = model4(x) (giữ out, nếu không đồ thị bị giải phóng ngay và m đọc 0), rồi so m.live_bytes <= BUDGET.",
        "Tìm largest: nhân đôi b từ 1 tới khi fits(b) sai (luôn đặt trần, vd b <= 2**16), rồi tìm nhị phân giữa "
        "b/2 (vừa) và b (không vừa).",
    ],
)


def _evaluate_gpu(report: Report, baseline=None, before_error=None, after_cleanup=None) -> None:
    report.require_gpu()
    values = {"baseline": baseline, "before_error": before_error, "after_cleanup": after_cleanup}
    report.require_filled(**values)
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int):
            report.problem(f"{name} phải là số byte (torch.cuda.memory_allocated()), không phải "
                           f"{type(value).__name__}.", stop=True)
    if before_error <= baseline and after_cleanup + _SLACK < baseline:
        report.problem(f"baseline ({format_bytes(baseline)}) còn lớn hơn cả lúc đã dọn xong "
                       f"({format_bytes(after_cleanup)}): khi đọc baseline, các tensor của lần chạy TRƯỚC vẫn còn "
                       "sống. Trong ô OOM, bỏ list cũ (tensors = []) rồi mới đọc torch.cuda.memory_allocated(), "
                       "sau đó chạy lại ô OOM và ô này.", stop=True)
    if before_error <= baseline:
        report.problem("before_error không lớn hơn baseline: đọc memory_allocated() NGAY TRƯỚC mỗi lần cấp phát trong "
                       "vòng lặp (khi danh sách đã chứa các tensor trước).")
    if after_cleanup > baseline + _SLACK:
        report.problem(f"sau khi dọn vẫn còn {format_bytes(after_cleanup - baseline)} so với lúc đầu: còn tham chiếu "
                       "tới các tensor (tensors.clear() hoặc del tensors) — empty_cache() không trả được bộ nhớ của "
                       "tensor còn sống.")
    if report.problems:
        return
    report.success(f"trước lỗi: {format_bytes(before_error)} allocated; sau del: {format_bytes(after_cleanup)} "
                   f"(lúc đầu {format_bytes(baseline)}); reserved bây giờ {format_bytes(torch.cuda.memory_reserved())}.")
    report.note("memory_allocated giảm khi tensor mất tham chiếu cuối cùng; memory_reserved chỉ giảm khi gọi "
                "torch.cuda.empty_cache().")


ex4_gpu = Exercise(
    "ex4_gpu", "Bài 4 (GPU) · Gây OOM an toàn rồi dọn dẹp", _evaluate_gpu,
    hints=["Dọn dẹp sau khi RA KHỎI khối except: tensors.clear() (bỏ mọi tham chiếu; khác với del tensors, chạy lại "
           "ô vẫn được), torch.cuda.empty_cache(), rồi đọc lại torch.cuda.memory_allocated()."],
    gpu=True,
)

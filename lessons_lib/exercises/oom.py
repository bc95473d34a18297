"""Exercise 4: out of memory. CPU: the largest batch whose saved activations fit a budget (measured with
`SavedTensorMeter`). GPU: trigger a real, capped CUDA OOM (caught as ``torch.OutOfMemoryError``), read
``memory_allocated`` before it, clean up.
"""

from __future__ import annotations

import torch

from ..device import pick_device
from ..i18n import tr
from ..memory import SavedTensorMeter, format_bytes
from ._core import Exercise, Report, is_blank, on_gpu_note

_MAX_BATCH = 1 << 20


def _in_features(model: torch.nn.Module) -> int | None:
    first = next((m for m in model.modules() if isinstance(m, torch.nn.Linear)), None)
    return None if first is None else first.in_features


def _check_model_and_int(model, name: str, value) -> None:
    if not isinstance(model, torch.nn.Module) or _in_features(model) is None:
        raise TypeError(tr("model phải là một nn.Module có nn.Linear (vd make_mlp(64, 10)), không phải "
                           f"{type(model).__name__}",
                           f"model must be an nn.Module with an nn.Linear (e.g. make_mlp(64, 10)), not "
                           f"{type(model).__name__}"))
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(tr(f"{name} phải là số nguyên, không phải {type(value).__name__}",
                           f"{name} must be an int, not {type(value).__name__}"))
    if value < 1:
        raise ValueError(tr(f"{name} phải ≥ 1, nhận {value}", f"{name} must be >= 1, got {value}"))


def activation_bytes(model: torch.nn.Module, batch_size: int) -> int:
    """Return the bytes autograd saves for ``model(torch.randn(batch_size, in_features))`` (weights excluded).

    Raises:
        TypeError: `model` is not a module with an ``nn.Linear``, or `batch_size` is not an int.
        ValueError: `batch_size` < 1.
    """
    _check_model_and_int(model, "batch_size", batch_size)
    device = next(model.parameters()).device
    x = torch.randn(batch_size, _in_features(model), device=device)
    with SavedTensorMeter(exclude=model) as meter:
        out = model(x)
        held = meter.live_bytes
    del out
    return held


def largest_fitting_batch(model: torch.nn.Module, budget: int) -> int:
    """Return the largest batch whose saved activations are ≤ `budget` bytes (0 if even 1 does not fit).

    Raises:
        TypeError / ValueError: as `activation_bytes`, for `model` and `budget` (bytes, ≥ 1).
    """
    _check_model_and_int(model, "budget", budget)
    if activation_bytes(model, 1) > budget:
        return 0
    low, high = 1, 2
    while high <= _MAX_BATCH and activation_bytes(model, high) <= budget:
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if activation_bytes(model, mid) <= budget else (low, mid)
    return low


def _evaluate(report: Report, fits=None, largest=None, model=None, budget=None) -> None:
    if is_blank(model) or is_blank(budget):
        report.problem("gọi ex4.check(fits, largest, model4, BUDGET): thiếu model hoặc ngân sách.",
                       "call ex4.check(fits, largest, model4, BUDGET): the model or the budget is missing.", stop=True)
    if not isinstance(model, torch.nn.Module) or _in_features(model) is None:
        report.problem("model phải là model4 (một MLP bắt đầu bằng nn.Linear).",
                       "model must be model4 (an MLP starting with nn.Linear).", stop=True)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        report.problem(f"BUDGET phải là số byte nguyên dương, không phải {budget!r}.",
                       f"BUDGET must be a positive int of bytes, not {budget!r}.", stop=True)
    if is_blank(fits):
        report.missing_part("chưa viết hàm fits(batch_size).", "fits(batch_size) is not written yet.")
    if is_blank(largest):
        report.missing_part("chưa tìm largest.", "largest is not found yet.")
    if is_blank(fits) and is_blank(largest):
        return
    right = largest_fitting_batch(model, budget)
    per_sample = activation_bytes(model, 1)
    if not is_blank(fits):
        if not callable(fits):
            report.problem(f"fits phải là một hàm fits(batch_size) -> bool, không phải {type(fits).__name__}.",
                           f"fits must be a function fits(batch_size) -> bool, not {type(fits).__name__}.", stop=True)
        for size in sorted({1, max(1, right // 2), right, right + 1, 2 * right + 2} - {0}):
            got = report.call(f"fits({size})", fits, size)
            if got is None:
                report.missing_part("fits chưa trả về gì (thiếu return).", "fits returns nothing yet (no return).",
                                    stop=True)
            if not isinstance(got, (bool, torch.Tensor)) or (isinstance(got, torch.Tensor) and got.numel() != 1):
                report.problem(f"fits({size}) phải trả về True/False, không phải {type(got).__name__}.",
                               f"fits({size}) must return True/False, not {type(got).__name__}.", stop=True)
            need = activation_bytes(model, size)
            if bool(got) != (need <= budget):
                verdict = tr_fit(bool(got))
                report.problem(
                    f"fits({size}) = {bool(got)}, nhưng batch {size} lưu {format_bytes(need)} activation so với ngân "
                    f"sách {format_bytes(budget)} ({verdict[0]}). Đo bằng SavedTensorMeter(exclude=model4) quanh "
                    "model4(x) và so sánh meter.live_bytes <= BUDGET.",
                    f"fits({size}) = {bool(got)}, but batch {size} saves {format_bytes(need)} of activations against "
                    f"a budget of {format_bytes(budget)} ({verdict[1]}). Measure with SavedTensorMeter(exclude=model4) "
                    "around model4(x) and compare meter.live_bytes <= BUDGET.",
                    stop=True)
    if not is_blank(largest):
        if isinstance(largest, bool) or not isinstance(largest, int):
            report.problem(f"largest phải là một số nguyên (batch size), không phải {type(largest).__name__}.",
                           f"largest must be an int (a batch size), not {type(largest).__name__}.", stop=True)
        power = 1 << (right.bit_length() - 1) if right else 0
        if largest == right:
            pass
        elif largest == right + 1:
            report.problem(f"lệch một: batch {largest} đã vượt ngân sách; lớn nhất còn vừa là {largest - 1}.",
                           f"off by one: batch {largest} is already over budget; the largest that fits is {largest - 1}.")
        elif largest == power and power != right:
            report.problem(f"{largest} là kết quả của nhân đôi / chia đôi, nhưng còn batch lớn hơn vẫn vừa (giữa "
                           f"{power} và {2 * power}): tìm nhị phân trong khoảng đó.",
                           f"{largest} is what doubling / halving gives, but larger batches still fit (between "
                           f"{power} and {2 * power}): bisect in that range.")
        elif largest > right:
            report.problem(f"batch {largest} không vừa: nó lưu {format_bytes(activation_bytes(model, largest))} "
                           f"> {format_bytes(budget)}.",
                           f"batch {largest} does not fit: it saves {format_bytes(activation_bytes(model, largest))} "
                           f"> {format_bytes(budget)}.")
        else:
            report.problem(f"batch {largest} vừa nhưng chưa phải lớn nhất: batch {largest + 1} vẫn vừa.",
                           f"batch {largest} fits but is not the largest: batch {largest + 1} still fits.")
    if report.problems or report.missing:
        return
    report.success(f"batch lớn nhất vừa {format_bytes(budget)} là {right} (mỗi mẫu lưu khoảng "
                   f"{format_bytes(per_sample)} activation, đo bằng SavedTensorMeter).",
                   f"the largest batch that fits {format_bytes(budget)} is {right} (each sample saves about "
                   f"{format_bytes(per_sample)} of activations, measured with SavedTensorMeter).")
    on_gpu_note(report, pick_device(),
                "ngân sách là VRAM còn trống, và vượt nó là torch.OutOfMemoryError thật (ô %%gpu bên dưới). "
                "Ngoài activation còn trọng số, gradient, trạng thái optimizer và bộ nhớ tạm của kernel.",
                "the budget is the free VRAM, and going over it is a real torch.OutOfMemoryError (the %%gpu cell "
                "below). Besides activations there are weights, gradients, optimizer state and kernel workspaces.")


def tr_fit(fits: bool) -> tuple[str, str]:
    """Return (vi, en) words for a wrong fits() answer."""
    return ("không vừa", "it does not fit") if fits else ("vẫn vừa", "it does fit")


ex4 = Exercise(
    "ex4",
    ("Bài 4 · Batch lớn nhất vừa bộ nhớ", "Exercise 4 · The largest batch that fits"),
    _evaluate,
    hints=[
        ("fits(b): tạo x = torch.randn(b, 64, device=device); bên trong `with SavedTensorMeter(exclude=model4) as m:` "
         "chạy out = model4(x) (giữ out, nếu không đồ thị bị giải phóng ngay và m đọc 0), rồi so m.live_bytes <= BUDGET.",
         "fits(b): make x = torch.randn(b, 64, device=device); inside `with SavedTensorMeter(exclude=model4) as m:` run "
         "out = model4(x) (keep out, or the graph is freed at once and m reads 0), then compare m.live_bytes <= BUDGET."),
        ("Tìm largest: nhân đôi b từ 1 tới khi fits(b) sai (luôn đặt trần, vd b <= 2**16), rồi tìm nhị phân giữa "
         "b/2 (vừa) và b (không vừa).",
         "Finding largest: double b from 1 until fits(b) is False (always with a cap, e.g. b <= 2**16), then bisect "
         "between b/2 (fits) and b (does not)."),
    ],
    solution='''
def fits(batch_size):
    x = torch.randn(batch_size, 64, device=device)
    with SavedTensorMeter(exclude=model4) as meter:
        out = model4(x)                             # giữ out: đồ thị (và activation) còn sống
        held = meter.live_bytes
    return held <= BUDGET

lo, hi = 1, 2
while hi <= 2**16 and fits(hi):                     # nhân đôi tới khi không vừa (có trần!)
    lo, hi = hi, hi * 2
while hi - lo > 1:                                  # tìm nhị phân: lo vừa, hi không
    mid = (lo + hi) // 2
    lo, hi = (mid, hi) if fits(mid) else (lo, mid)
largest = lo
''',
)


# --------------------------------------------------------------------------- GPU: a real, capped OOM

_SLACK = 2**20  # 1 MiB: small allocations other code may keep


def _evaluate_gpu(report: Report, baseline=None, before_error=None, after_cleanup=None) -> None:
    if not torch.cuda.is_available():
        report.problem("phần này cần GPU CUDA; máy này không có (ô %%gpu lẽ ra đã bỏ qua nó).",
                       "this part needs a CUDA GPU; this machine has none (the %%gpu cell should have skipped it).",
                       stop=True)
    values = {"baseline": baseline, "before_error": before_error, "after_cleanup": after_cleanup}
    blank = [k for k, v in values.items() if is_blank(v)]
    if blank:
        report.missing_part(f"chưa điền {', '.join(blank)}.", f"{', '.join(blank)} not filled in yet.", stop=True)
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int):
            report.problem(f"{name} phải là số byte (torch.cuda.memory_allocated()), không phải {type(value).__name__}.",
                           f"{name} must be bytes (torch.cuda.memory_allocated()), not {type(value).__name__}.",
                           stop=True)
    if before_error <= baseline and after_cleanup + _SLACK < baseline:
        report.problem(f"baseline ({format_bytes(baseline)}) còn lớn hơn cả lúc đã dọn xong "
                       f"({format_bytes(after_cleanup)}): khi đọc baseline, các tensor của lần chạy TRƯỚC vẫn còn "
                       "sống. Trong ô OOM, bỏ list cũ (tensors = []) rồi mới đọc torch.cuda.memory_allocated(), "
                       "sau đó chạy lại ô OOM và ô này.",
                       f"baseline ({format_bytes(baseline)}) is even above the value after the cleanup "
                       f"({format_bytes(after_cleanup)}): when baseline was read, the tensors of the PREVIOUS run were "
                       "still alive. In the OOM cell drop the old list (tensors = []) before reading "
                       "torch.cuda.memory_allocated(), then run the OOM cell and this one again.", stop=True)
    if before_error <= baseline:
        report.problem("before_error không lớn hơn baseline: đọc memory_allocated() NGAY TRƯỚC mỗi lần cấp phát trong "
                       "vòng lặp (khi danh sách đã chứa các tensor trước).",
                       "before_error is not above baseline: read memory_allocated() RIGHT BEFORE each allocation in the "
                       "loop (while the list holds the earlier tensors).")
    if after_cleanup > baseline + _SLACK:
        report.problem(f"sau khi dọn vẫn còn {format_bytes(after_cleanup - baseline)} so với lúc đầu: còn tham chiếu "
                       "tới các tensor (tensors.clear() hoặc del tensors) — empty_cache() không trả được bộ nhớ của "
                       "tensor còn sống.",
                       f"after the cleanup {format_bytes(after_cleanup - baseline)} more than at the start is still "
                       "allocated: something still references the tensors (tensors.clear() or del tensors); "
                       "empty_cache() cannot free live tensors.")
    if report.problems:
        return
    reserved = torch.cuda.memory_reserved()
    report.success(f"trước lỗi: {format_bytes(before_error)} allocated; sau del: {format_bytes(after_cleanup)} "
                   f"(lúc đầu {format_bytes(baseline)}); reserved bây giờ {format_bytes(reserved)}.",
                   f"before the error: {format_bytes(before_error)} allocated; after del: {format_bytes(after_cleanup)} "
                   f"(at the start {format_bytes(baseline)}); reserved now {format_bytes(reserved)}.")
    report.note("memory_allocated giảm khi tensor mất tham chiếu cuối cùng; memory_reserved chỉ giảm khi gọi "
                "torch.cuda.empty_cache().",
                "memory_allocated drops when a tensor loses its last reference; memory_reserved only drops with "
                "torch.cuda.empty_cache().")


ex4_gpu = Exercise(
    "ex4_gpu",
    ("Bài 4 (GPU) · Gây OOM an toàn rồi dọn dẹp", "Exercise 4 (GPU) · A safe OOM and the cleanup"),
    _evaluate_gpu,
    hints=[
        ("Dọn dẹp sau khi RA KHỎI khối except: tensors.clear() (bỏ mọi tham chiếu; khác với del tensors, chạy lại "
         "ô vẫn được), torch.cuda.empty_cache(), rồi đọc lại torch.cuda.memory_allocated().",
         "Clean up AFTER leaving the except block: tensors.clear() (drops every reference; unlike del tensors, the "
         "cell can be run again), torch.cuda.empty_cache(), then read torch.cuda.memory_allocated() again."),
    ],
    solution='''
tensors.clear()                      # bỏ mọi tham chiếu: các tensor được giải phóng (chạy lại được)
torch.cuda.empty_cache()             # trả cache của PyTorch về driver
after_cleanup = torch.cuda.memory_allocated()
''',
    gpu=True,
)

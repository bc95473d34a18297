"""Exercise 3: move ``torch.arange(10)`` to the device, compute ``x * 2 + 1`` there, bring it back, verify.

The learner writes ``roundtrip(device)``; the checker runs it under a `MoveTracker`, so a forgotten
reassignment (``x.to(device)`` or ``x.cpu()`` whose result is thrown away) is caught on a CPU too.
"""

from __future__ import annotations

import torch

from ..device import pick_device
from ._core import Exercise, Report, is_blank, on_gpu_note
from ._tracking import ARITHMETIC, MoveTracker

EXPECTED = [2 * i + 1 for i in range(10)]


def _as_list(value) -> list | None:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().tolist() if value.device.type != "meta" else None
    if isinstance(value, (list, tuple)):
        return list(value)
    return None


def _evaluate(report: Report, roundtrip=None, expected=None) -> None:
    if is_blank(roundtrip):
        report.missing_part("chưa viết hàm roundtrip.", "roundtrip is not written yet.")
    if is_blank(expected):
        report.missing_part("chưa điền expected (10 giá trị tính tay).", "expected (10 hand-computed values) not filled in.")
    if not is_blank(expected):
        hand = _as_list(expected)
        if hand is None or len(hand) != 10:
            report.problem("expected phải là danh sách 10 số, vd [1, 3, ...].",
                           "expected must be a list of 10 numbers, e.g. [1, 3, ...].")
        elif hand != EXPECTED:
            i = next(i for i, (a, b) in enumerate(zip(hand, EXPECTED, strict=True)) if a != b)
            report.problem(f"expected[{i}] = {hand[i]}, nhưng x[{i}] = {i} nên {i} * 2 + 1 = {EXPECTED[i]}.",
                           f"expected[{i}] = {hand[i]}, but x[{i}] = {i} so {i} * 2 + 1 = {EXPECTED[i]}.")
    if is_blank(roundtrip):
        return
    if not callable(roundtrip):
        report.problem(f"roundtrip phải là một hàm roundtrip(device), không phải {type(roundtrip).__name__}.",
                       f"roundtrip must be a function roundtrip(device), not {type(roundtrip).__name__}.", stop=True)
    device = pick_device()
    with MoveTracker() as tracker:
        result = report.call("roundtrip(device)", roundtrip, device)
        tracker.mark_used(result)
    if result is None:
        report.missing_part("roundtrip chưa trả về x (thiếu return x).", "roundtrip does not return x yet (no return x).",
                            stop=True)
    if not isinstance(result, torch.Tensor):
        report.problem(f"roundtrip phải trả về tensor x, không phải {type(result).__name__}.",
                       f"roundtrip must return the tensor x, not {type(result).__name__}.", stop=True)
    first_math = tracker.first_call(ARITHMETIC)
    last_math = tracker.last_call(ARITHMETIC)
    before = [m for m in tracker.moves if first_math is None or m.index < first_math]
    after = [m for m in tracker.moves if last_math is not None and m.index > last_math]
    if not before:
        report.problem("x chưa được chuyển sang device trước khi tính: thêm x = x.to(device).",
                       "x is not moved to the device before computing: add x = x.to(device).")
    elif all(m in tracker.unused_moves() for m in before):
        report.problem("quên gán lại: x.to(device) không sửa x tại chỗ, nó trả về tensor MỚI (bị bỏ đi). "
                       "Viết x = x.to(device).",
                       "forgot to reassign: x.to(device) does not change x in place, it returns a NEW tensor (thrown "
                       "away). Write x = x.to(device).")
    elif device.type != "cpu" and not any(m.target.type == device.type for m in before):
        report.problem(f"x được chuyển tới {before[-1].target}, không phải {device}: dùng biến device.",
                       f"x is moved to {before[-1].target}, not {device}: use the device variable.")
    if first_math is not None and not after:
        report.problem("thiếu bước đưa x về CPU sau khi tính: thêm x = x.cpu() (trên GPU, x vẫn nằm ở cuda:0).",
                       "the step bringing x back to the CPU is missing: add x = x.cpu() (on a GPU, x would stay on cuda:0).")
    elif after and all(m in tracker.unused_moves() for m in after):
        report.problem("quên gán lại: x.cpu() trả về tensor mới trên CPU; viết x = x.cpu().",
                       "forgot to reassign: x.cpu() returns a new tensor on the CPU; write x = x.cpu().")
    if result.device.type != "cpu":
        report.problem(f"x trả về đang ở {result.device}, chưa về CPU: x = x.cpu().",
                       f"the returned x is on {result.device}, not back on the CPU: x = x.cpu().")
    values = _as_list(result)
    if values == list(range(10)):
        report.problem("x vẫn là 0, 1, ..., 9: phép x * 2 + 1 tạo tensor MỚI; quên gán lại x = x * 2 + 1.",
                       "x is still 0, 1, ..., 9: x * 2 + 1 makes a NEW tensor; you forgot x = x * 2 + 1.")
    elif values is None or values != EXPECTED:
        shown = values if values is not None else f"{tuple(result.shape)} trên {result.device}"
        report.problem(f"x cuối cùng là {shown}, đúng phải là {EXPECTED}.",
                       f"the final x is {shown}, it should be {EXPECTED}.")
    if report.problems or report.missing:
        return
    report.success(f"x sang {device}, tính x * 2 + 1 ở đó, rồi về CPU: {EXPECTED} khớp với tính tay.",
                   f"x went to {device}, x * 2 + 1 ran there, and it came back to the CPU: {EXPECTED} matches the "
                   "hand computation.")
    on_gpu_note(report, device,
                "x.to(device) thật sự chép 10 số sang VRAM, ở giữa hàm x.device là cuda:0, và x.cpu() chép về. "
                "Trên CPU, .to('cpu') trả lại chính x (không chép) nên quên gán lại không lộ ra; bộ chấm vẫn bắt được.",
                "x.to(device) really copies 10 numbers to VRAM, inside the function x.device is cuda:0, and x.cpu() "
                "copies them back. On a CPU, .to('cpu') returns x itself (no copy), so a missing reassignment does "
                "not show; the checker still catches it.")


ex3 = Exercise(
    "ex3",
    ("Bài 3 · Đưa tensor đi và về", "Exercise 3 · A tensor's round trip"),
    _evaluate,
    hints=[
        ("Ba dòng, dòng nào cũng có 'x = ...': tensor.to() và phép tính không sửa x tại chỗ, chúng trả về tensor mới.",
         "Three lines, each starting with 'x = ...': tensor.to() and arithmetic do not change x in place; they return "
         "new tensors."),
        ("x = x.to(device); x = x * 2 + 1; x = x.cpu(); return x. Tính tay: phần tử i thành 2·i + 1.",
         "x = x.to(device); x = x * 2 + 1; x = x.cpu(); return x. By hand: element i becomes 2·i + 1."),
    ],
    solution='''
def roundtrip(device):
    x = torch.arange(10)           # trên CPU
    x = x.to(device)               # gán lại: .to() trả về tensor mới
    x = x * 2 + 1                  # tính trên device
    x = x.cpu()                    # về CPU
    return x

expected = [1, 3, 5, 7, 9, 11, 13, 15, 17, 19]   # 2·i + 1, tính tay
''',
)

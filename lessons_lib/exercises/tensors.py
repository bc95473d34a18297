"""Exercise 3: ``torch.arange(10)`` to the device, ``x * 2 + 1`` there, and back (under a `MoveTracker`)."""

from __future__ import annotations

import torch

from ..device import pick_device
from ._core import Exercise, Report, is_blank, on_gpu_note
from ._tracking import ARITHMETIC, MoveTracker

EXPECTED = [2 * i + 1 for i in range(10)]


def _as_list(value) -> list | None:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().tolist() if value.device.type != "meta" else None
    return list(value) if isinstance(value, (list, tuple)) else None


def _check_expected(report: Report, expected) -> None:
    hand = _as_list(expected)
    if hand is None or len(hand) != 10:
        report.problem("expected phải là danh sách 10 số, vd [1, 3, ...].")
    elif hand != EXPECTED:
        i = next(i for i, (a, b) in enumerate(zip(hand, EXPECTED, strict=True)) if a != b)
        report.problem(f"expected[{i}] = {hand[i]}, nhưng x[{i}] = {i} nên {i} * 2 + 1 = {EXPECTED[i]}.")


def _check_moves(report: Report, tracker: MoveTracker, device: torch.device) -> None:
    math = tracker.calls_of(ARITHMETIC)
    before = [m for m in tracker.moves if not math or m.index < math[0]]
    after = [m for m in tracker.moves if math and m.index > math[-1]]
    unused = tracker.unused_moves()
    if not before:
        report.problem("x chưa được chuyển sang device trước khi tính: thêm x = x.to(device).")
    elif all(m in unused for m in before):
        report.problem("quên gán lại: x.to(device) không sửa x tại chỗ, nó trả về tensor MỚI (bị bỏ đi). "
                       "Viết x = x.to(device).")
    elif device.type != "cpu" and not any(m.target.type == device.type for m in before):
        report.problem(f"x được chuyển tới {before[-1].target}, không phải {device}: dùng biến device.")
    if math and not after:
        report.problem("thiếu bước đưa x về CPU sau khi tính: thêm x = x.cpu() (trên GPU, x vẫn nằm ở cuda:0).")
    elif after and all(m in unused for m in after):
        report.problem("quên gán lại: x.cpu() trả về tensor mới trên CPU; viết x = x.cpu().")


def _evaluate(report: Report, roundtrip=None, expected=None) -> None:
    if is_blank(expected):
        report.missing_part("chưa điền expected (10 giá trị tính tay).")
    else:
        _check_expected(report, expected)
    report.require_function(roundtrip, "roundtrip(device)")
    device = pick_device()
    with MoveTracker() as tracker:
        result = report.call("roundtrip(device)", roundtrip, device)
        tracker.mark_used(result)
    if result is None:
        report.missing_part("roundtrip chưa trả về x (thiếu return x).", stop=True)
    if not isinstance(result, torch.Tensor):
        report.problem(f"roundtrip phải trả về tensor x, không phải {type(result).__name__}.", stop=True)
    _check_moves(report, tracker, device)
    if result.device.type != "cpu":
        report.problem(f"x trả về đang ở {result.device}, chưa về CPU: x = x.cpu().")
    values = _as_list(result)
    if values == list(range(10)):
        report.problem("x vẫn là 0, 1, ..., 9: phép x * 2 + 1 tạo tensor MỚI; quên gán lại x = x * 2 + 1.")
    elif values != EXPECTED:
        shown = values if values is not None else f"{tuple(result.shape)} trên {result.device}"
        report.problem(f"x cuối cùng là {shown}, đúng phải là {EXPECTED}.")
    if report.problems or report.missing:
        return
    report.success(f"x sang {device}, tính x * 2 + 1 ở đó, rồi về CPU: {EXPECTED} khớp với tính tay.")
    on_gpu_note(report, device,
                "x.to(device) thật sự chép 10 số sang VRAM, ở giữa hàm x.device là cuda:0, và x.cpu() chép về. "
                "Trên CPU, .to('cpu') trả lại chính x (không chép) nên quên gán lại không lộ ra; bộ chấm vẫn bắt được.")


ex3 = Exercise(
    "ex3", "Bài 3 · Đưa tensor đi và về", _evaluate,
    hints=[
        "Ba dòng, dòng nào cũng có 'x = ...': tensor.to() và phép tính không sửa x tại chỗ, chúng trả về tensor mới.",
        "x = x.to(device); x = x * 2 + 1; x = x.cpu(); return x. Tính tay: phần tử i thành 2·i + 1.",
    ],
)

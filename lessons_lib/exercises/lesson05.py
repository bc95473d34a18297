"""Lesson 05's checked task: an AMP step with clipping, its scaler calls watched, its weights compared after two."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import torch

from ..training import make_classification_data, make_mlp
from ._core import Exercise, Report, Wrong, number
from ._tracking import scaler_calls

_MAX_NORM = 0.1
_INIT_SCALE = 2.0**10
_TOL = 1e-3


def _device_and_dtype() -> tuple[torch.device, torch.dtype]:
    cuda = torch.cuda.is_available()
    return torch.device("cuda" if cuda else "cpu"), torch.float16 if cuda else torch.bfloat16


def _grad_norm(model: torch.nn.Module) -> float:
    grads = [p.grad.detach().float().reshape(-1) for p in model.parameters() if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.cat(grads))) if grads else 0.0


def _watched(report: Report, what: str, amp_step, model, x, y, optimizer, scaler, amp_dtype) -> tuple:
    """Call amp_step; return its value and what it did: scaler calls (first of a name, place), forward dtypes, steps."""
    dtypes, optimizer_steps = [], []
    with (scaler_calls(scaler, lambda: _grad_norm(model)) as calls,
          model.register_forward_hook(lambda _m, _i, out: dtypes.append(out.dtype)),
          optimizer.register_step_post_hook(lambda *_: optimizer_steps.append(True))):
        value = report.call(what, amp_step, model, x, y, optimizer, scaler, amp_dtype, _MAX_NORM)
    names = [c.name for c in calls]
    first = {name: calls[names.index(name)] for name in names}
    return value, SimpleNamespace(calls=calls, first=first.get, index=names.index, amp_dtype=amp_dtype,
                                  dtypes=dtypes, optimizer_steps=optimizer_steps)


_S = f"S = {_INIT_SCALE:g}"
_CLIP = "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)"
#: What one call can show (`_watched`), in groups: (rows, whether the first found ends the check).
_GROUPS = (
    ((Wrong("no autocast", lambda c: c.dtypes and all(d != c.amp_dtype for d in c.dtypes), lambda c: (
        f"đầu ra của mô hình là {c.dtypes[0]}: đặt forward và loss trong torch.autocast(device_type="
        "x.device.type, dtype=amp_dtype).")),), False),
    ((Wrong("another scaler", lambda c: not all(call.own for call in c.calls),
            "hàm dùng một GradScaler khác (cái mới quên hệ số S đã dò): dùng `scaler` được truyền vào."),
      Wrong("loss not scaled", lambda c: c.first("scale") is None,
            "loss chưa qua scaler (với fp16 gradient nhỏ về 0): viết scaler.scale(loss).backward().")), True),
    ((Wrong("no zero_grad", lambda c: c.first("scale").before > 0,
            "gradient của bước trước còn trong .grad: gọi optimizer.zero_grad() ở đầu mỗi bước."),), False),
    ((Wrong("optimizer.step directly", lambda c: c.first("step") is None and c.optimizer_steps,
            "gọi optimizer.step() trực tiếp: dùng scaler.step(optimizer), nó bỏ qua bước có gradient inf/NaN."),
      Wrong("no step", lambda c: c.first("step") is None,
            "trọng số chưa được cập nhật: thiếu scaler.step(optimizer).")), True),
    ((Wrong("clip with S", lambda c: c.first("unscale_") is None
            and math.isclose(c.first("step").before, _MAX_NORM, rel_tol=_TOL),
            f"clip chạy trên gradient còn nhân {_S} nên bước cập nhật nhỏ đi S lần: gọi scaler.unscale_(optimizer) "
            "trước clip_grad_norm_."),
      Wrong("no unscale, no clip", lambda c: c.first("unscale_") is None, lambda c: (
          f"gradient chưa được clip (chuẩn {c.first('step').before:.3g}, vẫn nhân S): gọi scaler.unscale_(optimizer), "
          f"rồi {_CLIP}.")),
      Wrong("clip before unscale", lambda c: c.first("unscale_").before <= _MAX_NORM * (1 + _TOL), lambda c: (
          f"clip trước unscale_ làm chuẩn gradient còn {c.first('unscale_').after:.2g}: unscale_ trước, rồi mới "
          "clip.")),
      Wrong("no clip", lambda c: c.first("step").before > _MAX_NORM * (1 + _TOL), lambda c: (
          f"chuẩn gradient lúc scaler.step là {c.first('step').before:.3g} > max_norm = {_MAX_NORM}: gọi {_CLIP} giữa "
          "unscale_ và scaler.step."))), False),
    ((Wrong("no update", lambda c: c.first("update") is None,
            "thiếu scaler.update() sau scaler.step(optimizer): không có nó, S không bao giờ được chỉnh."),
      Wrong("update before step", lambda c: c.index("update") < c.index("step"),
            "scaler.update() phải đứng SAU scaler.step(optimizer): update chỉnh S theo kết quả của step.")), False),
)


def _evaluate(report: Report, amp_step=None) -> None:
    report.require_function(amp_step, "amp_step(model, x, y, optimizer, scaler, amp_dtype, max_norm)")
    device, amp_dtype = _device_and_dtype()
    x, y = make_classification_data(64, 16, 4, seed=0, device=device)
    model = make_mlp(16, 4, hidden=32, depth=1, seed=0, device=device)
    ref_model = copy.deepcopy(model)
    optimizer, ref_optimizer = (torch.optim.SGD(m.parameters(), lr=0.5) for m in (model, ref_model))
    scaler, ref_scaler = (torch.amp.GradScaler(device.type, init_scale=_INIT_SCALE) for _ in range(2))
    reference = task1.solution_function("amp_step")
    what = f"amp_step(model, x, y, optimizer, scaler, {amp_dtype}, max_norm={_MAX_NORM})"
    for call in range(2):
        value, seen = _watched(report, what, amp_step, model, x, y, optimizer, scaler, amp_dtype)
        if call == 0 and not seen.dtypes and not seen.optimizer_steps and {c.name for c in seen.calls} <= {"unscale_"}:
            report.missing_part("hàm chưa làm gì (chưa có forward, chưa gọi scaler).", stop=True)
        for wrongs, stop in _GROUPS:
            report.diagnose(wrongs, seen, stop=stop)
        if report.problems:
            return
        if isinstance(value, torch.Tensor) and value.requires_grad or (loss := number(value)) is None:
            report.problem(f"amp_step phải trả về loss.item(), không phải {type(value).__name__}.", stop=True)
        ref_loss = reference(ref_model, x, y, ref_optimizer, ref_scaler, amp_dtype, _MAX_NORM)
        if not math.isclose(loss, ref_loss, rel_tol=1e-2, abs_tol=1e-3):
            report.problem(f"loss trả về là {loss:.4f}, bước chuẩn cho {ref_loss:.4f}: trả về loss của batch này "
                           "(tính trong autocast), .item().", stop=True)
    pairs = list(zip(model.parameters(), ref_model.parameters(), strict=True))
    if not all(torch.allclose(p, q, rtol=1e-3, atol=1e-5) for p, q in pairs):
        worst = max(float((p - q).detach().abs().max()) for p, q in pairs)
        report.problem(f"sau hai bước, trọng số khác bước chuẩn ({worst:.2e}): kiểm tra loss và max_norm của clip.",
                       stop=True)
    report.success("đúng thứ tự autocast → scale(loss).backward() → unscale_ → clip → step → update; trọng số khớp.")
    if device.type == "cpu":
        report.note("bộ chấm chạy trên CPU với bfloat16, vẫn bật GradScaler để kiểm tra thứ tự; với float16 (T4) nó "
                    "là bắt buộc.")


task1 = Exercise("task1", "Bài 14.5 · Bước train AMP có clip gradient", _evaluate,
                 wrongs=[row for wrongs, _ in _GROUPS for row in wrongs], hints=[
    "Còn thiếu hai dòng giữa scaler.scale(loss).backward() và scaler.step(optimizer).",
    "Clip cần gradient thật: scaler.unscale_(optimizer), rồi torch.nn.utils.clip_grad_norm_(model.parameters(), "
    "max_norm); scaler.step biết là đã unscale nên không chia lần nữa."])

"""Lesson 05's checked task: one AMP training step with gradient clipping, in the right order.

``amp_step`` runs twice on a small MLP (CUDA float16, else CPU bfloat16, the GradScaler always on) while the scaler's
calls and the gradient norm at each are recorded, then its weights are compared with the lesson's solution's.
"""

from __future__ import annotations

import contextlib
import copy
import math
from dataclasses import dataclass
from unittest import mock

import torch

from ..training import make_classification_data, make_mlp
from ._core import Exercise, Report, Wrong, number

_MAX_NORM = 0.1
_INIT_SCALE = 2.0**10
_TOL = 1e-3


def _device_and_dtype() -> tuple[torch.device, torch.dtype]:
    if torch.cuda.is_available():
        return torch.device("cuda"), torch.float16
    return torch.device("cpu"), torch.bfloat16


def _grad_norm(model: torch.nn.Module) -> float:
    grads = [p.grad.detach().float().reshape(-1) for p in model.parameters() if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.cat(grads))) if grads else 0.0


@contextlib.contextmanager
def _watch(model: torch.nn.Module, scaler: torch.amp.GradScaler, optimizer: torch.optim.Optimizer):
    """Record, in order, the forward passes and the GradScaler calls made while active (with gradient norms)."""
    events: list = []
    cls = torch.amp.GradScaler
    originals = {name: getattr(cls, name) for name in ("scale", "unscale_", "step", "update")}
    active: list[str] = []

    def spy(name: str):
        def record(self, *args, **kwargs):
            if active:                                     # a call from inside another: step() unscales by itself
                return originals[name](self, *args, **kwargs)
            event = [name, self is scaler, _grad_norm(model)]
            events.append(event)
            active.append(name)
            try:
                return originals[name](self, *args, **kwargs)
            finally:
                active.pop()
                event.append(_grad_norm(model))            # the norm after the call: unscale_ divides it by S
        return record

    with (model.register_forward_hook(lambda _m, _i, out: events.append(("forward", out.dtype))),
          optimizer.register_step_post_hook(lambda *_: events.append(("optimizer.step",))),
          mock.patch.multiple(cls, **{name: spy(name) for name in originals})):
        yield events


@dataclass
class _Calls:
    """The events of one call of amp_step (see `_watch`), and the dtype autocast should give."""

    events: list
    amp_dtype: torch.dtype

    def first(self, name: str) -> list | None:
        return next((e for e in self.events if e[0] == name), None)

    def index(self, name: str) -> int:
        return next((i for i, e in enumerate(self.events) if e[0] == name), -1)

    @property
    def forwards(self) -> list:
        return [e for e in self.events if e[0] == "forward"]


_S, _N = f"S = {_INIT_SCALE:g}", f"max_norm = {_MAX_NORM}"
_CLIP = "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)"
#: What a call's events can show, in groups: (rows, whether the first found ends the check).
_GROUPS = (
    ((Wrong("no autocast", lambda c: c.forwards and all(e[1] != c.amp_dtype for e in c.forwards), lambda c: (
        f"đầu ra của mô hình là {c.forwards[0][1]}, không phải {str(c.amp_dtype).removeprefix('torch.')}: forward và "
        "loss phải nằm trong `with torch.autocast(device_type=x.device.type, dtype=amp_dtype):`.")),), False),
    ((Wrong("another scaler", lambda c: any(e[0] in ("scale", "unscale_", "step", "update") and not e[1]
                                            for e in c.events),
            "hàm tạo hoặc dùng một GradScaler khác: dùng `scaler` được truyền vào. Một GradScaler mới mỗi bước bắt "
            "đầu lại từ hệ số S ban đầu và quên mọi điều nó đã dò được."),
      Wrong("loss not scaled", lambda c: c.first("scale") is None,
            "loss chưa qua scaler: viết scaler.scale(loss).backward() (với fp16, backward trên loss chưa nhân S làm "
            "gradient nhỏ về 0).")), True),
    ((Wrong("no zero_grad", lambda c: c.first("scale")[2] > 0,
            "khi backward bắt đầu, .grad vẫn còn gradient của bước trước: gọi optimizer.zero_grad() ở đầu mỗi bước, "
            "nếu không gradient cộng dồn qua các bước."),), False),
    ((Wrong("optimizer.step directly", lambda c: c.first("step") is None and c.first("optimizer.step") is not None,
            "gọi optimizer.step() trực tiếp: dùng scaler.step(optimizer). Nó bỏ qua bước có gradient inf/NaN (và tự "
            "unscale_ nếu bạn chưa gọi)."),
      Wrong("no step", lambda c: c.first("step") is None,
            "trọng số chưa được cập nhật: thiếu scaler.step(optimizer).")), True),
    ((Wrong("clip with S", lambda c: c.first("unscale_") is None
            and math.isclose(c.first("step")[2], _MAX_NORM, rel_tol=_TOL),
            f"clip chạy trên gradient còn mang hệ số {_S}: chuẩn của chúng bị kẹp về {_MAX_NORM} khi còn nhân S, rồi "
            f"scaler.step mới chia cho S, nên bước cập nhật nhỏ đi {_INIT_SCALE:g} lần. Gọi "
            "scaler.unscale_(optimizer) TRƯỚC clip_grad_norm_."),
      Wrong("no unscale, no clip", lambda c: c.first("unscale_") is None, lambda c: (
          f"gradient chưa được clip: chuẩn của nó lúc scaler.step bắt đầu là {c.first('step')[2]:.3g} (vẫn nhân S) > "
          f"{_N}. Gọi scaler.unscale_(optimizer), rồi {_CLIP}.")),
      Wrong("clip before unscale", lambda c: c.first("unscale_")[2] <= _MAX_NORM * (1 + _TOL), lambda c: (
          "clip trước unscale_: lúc clip, gradient còn nhân S nên bị kẹp sai, rồi unscale_ chia tiếp cho S (chuẩn còn "
          f"{c.first('unscale_')[3]:.2g}, bước cập nhật gần như bằng 0). Đổi thứ tự: unscale_ rồi mới clip.")),
      Wrong("no clip", lambda c: c.first("step")[2] > _MAX_NORM * (1 + _TOL), lambda c: (
          f"đã unscale_ nhưng chưa clip: chuẩn gradient lúc scaler.step là {c.first('step')[2]:.3g} > {_N}. Gọi "
          f"{_CLIP} giữa unscale_ và scaler.step."))), False),
    ((Wrong("no update", lambda c: c.first("update") is None,
            "thiếu scaler.update() sau scaler.step(optimizer): không có nó, S không bao giờ được chỉnh (và bước sau báo "
            "lỗi vì step đã chạy)."),
      Wrong("update before step", lambda c: c.index("update") < c.index("step"),
            "scaler.update() phải đứng SAU scaler.step(optimizer): update chỉnh S dựa trên kết quả của step.")), False),
)


def _evaluate(report: Report, amp_step=None) -> None:
    report.require_function(amp_step, "amp_step(model, x, y, optimizer, scaler, amp_dtype, max_norm)")
    device, amp_dtype = _device_and_dtype()
    short = str(amp_dtype).removeprefix("torch.")
    x, y = make_classification_data(64, 16, 4, seed=0, device=device)
    model = make_mlp(16, 4, hidden=32, depth=1, seed=0, device=device)
    ref_model = copy.deepcopy(model)
    optimizer, ref_optimizer = (torch.optim.SGD(m.parameters(), lr=0.5) for m in (model, ref_model))
    scaler, ref_scaler = (torch.amp.GradScaler(device.type, init_scale=_INIT_SCALE) for _ in range(2))
    reference = task1.solution_function("amp_step")
    what = f"amp_step(model, x, y, optimizer, scaler, {amp_dtype}, max_norm={_MAX_NORM})"
    for call in range(2):
        with _watch(model, scaler, optimizer) as events:
            value = report.call(what, amp_step, model, x, y, optimizer, scaler, amp_dtype, _MAX_NORM)
        if call == 0 and not any(e[0] in ("forward", "scale", "step", "update", "optimizer.step") for e in events):
            report.missing_part("hàm chưa làm gì (chưa có forward, chưa gọi scaler).", stop=True)
        for wrongs, stop in _GROUPS:
            report.diagnose(wrongs, _Calls(events, amp_dtype), stop=stop)
        if report.problems:
            return
        if isinstance(value, torch.Tensor) and value.requires_grad:
            report.problem("trả về tensor loss còn gắn đồ thị: trả về loss.item() (một số Python).", stop=True)
        loss = number(value)
        if loss is None:
            report.problem(f"amp_step phải trả về loss.item() (một số), không phải {type(value).__name__}.",
                           stop=True)
        ref_loss = reference(ref_model, x, y, ref_optimizer, ref_scaler, amp_dtype, _MAX_NORM)
        if not math.isclose(loss, ref_loss, rel_tol=1e-2, abs_tol=1e-3):
            report.problem(f"loss trả về là {loss:.4f}, bước chuẩn cho {ref_loss:.4f}: trả về loss của batch này "
                           "(cross_entropy tính trong autocast), gọi .item().", stop=True)
    pairs = list(zip(model.parameters(), ref_model.parameters(), strict=True))
    if not all(torch.allclose(p, q, rtol=1e-3, atol=1e-5) for p, q in pairs):
        worst = max(float((p - q).detach().abs().max()) for p, q in pairs)
        report.problem(f"sau hai bước, trọng số khác bước chuẩn (sai khác lớn nhất {worst:.2e}) dù thứ tự gọi scaler "
                       "đúng: kiểm tra loss (F.cross_entropy(model(x), y)) và max_norm truyền cho clip.")
        return
    report.success(f"đúng thứ tự: autocast ({short}) → scaler.scale(loss).backward() → unscale_ → clip về "
                   f"{_MAX_NORM} → scaler.step → scaler.update; sau hai bước trọng số khớp bước chuẩn.")
    if device.type == "cpu":
        report.note("bộ chấm chạy trên CPU với bfloat16 và vẫn bật GradScaler để kiểm tra thứ tự; BF16 thật ra không "
                    "cần nó. Trên T4 (float16), GradScaler là bắt buộc và thứ tự này y hệt.")


task1 = Exercise("task1", "Bài 14.5 · Bước train AMP có clip gradient", _evaluate,
                 wrongs=[row for wrongs, _ in _GROUPS for row in wrongs], hints=[
    "Bảy dòng: zero_grad; forward + loss trong torch.autocast; scaler.scale(loss).backward(); …; "
     "scaler.step(optimizer); scaler.update(); return loss.item(). Còn thiếu hai dòng ở giữa.",
    "Clip so chuẩn với max_norm, nên cần gradient THẬT: scaler.unscale_(optimizer) trước, rồi "
     "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm). scaler.step biết là đã unscale nên không chia "
     "lần nữa.",
])

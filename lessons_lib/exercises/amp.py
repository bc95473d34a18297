"""Exercises 5-6: AMP with gradient accumulation and a GradScaler; resuming without the scaler's state.

Both run on the CPU with a real enabled ``GradScaler("cpu")`` (the same calls as float16 on a GPU): its calls are
counted by spies, and the checkpoint goes through ``torch.save``/``torch.load`` in a temporary folder.
"""

from __future__ import annotations

import os
import tempfile
from unittest import mock

import torch
import torch.nn.functional as F

from ..device import pick_device
from ..training import make_classification_data, make_mlp
from ._core import Exercise, Report, on_gpu_note, same_code, same_weights

_ACCUM = 4
def _setup():
    model = make_mlp(8, 3, hidden=16, depth=1, seed=6)
    x, y = make_classification_data(32, 8, 3, seed=7)
    batches = [(x[i:i + 4], y[i:i + 4]) for i in range(0, 32, 4)]  # 8 micro-batches: 2 big batches of 4
    # A small S: a gradient left over from the last big batch is divided by S at unscale, so it must still show.
    return model, torch.optim.SGD(model.parameters(), lr=0.5), torch.amp.GradScaler("cpu", init_scale=16.0), batches


def _reference(divide: bool) -> list[torch.Tensor]:
    model, optimizer, scaler, batches = _setup()
    for i, (xb, yb) in enumerate(batches):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(xb), yb) / (_ACCUM if divide else 1)
        scaler.scale(loss).backward()
        if (i + 1) % _ACCUM == 0:
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
    return [p.detach() for p in model.parameters()]


def _evaluate_accum(report: Report, train_accum=None) -> None:
    report.require_function(train_accum, "train_accum(model, optimizer, scaler, micro_batches, accum_steps)")
    if same_code(train_accum, ex5.starter_code):
        report.missing_part("hàm vẫn y như bản có lỗi: sửa nó rồi chạy lại ô này.", stop=True)
    model, optimizer, scaler, batches = _setup()
    marks: dict[str, list[int]] = {"scale": [], "step": [], "update": []}  # micro-batches scaled before each call

    def spy(name: str):
        real = getattr(scaler, name)
        return lambda *a, **k: (marks[name].append(len(marks["scale"])), real(*a, **k))[1]

    failure = None
    with mock.patch.multiple(scaler, **{name: spy(name) for name in marks}):
        try:
            train_accum(model, optimizer, scaler, batches, _ACCUM)
        except Exception as exc:  # noqa: BLE001 - a real GradScaler raises on some wrong orders; the calls say why
            failure = exc
    n_scale = len(marks["scale"])
    if n_scale == 0 and failure is None and not marks["step"]:
        report.missing_part("chưa có scaler.scale(loss).backward() nào.", stop=True)
    if n_scale == 0:
        report.problem("loss.backward() không qua scaler: mỗi micro-batch phải gọi scaler.scale(loss).backward(), "
                       "nếu không gradient không được nhân S và scaler.step không có gì để unscale.", stop=True)
    why = {"step": "nếu không, mô hình đổi sau từng micro-batch",
           "update": "gọi giữa chừng thì S đổi khi gradient của các micro-batch trước còn mang S cũ"}
    for name in ("step", "update"):
        at, want = marks[name], n_scale // _ACCUM
        if len(at) != want or any(k % _ACCUM for k in at):
            report.problem(f"scaler.{name}(...) chạy {len(at)} lần sau {n_scale} micro-batch, cần {want}: một lần "
                           f"mỗi {_ACCUM} micro-batch, trong `if (i + 1) % accum_steps == 0:` ({why[name]}).")
    if failure is not None:
        report.error("train_accum(...)", failure)
    if n_scale != len(batches):
        report.problem(f"scaler.scale(loss).backward() chạy {n_scale} lần cho {len(batches)} micro-batch: mỗi "
                       "micro-batch một lần.")
    if report.problems:
        return
    got = [p.detach() for p in model.parameters()]
    if same_weights(got, _reference(divide=False)):
        report.problem(f"loss chưa chia cho accum_steps: gradient là TỔNG của {_ACCUM} micro-batch, lớn gấp "
                       f"{_ACCUM} lần gradient của batch lớn. Dùng loss = F.cross_entropy(...) / accum_steps.",
                       stop=True)
    if not same_weights(got, _reference(divide=True)):
        report.problem("tham số sau train khác bản đúng: zero_grad sau mỗi scaler.step, và không đổi phép tính "
                       "(autocast bfloat16, cross-entropy chia accum_steps).", stop=True)
    report.success(f"{n_scale} lần scale().backward(), {n_scale // _ACCUM} lần step() và update(): tham số khớp bản "
                   f"tham chiếu với GradScaler đang bật (S = {scaler.get_scale():.0f}).")
    on_gpu_note(report, pick_device(), "với float16, cùng vòng này giữ gradient khỏi về 0; gọi update() mỗi "
                "micro-batch thì một lần inf làm S giảm giữa chừng và các phần gradient bị chia sai hệ số.")


ex5 = Exercise("ex5", "Nhiệm vụ 5 · Gỡ lỗi: AMP cùng gradient accumulation", _evaluate_accum,
               starter=True, hints=[
    "Có 2 lỗi: loss của mỗi micro-batch chưa chia cho accum_steps, và scaler.step/update chạy mỗi micro-batch.",
    "loss = F.cross_entropy(...) / accum_steps; scaler.scale(loss).backward() mỗi micro-batch; "
    "chỉ trong `if (i + 1) % accum_steps == 0:` mới scaler.step(optimizer), scaler.update(), zero_grad.",
])

_TRAINED_SCALE = 2.0**11  # a scale that backed off from 65536 after overflows, as in a real float16 run


def _trio(scale: float | None = None):
    model = make_mlp(4, 2, hidden=8, depth=1, seed=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu") if scale is None else torch.amp.GradScaler("cpu", init_scale=scale)
    return model, optimizer, scaler


def _trained():
    model, optimizer, scaler = _trio(_TRAINED_SCALE)
    x, y = make_classification_data(8, 4, 2, seed=9)
    scaler.scale(F.cross_entropy(model(x), y)).backward()
    scaler.step(optimizer)  # momentum buffers now in the optimizer's state
    scaler.update()
    return model, optimizer, scaler


def _evaluate_resume(report: Report, save_checkpoint=None, load_checkpoint=None) -> None:
    report.require_function(save_checkpoint, "save_checkpoint(path, model, optimizer, scaler)")
    report.require_function(load_checkpoint, "load_checkpoint(path, model, optimizer, scaler)")
    save_starter, _, load_starter = ex6.starter_code.partition("\ndef load")
    if same_code(save_checkpoint, save_starter) and same_code(load_checkpoint, "def load" + load_starter):
        report.missing_part("hai hàm vẫn y như bản có lỗi: sửa chúng rồi chạy lại ô này.", stop=True)
    model, optimizer, scaler = _trained()
    fresh = _trio()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.pt")
        report.call("save_checkpoint(path, model, optimizer, scaler)", save_checkpoint, path, model, optimizer,
                    scaler)
        saved = torch.load(path, weights_only=False) if os.path.exists(path) else None
        if not isinstance(saved, dict):
            report.problem("save_checkpoint phải ghi một dict vào path bằng torch.save(..., path).", stop=True)
        if any(isinstance(v, torch.amp.GradScaler) for v in saved.values()):
            report.problem("bạn lưu chính đối tượng scaler: torch.load (weights_only=True, mặc định từ torch 2.6) "
                           "từ chối nó. Lưu scaler.state_dict(), như model và optimizer.", stop=True)
        if not any(isinstance(v, dict) and v.get("scale") == scaler.get_scale() for v in saved.values()):
            report.problem('checkpoint không có trạng thái của scaler: thêm "scaler": scaler.state_dict() vào dict '
                           "của save_checkpoint.", stop=True)
        report.call("load_checkpoint(path, model, optimizer, scaler)", load_checkpoint, path, *fresh)
    if fresh[2].get_scale() != scaler.get_scale():
        skipped = int(fresh[2].get_scale() / scaler.get_scale()).bit_length() - 1
        report.problem(f"sau khi nạp, scaler truyền vào vẫn có S = {fresh[2].get_scale():.0f}, không phải "
                       f"{scaler.get_scale():.0f}: gọi scaler.load_state_dict(ckpt['scaler']) trên chính scaler đó. "
                       f"Với float16, tới {skipped} bước đầu sau khi chạy tiếp có thể bị bỏ qua vì inf, mỗi bước "
                       "S giảm một nửa.", stop=True)
    if fresh[2].state_dict() != scaler.state_dict():
        report.problem("scaler nạp lại có scale đúng nhưng các trường khác (_growth_tracker…) sai: dùng "
                       "scaler.load_state_dict(ckpt['scaler']).", stop=True)
    if not same_weights(model.parameters(), fresh[0].parameters()):
        report.problem("tham số của model nạp lại khác model đã lưu.", stop=True)
    if not fresh[1].state_dict()["state"]:
        report.problem("optimizer nạp lại mất trạng thái (momentum): optimizer.load_state_dict(ckpt['optimizer']).",
                       stop=True)
    report.success(f"model, optimizer và scaler (S = {scaler.get_scale():.0f}) đều đi qua torch.save/torch.load.")


ex6 = Exercise("ex6", "Nhiệm vụ 6 · Gỡ lỗi: chạy tiếp từ checkpoint mà quên GradScaler", _evaluate_resume,
               starter=True, hints=[
    "GradScaler cũng có trạng thái (hệ số S, bộ đếm tăng S), lưu và nạp như model và optimizer.",
    'save: thêm "scaler": scaler.state_dict(); load: scaler.load_state_dict(ckpt["scaler"]).',
])

"""Lesson 07's checked task: a gradient-accumulation loop (its weights compared with big-batch training, the
typical slips recognised by replaying them). The per-GPU bytes under ZeRO are lesson 08's task."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from ..device import pick_device
from ..training import make_classification_data, make_mlp
from ._core import Exercise, Report, same_weights

GROUP = "lesson07"  # the exercise group (tools/grade.py reads it)

MICRO, ACCUM, N_MICRO, LR = 4, 4, 8, 0.5     # 8 micro-batches of 4 samples, a step every 4: two big batches of 16
_CADENCE = frozenset(i for i in range(N_MICRO) if (i + 1) % ACCUM == 0)


def _setup(device: torch.device):
    model = make_mlp(8, 3, hidden=16, depth=1, seed=1, device=device)
    x, y = make_classification_data(MICRO * N_MICRO, 8, 3, seed=2, device=device)
    return model, [(x[i:i + MICRO].clone(), y[i:i + MICRO].clone()) for i in range(0, len(x), MICRO)]


def _replay(model, batches, *, scale: float = 1 / ACCUM, steps_after=_CADENCE, zero_before=frozenset(),
            zero_after_step: bool = True):
    """Return the weights after a loop with the given habits (which micro-batches step or zero the gradients)."""
    twin = copy.deepcopy(model)
    optimizer = torch.optim.SGD(twin.parameters(), lr=LR)
    optimizer.zero_grad()
    for i, (xb, yb) in enumerate(batches):
        if i in zero_before:
            optimizer.zero_grad()
        (F.cross_entropy(twin(xb), yb) * scale).backward()
        if i in steps_after:
            optimizer.step()
            if zero_after_step:
                optimizer.zero_grad()
    return [p.detach() for p in twin.parameters()]


def _evaluate_accumulate(report: Report, train_accumulated=None) -> None:
    report.require_function(train_accumulated, "train_accumulated(model, optimizer, micro_batches, accum_steps)")
    device = pick_device()
    model, batches = _setup(device)
    start = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    steps: list[int] = []
    seen: list[int] = []
    with (optimizer.register_step_post_hook(lambda *_: steps.append(len(seen))),
          model.register_forward_pre_hook(lambda _m, args: seen.append(len(args[0])))):  # a hook is removed at exit
        report.call("train_accumulated(model, optimizer, micro_batches, accum_steps=4)", train_accumulated,
                    model, optimizer, batches, ACCUM)
    if not seen and not steps:
        report.missing_part("hàm chưa làm gì (chưa có forward, chưa gọi optimizer.step()).", stop=True)
    if max(seen, default=0) > MICRO:
        report.problem(f"mô hình nhận một batch {max(seen)} mẫu, lớn hơn micro-batch ({MICRO}): đưa TỪNG micro-batch "
                       "vào mô hình, đó là chỗ tiết kiệm bộ nhớ.", stop=True)
    if len(seen) < N_MICRO:
        report.problem(f"chỉ có {len(seen)} lần forward cho {N_MICRO} micro-batch: mỗi micro-batch một lần.",
                       stop=True)
    if not steps:
        report.problem("không có optimizer.step() nào: gradient được cộng dồn nhưng trọng số không bao giờ cập nhật.",
                       stop=True)
    if len(steps) == N_MICRO:
        report.problem(f"optimizer.step() sau MỖI micro-batch ({len(steps)} lần): khi đó không còn là tích luỹ. Chỉ step "
                       "khi (i + 1) % accum_steps == 0, tức 2 lần cho 8 micro-batch.", stop=True)
    if len(steps) != N_MICRO // ACCUM:
        report.problem(f"optimizer.step() được gọi {len(steps)} lần; với {N_MICRO} micro-batch và accum_steps = {ACCUM} "
                       f"phải là {N_MICRO // ACCUM} lần, sau micro-batch thứ 4 và thứ 8 ((i + 1) % accum_steps == 0).",
                       stop=True)
    got = [p.detach() for p in model.parameters()]
    right = _replay(start, batches)
    if same_weights(got, right):
        report.success(f"{N_MICRO} micro-batch {MICRO} mẫu, step mỗi {ACCUM}: trọng số khớp (torch.allclose) với train "
                       f"trên 2 batch {MICRO * ACCUM} mẫu, mà mỗi lần forward chỉ tốn bộ nhớ của {MICRO} mẫu.")
        return
    slips = [
        (_replay(start, batches, scale=1.0),
         (f"loss chưa chia cho accum_steps: gradient cộng dồn lớn gấp {ACCUM} lần gradient của batch lớn (như tăng "
          f"learning rate {ACCUM} lần). Viết loss = loss_fn(...) / accum_steps.")),
        (_replay(start, batches, zero_before=set(range(N_MICRO))),
         ("zero_grad trước MỖI micro-batch xoá phần đã cộng dồn: lúc step chỉ còn gradient của micro-batch cuối. "
          "Chỉ zero_grad ngay sau optimizer.step().")),
        (_replay(start, batches, zero_after_step=False),
         ("thiếu optimizer.zero_grad() sau optimizer.step(): gradient của batch lớn thứ nhất còn nằm trong .grad và "
          "bị cộng vào batch lớn thứ hai.")),
        (_replay(start, batches, steps_after={i for i in range(N_MICRO) if i % ACCUM == 0}),
         ("step sai micro-batch: i % accum_steps == 0 step ngay sau micro-batch ĐẦU (i = 0), khi mới có 1 phần. "
          "Dùng (i + 1) % accum_steps == 0.")),
    ]
    if report.first(((same_weights(got, weights), message) for weights, message in slips), stop=False):
        return
    worst = max(float((p - q).abs().max()) for p, q in zip(got, right, strict=True))
    report.problem(f"trọng số sau khi train khác train trên batch lớn (sai khác lớn nhất {worst:.2e}): mỗi micro-batch "
                   "loss = F.cross_entropy(model(xb), yb) / accum_steps; backward; step và zero_grad khi "
                   "(i + 1) % accum_steps == 0.")


task1 = Exercise("task1", "Bài 14.7 · Vòng train với gradient accumulation", _evaluate_accumulate,
                 group=GROUP, hints=[
    "for i, (xb, yb) in enumerate(micro_batches): loss chia accum_steps, backward (gradient tự cộng dồn vào "
    ".grad); cứ accum_steps micro-batch thì step một lần.",
    "if (i + 1) % accum_steps == 0: optimizer.step(); optimizer.zero_grad(). Một lần zero_grad trước vòng lặp.",
])

"""Lesson 07's checked task: a gradient-accumulation loop (its weights compared with big-batch training, the
typical slips recognised by replaying them). The per-GPU bytes under ZeRO are lesson 08's task."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from ..device import pick_device
from ..training import make_classification_data, make_mlp
from ._core import Exercise, Report, Wrong, same_weights

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


#: The typical slips, by what the loop did (`r`: rows per forward, forwards before each step, the weights left,
#: ``r.replays(**habits)``: whether they are a `_replay` with those habits): counts first, then the weights.
WRONGS = [
    Wrong("one big batch", lambda r: max(r.seen) > MICRO, lambda r: (
        f"mô hình nhận một batch {max(r.seen)} mẫu, lớn hơn micro-batch ({MICRO}): đưa TỪNG micro-batch vào mô "
        "hình, đó là chỗ tiết kiệm bộ nhớ.")),
    Wrong("too few forwards", lambda r: len(r.seen) < N_MICRO, lambda r: (
        f"chỉ có {len(r.seen)} lần forward cho {N_MICRO} micro-batch: mỗi micro-batch một lần.")),
    Wrong("no step", lambda r: not r.steps, "không có optimizer.step() nào: gradient được cộng dồn nhưng trọng số "
                                            "không bao giờ cập nhật."),
    Wrong("step each", lambda r: len(r.steps) == N_MICRO, lambda r: (
        f"optimizer.step() sau MỖI micro-batch ({len(r.steps)} lần): khi đó không còn là tích luỹ. Chỉ step khi "
        "(i + 1) % accum_steps == 0, tức 2 lần cho 8 micro-batch.")),
    Wrong("step count", lambda r: len(r.steps) != N_MICRO // ACCUM, lambda r: (
        f"optimizer.step() được gọi {len(r.steps)} lần; với {N_MICRO} micro-batch và accum_steps = {ACCUM} phải "
        f"là {N_MICRO // ACCUM} lần, sau micro-batch thứ 4 và thứ 8 ((i + 1) % accum_steps == 0).")),
    Wrong("no division", lambda r: r.replays(scale=1.0), (
        f"loss chưa chia cho accum_steps: gradient cộng dồn lớn gấp {ACCUM} lần gradient của batch lớn (như tăng "
        f"learning rate {ACCUM} lần). Viết loss = loss_fn(...) / accum_steps.")),
    Wrong("zero each", lambda r: r.replays(zero_before=set(range(N_MICRO))), (
        "zero_grad trước MỖI micro-batch xoá phần đã cộng dồn: lúc step chỉ còn gradient của micro-batch cuối. "
        "Chỉ zero_grad ngay sau optimizer.step().")),
    Wrong("no zero after step", lambda r: r.replays(zero_after_step=False), (
        "thiếu optimizer.zero_grad() sau optimizer.step(): gradient của batch lớn thứ nhất còn nằm trong .grad và "
        "bị cộng vào batch lớn thứ hai.")),
    Wrong("offset", lambda r: r.replays(steps_after={i for i in range(N_MICRO) if i % ACCUM == 0}), (
        "step sai micro-batch: i % accum_steps == 0 step ngay sau micro-batch ĐẦU (i = 0), khi mới có 1 phần. "
        "Dùng (i + 1) % accum_steps == 0.")),
    Wrong("other", lambda r: not r.replays(), lambda r: (
        "trọng số sau khi train khác train trên batch lớn (sai khác lớn nhất "
        f"{max(float((p - q).abs().max()) for p, q in zip(r.weights, _replay(r.start, r.batches), strict=True)):.2e}"
        "): mỗi micro-batch loss = F.cross_entropy(model(xb), yb) / accum_steps; backward; step và zero_grad khi "
        "(i + 1) % accum_steps == 0.")),
]


def _evaluate_accumulate(report: Report, train_accumulated=None) -> None:
    report.require_function(train_accumulated, "train_accumulated(model, optimizer, micro_batches, accum_steps)")
    model, batches = _setup(pick_device())
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
    weights = [p.detach() for p in model.parameters()]
    loop = SimpleNamespace(seen=seen or [0], steps=steps, weights=weights, start=start, batches=batches,
                           replays=lambda **habits: same_weights(weights, _replay(start, batches, **habits)))
    report.diagnose(WRONGS, loop)
    report.success(f"{N_MICRO} micro-batch {MICRO} mẫu, step mỗi {ACCUM}: trọng số khớp (torch.allclose) với train "
                   f"trên 2 batch {MICRO * ACCUM} mẫu, mà mỗi lần forward chỉ tốn bộ nhớ của {MICRO} mẫu.")


task1 = Exercise("task1", "Bài 14.7 · Vòng train với gradient accumulation", _evaluate_accumulate,
                 wrongs=WRONGS, hints=[
    "for i, (xb, yb) in enumerate(micro_batches): loss chia accum_steps, backward (gradient tự cộng dồn vào "
    ".grad); cứ accum_steps micro-batch thì step một lần.",
    "if (i + 1) % accum_steps == 0: optimizer.step(); optimizer.zero_grad(). Một lần zero_grad trước vòng lặp.",
])

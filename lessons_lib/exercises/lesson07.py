"""Checked tasks of notebook 07 (memory fixes).

- ``task1.check(train_accumulated)``: a training loop with gradient accumulation that steps every
  ``accum_steps`` micro-batches. The checker trains a small MLP with the learner's loop and compares the
  weights (``torch.allclose``) with training on the big batches directly; typical slips (no division of the
  loss, a step or a ``zero_grad`` on every micro-batch, no ``zero_grad`` after the step, stepping on the wrong
  micro-batch) are recognised by replaying them.
- ``task2.check(per_gpu_bytes)``: the per-GPU bytes of mixed-precision Adam under DDP and ZeRO-1/2/3, by hand,
  checked against `lessons_lib.memory.sharded_training_memory`.
"""

from __future__ import annotations

import copy
import math
from itertools import combinations

import torch
import torch.nn.functional as F

from ..device import pick_device
from ..memory import sharded_training_memory
from ..training import make_classification_data, make_mlp
from ._core import Exercise, Report, number

# =========================================================================== task 1: accumulation loop

MICRO, ACCUM, N_MICRO, LR = 4, 4, 8, 0.5     # 8 micro-batches of 4 samples, a step every 4: two big batches of 16


def _setup(device: torch.device):
    model = make_mlp(8, 3, hidden=16, depth=1, seed=1, device=device)
    x, y = make_classification_data(MICRO * N_MICRO, 8, 3, seed=2, device=device)
    return model, [(x[i:i + MICRO].clone(), y[i:i + MICRO].clone()) for i in range(0, len(x), MICRO)]


def replay(model, batches, *, scale: float, steps_after: set[int], zero_before: set[int], zero_after_step: bool):
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


def _close(a, b) -> bool:
    return all(torch.allclose(p, q, rtol=1e-4, atol=1e-6) for p, q in zip(a, b, strict=True))


def _evaluate_accumulate(report: Report, train_accumulated=None) -> None:
    report.require_function(train_accumulated, "train_accumulated(model, optimizer, micro_batches, accum_steps)")
    device = pick_device()
    model, batches = _setup(device)
    start = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    steps: list[int] = []
    seen: list[int] = []
    step_hook = optimizer.register_step_post_hook(lambda *_: steps.append(len(seen)))
    forward_hook = model.register_forward_pre_hook(lambda _m, args: seen.append(len(args[0])))
    try:
        report.call("train_accumulated(model, optimizer, micro_batches, accum_steps=4)", train_accumulated,
                    model, optimizer, batches, ACCUM)
    finally:
        step_hook.remove()
        forward_hook.remove()
    if not seen and not steps:
        report.missing_part("hàm chưa làm gì (chưa có forward, chưa gọi optimizer.step()).",
                            "the function does nothing yet (no forward, no optimizer.step()).", stop=True)
    if max(seen, default=0) > MICRO:
        report.problem(f"mô hình nhận một batch {max(seen)} mẫu, lớn hơn micro-batch ({MICRO}): đưa TỪNG micro-batch "
                       "vào mô hình, đó là chỗ tiết kiệm bộ nhớ.",
                       f"the model got a batch of {max(seen)} samples, more than a micro-batch ({MICRO}): feed EACH "
                       "micro-batch to the model; that is where the memory is saved.", stop=True)
    if len(seen) < N_MICRO:
        report.problem(f"chỉ có {len(seen)} lần forward cho {N_MICRO} micro-batch: mỗi micro-batch một lần.",
                       f"only {len(seen)} forward passes for {N_MICRO} micro-batches: one per micro-batch.", stop=True)
    if not steps:
        report.problem("không có optimizer.step() nào: gradient được cộng dồn nhưng trọng số không bao giờ cập nhật.",
                       "no optimizer.step() at all: the gradients add up but the weights are never updated.", stop=True)
    if len(steps) == N_MICRO:
        report.problem(f"optimizer.step() sau MỖI micro-batch ({len(steps)} lần): khi đó không còn là tích luỹ. Chỉ step "
                       "khi (i + 1) % accum_steps == 0, tức 2 lần cho 8 micro-batch.",
                       f"optimizer.step() after EVERY micro-batch ({len(steps)} times): that is no accumulation. Step "
                       "only when (i + 1) % accum_steps == 0: twice for 8 micro-batches.", stop=True)
    if len(steps) != N_MICRO // ACCUM:
        report.problem(f"optimizer.step() được gọi {len(steps)} lần; với {N_MICRO} micro-batch và accum_steps = {ACCUM} "
                       f"phải là {N_MICRO // ACCUM} lần, sau micro-batch thứ 4 và thứ 8 ((i + 1) % accum_steps == 0).",
                       f"optimizer.step() is called {len(steps)} times; with {N_MICRO} micro-batches and accum_steps = "
                       f"{ACCUM} it should be {N_MICRO // ACCUM}, after the 4th and the 8th micro-batch "
                       "((i + 1) % accum_steps == 0).", stop=True)
    got = [p.detach() for p in model.parameters()]
    cadence = {i for i in range(N_MICRO) if (i + 1) % ACCUM == 0}
    right = replay(start, batches, scale=1 / ACCUM, steps_after=cadence, zero_before=set(), zero_after_step=True)
    if _close(got, right):
        report.success(f"{N_MICRO} micro-batch {MICRO} mẫu, step mỗi {ACCUM}: trọng số khớp (torch.allclose) với train "
                       f"trên 2 batch {MICRO * ACCUM} mẫu, mà mỗi lần forward chỉ tốn bộ nhớ của {MICRO} mẫu.",
                       f"{N_MICRO} micro-batches of {MICRO}, a step every {ACCUM}: the weights match (torch.allclose) "
                       f"training on 2 batches of {MICRO * ACCUM}, while each forward only costs the memory of "
                       f"{MICRO} samples.")
        return
    offset = {i for i in range(N_MICRO) if i % ACCUM == 0}
    slips = [
        (replay(start, batches, scale=1.0, steps_after=cadence, zero_before=set(), zero_after_step=True),
         (f"loss chưa chia cho accum_steps: gradient cộng dồn lớn gấp {ACCUM} lần gradient của batch lớn (như tăng "
          f"learning rate {ACCUM} lần). Viết loss = loss_fn(...) / accum_steps.",
          f"the loss is not divided by accum_steps: the accumulated gradient is {ACCUM}× the big batch's (like a "
          f"{ACCUM}× learning rate). Write loss = loss_fn(...) / accum_steps.")),
        (replay(start, batches, scale=1 / ACCUM, steps_after=cadence, zero_before=set(range(N_MICRO)),
                zero_after_step=True),
         ("zero_grad trước MỖI micro-batch xoá phần đã cộng dồn: lúc step chỉ còn gradient của micro-batch cuối. "
          "Chỉ zero_grad ngay sau optimizer.step().",
          "zero_grad before EVERY micro-batch wipes what was accumulated: at the step only the last micro-batch's "
          "gradient is left. Only zero_grad right after optimizer.step().")),
        (replay(start, batches, scale=1 / ACCUM, steps_after=cadence, zero_before=set(), zero_after_step=False),
         ("thiếu optimizer.zero_grad() sau optimizer.step(): gradient của batch lớn thứ nhất còn nằm trong .grad và "
          "bị cộng vào batch lớn thứ hai.",
          "optimizer.zero_grad() is missing after optimizer.step(): the first big batch's gradient stays in .grad "
          "and is added to the second one's.")),
        (replay(start, batches, scale=1 / ACCUM, steps_after=offset, zero_before=set(), zero_after_step=True),
         ("step sai micro-batch: i % accum_steps == 0 step ngay sau micro-batch ĐẦU (i = 0), khi mới có 1 phần. "
          "Dùng (i + 1) % accum_steps == 0.",
          "stepping on the wrong micro-batch: i % accum_steps == 0 steps right after the FIRST one (i = 0), with "
          "only 1 part in. Use (i + 1) % accum_steps == 0.")),
    ]
    for weights, (vi, en) in slips:
        if _close(got, weights):
            report.problem(vi, en)
            return
    worst = max(float((p - q).abs().max()) for p, q in zip(got, right, strict=True))
    report.problem(f"trọng số sau khi train khác train trên batch lớn (sai khác lớn nhất {worst:.2e}): mỗi micro-batch "
                   "loss = F.cross_entropy(model(xb), yb) / accum_steps; backward; step và zero_grad khi "
                   "(i + 1) % accum_steps == 0.",
                   f"the trained weights differ from training on the big batches (largest difference {worst:.2e}): for "
                   "each micro-batch loss = F.cross_entropy(model(xb), yb) / accum_steps; backward; step and zero_grad "
                   "when (i + 1) % accum_steps == 0.")


task1 = Exercise(
    "task1",
    ("Bài 14.7 · Vòng train với gradient accumulation", "Lesson 14.7 · A training loop with gradient accumulation"),
    _evaluate_accumulate,
    hints=[
        ("for i, (xb, yb) in enumerate(micro_batches): loss chia accum_steps, backward (gradient tự cộng dồn vào "
         ".grad); cứ accum_steps micro-batch thì step một lần.",
         "for i, (xb, yb) in enumerate(micro_batches): divide the loss by accum_steps, backward (gradients add up "
         "in .grad); step once every accum_steps micro-batches."),
        ("if (i + 1) % accum_steps == 0: optimizer.step(); optimizer.zero_grad(). Một lần zero_grad trước vòng lặp.",
         "if (i + 1) % accum_steps == 0: optimizer.step(); optimizer.zero_grad(). One zero_grad before the loop."),
    ],
    solution='''
def train_accumulated(model, optimizer, micro_batches, accum_steps):
    optimizer.zero_grad()
    for i, (xb, yb) in enumerate(micro_batches):
        loss = F.cross_entropy(model(xb), yb) / accum_steps   # mỗi phần góp 1/accum_steps
        loss.backward()                                       # gradient cộng dồn vào .grad
        if (i + 1) % accum_steps == 0:                        # đủ một batch lớn
            optimizer.step()
            optimizer.zero_grad()
''',
    group="lesson07",
)

# =========================================================================== task 2: sharding arithmetic

_PARTS = ("params", "grads", "optimizer")
_BYTES = {"params": 2, "grads": 2, "optimizer": 12}         # mixed-precision Adam, the ZeRO paper's accounting
_SHARDED = {0: set(), 1: {"optimizer"}, 2: {"optimizer", "grads"}, 3: {"optimizer", "grads", "params"}}
_NAMES_VI = {"params": "tham số", "grads": "gradient", "optimizer": "trạng thái optimizer"}
_NAMES_EN = {"params": "parameters", "grads": "gradients", "optimizer": "optimizer state"}
_CASES = [(7_000_000_000, 8, stage) for stage in range(4)] + [(1_500_000_000, 4, 2), (1_000_003, 3, 3)]


def _bytes(n: int, gpus: int, sharded: set[str], sizes: dict[str, float] = _BYTES) -> float:
    return sum(n * sizes[part] / (gpus if part in sharded else 1) for part in _PARTS)


def _names(parts: set[str], lang: str) -> str:
    names = _NAMES_VI if lang == "vi" else _NAMES_EN
    ordered = [names[p] for p in ("optimizer", "grads", "params") if p in parts]
    return ", ".join(ordered) if ordered else ("không gì" if lang == "vi" else "nothing")


def _diagnose_sharding(report: Report, n: int, gpus: int, stage: int, got: float, want: float) -> None:
    if math.isclose(got, want / 1e9, rel_tol=1e-3) or math.isclose(got, want / 2**30, rel_tol=1e-3):
        report.problem(f"per_gpu_bytes({n:_}, {gpus}, {stage}) = {got:g}: có vẻ là GB/GiB; hàm phải trả về số BYTE.",
                       f"per_gpu_bytes({n:_}, {gpus}, {stage}) = {got:g}: looks like GB/GiB; return BYTES.")
        return
    for size_vi, size_en, sizes in (
        ("trạng thái optimizer với mixed precision là 12 byte/tham số (bản FP32 của tham số 4 + momentum 4 + "
         "variance 4), không phải 8: đừng quên bản FP32 của tham số.",
         "the optimizer state under mixed precision is 12 bytes/parameter (FP32 master copy 4 + momentum 4 + "
         "variance 4), not 8: do not forget the FP32 master copy of the parameters.",
         {"params": 2, "grads": 2, "optimizer": 8}),
        ("đó là Adam FP32 (4 + 4 + 8). Với mixed precision: tham số và gradient FP16 2 byte mỗi cái, trạng thái "
         "optimizer 12 byte.",
         "that is FP32 Adam (4 + 4 + 8). Under mixed precision: FP16 parameters and gradients take 2 bytes each, "
         "the optimizer state 12 bytes.",
         {"params": 4, "grads": 4, "optimizer": 8}),
    ):
        if math.isclose(got, _bytes(n, gpus, _SHARDED[stage], sizes), rel_tol=1e-6) and sizes != _BYTES:
            report.problem(f"per_gpu_bytes({n:_}, {gpus}, {stage}): {size_vi}",
                           f"per_gpu_bytes({n:_}, {gpus}, {stage}): {size_en}")
            return
    for k in range(4):
        for parts in combinations(_PARTS, k):
            if set(parts) != _SHARDED[stage] and math.isclose(got, _bytes(n, gpus, set(parts)), rel_tol=1e-6):
                yours_vi = (f"bạn chia {_names(set(parts), 'vi')} cho {gpus} GPU" if parts
                            else "bạn chưa chia gì (đó là DDP, stage 0)")
                yours_en = (f"you split {_names(set(parts), 'en')} over {gpus} GPUs" if parts
                            else "you split nothing (that is DDP, stage 0)")
                right_vi = f"chia {_names(_SHARDED[stage], 'vi')}" if stage else "không chia gì"
                right_en = f"splits {_names(_SHARDED[stage], 'en')}" if stage else "splits nothing"
                report.problem(f"stage {stage}: {yours_vi}, nhưng stage {stage} {right_vi} (stage 1: trạng thái "
                               "optimizer; stage 2: thêm gradient; stage 3: thêm tham số).",
                               f"stage {stage}: {yours_en}, but stage {stage} {right_en} (stage 1: optimizer state; "
                               "stage 2: plus gradients; stage 3: plus parameters).")
                return
    report.problem(f"per_gpu_bytes({n:_}, {gpus}, {stage}) = {got:,.0f} byte, đúng là {want:,.0f} "
                   f"(2 + 2 + 12 byte mỗi tham số; phần được shard chia cho {gpus}).",
                   f"per_gpu_bytes({n:_}, {gpus}, {stage}) = {got:,.0f} bytes, the right count is {want:,.0f} "
                   f"(2 + 2 + 12 bytes per parameter; the sharded parts divided by {gpus}).")


def _evaluate_sharding(report: Report, per_gpu_bytes=None) -> None:
    report.require_function(per_gpu_bytes, "per_gpu_bytes(num_params, num_gpus, stage)")
    for n, gpus, stage in _CASES:
        value = report.call(f"per_gpu_bytes({n:_}, {gpus}, {stage})", per_gpu_bytes, n, gpus, stage)
        if value is None or value is Ellipsis:
            report.missing_part("per_gpu_bytes chưa trả về gì (thiếu return).", "per_gpu_bytes returns nothing yet "
                                "(no return).", stop=True)
        got = number(value)
        if got is None:
            report.problem(f"per_gpu_bytes phải trả về một số byte, không phải {type(value).__name__}.",
                           f"per_gpu_bytes must return a number of bytes, not {type(value).__name__}.", stop=True)
        want = sharded_training_memory(n, num_gpus=gpus, stage=stage).total
        if not math.isclose(got, want, rel_tol=1e-6, abs_tol=16 * gpus):   # n / gpus or ceil(n / gpus): both fine
            _diagnose_sharding(report, n, gpus, stage, got, want)
            return
    ddp = sharded_training_memory(7_000_000_000, 8, 0).total
    zero3 = sharded_training_memory(7_000_000_000, 8, 3).total
    report.success(f"khớp sharded_training_memory ở mọi stage. 7 tỷ tham số trên 8 GPU: DDP {ddp / 1e9:.0f} GB mỗi GPU, "
                   f"ZeRO-3 {zero3 / 1e9:.0f} GB mỗi GPU (chưa kể activation).",
                   f"matches sharded_training_memory at every stage. 7 billion parameters on 8 GPUs: DDP "
                   f"{ddp / 1e9:.0f} GB per GPU, ZeRO-3 {zero3 / 1e9:.0f} GB per GPU (activations not included).")


task2 = Exercise(
    "task2",
    ("Bài 14.7 · Bộ nhớ mỗi GPU với ZeRO", "Lesson 14.7 · Memory per GPU under ZeRO"),
    _evaluate_sharding,
    hints=[
        ("Mỗi tham số: 2 byte tham số FP16, 2 byte gradient FP16, 12 byte trạng thái optimizer. Phần nào được shard "
         "thì chia cho num_gpus.",
         "Per parameter: 2 bytes of FP16 parameters, 2 of FP16 gradients, 12 of optimizer state. A sharded part is "
         "divided by num_gpus."),
        ("stage 0: không chia gì; stage 1: chia phần optimizer; stage 2: thêm gradient; stage 3: thêm tham số. "
         "Vd stage 2: n * 2 + n * 2 / g + n * 12 / g.",
         "stage 0: nothing split; stage 1: the optimizer part; stage 2: plus gradients; stage 3: plus parameters. "
         "E.g. stage 2: n * 2 + n * 2 / g + n * 12 / g."),
    ],
    solution='''
def per_gpu_bytes(num_params, num_gpus, stage):
    params, grads, optimizer = 2 * num_params, 2 * num_params, 12 * num_params
    if stage >= 1:
        optimizer /= num_gpus          # ZeRO-1: chia trạng thái optimizer
    if stage >= 2:
        grads /= num_gpus              # ZeRO-2: chia thêm gradient
    if stage >= 3:
        params /= num_gpus             # ZeRO-3 / FSDP: chia cả tham số
    return params + grads + optimizer
''',
    group="lesson07",
)

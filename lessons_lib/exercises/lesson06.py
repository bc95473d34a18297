"""Lesson 06's checked task: ``training_bytes(model) -> (params, grads, adam)`` by hand, compared on three models
(float32, a frozen first layer, bfloat16) with the bytes real tensors hold after a real Adam step."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import torch
from torch import nn

from ..bench.timing import format_count
from ..memory import format_bytes, training_state_sizes
from ._core import Exercise, Report, Wrong, is_blank, number


def _lesson_mlp(dtype: torch.dtype = torch.float32) -> nn.Sequential:
    return nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)).to(dtype)


def _cases() -> list[tuple[str, nn.Module]]:
    frozen = _lesson_mlp()
    frozen[0].requires_grad_(False)                       # e.g. a pretrained first layer kept fixed
    return [
        ("MLP 128-256-256-10 (float32)", _lesson_mlp()),
        ("cùng MLP, lớp đầu bị đóng băng (requires_grad=False)", frozen),
        ("cùng MLP ở bfloat16", _lesson_mlp(torch.bfloat16)),
    ]


def _measured_bytes(model: nn.Module) -> tuple[int, int, int]:
    """Return (params, grads, Adam exp_avg + exp_avg_sq) bytes after one real Adam step on a copy of `model`."""
    twin = copy.deepcopy(model)
    trainable = [p for p in twin.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(trainable, lr=1e-3)
    for p in trainable:
        p.grad = torch.zeros_like(p)                      # a real step needs gradients; their values do not matter
    optimizer.step()
    sizes = training_state_sizes(twin, optimizer)
    return sizes.params, sizes.grads, sizes.optimizer_by_key["exp_avg"] + sizes.optimizer_by_key["exp_avg_sq"]


def _as_triple(report: Report, value) -> tuple[float, float, float]:
    report.require_return(value, "training_bytes", "params, grads, adam")
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        report.problem(f"training_bytes phải trả về bộ ba (params, grads, adam), không phải {type(value).__name__}.",
                       stop=True)
    if any(is_blank(v) for v in value):
        names = [n for n, v in zip(("params", "grads", "adam"), value, strict=True) if is_blank(v)]
        report.missing_part(f"chưa tính {', '.join(names)}.", stop=True)
    numbers = [number(v) for v in value]
    if any(n is None for n in numbers):
        report.problem("params, grads, adam phải là số byte (int), vd sum(p.numel() * p.element_size() ...).",
                       stop=True)
    return tuple(numbers)


def _answer(where: str, got: tuple[float, float, float], model: nn.Module) -> SimpleNamespace:
    """Return the learner's (params, grads, adam) for `model`, beside what that model really holds."""
    weights = list(model.parameters())
    trainable = [p for p in weights if p.requires_grad]
    linears = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]
    return SimpleNamespace(where=where, params=got[0], grads=got[1], adam=got[2], right=_measured_bytes(model),
                           numel=sum(p.numel() for p in weights), trainable=sum(p.numel() for p in trainable),
                           size=weights[0].element_size(), dtype=str(weights[0].dtype).removeprefix("torch."),
                           weights_only=sum(w.numel() * w.element_size() for w in linears),
                           steps=4 * len(trainable))  # one float32 `step` counter per tensor


def _row(name: str, shows, text) -> Wrong:
    """Return a Wrong row whose message starts with the model it was found on."""
    return Wrong(name, shows, lambda a: f"[{a.where}] " + (text(a) if callable(text) else text))


#: For each of params, grads and adam: when it is wrong, its typical slips (the last row: any other value).
PARAMS_WRONGS = [
    _row("elements", lambda a: a.params == a.numel, lambda a: (
        f"params = {format_count(a.params)} là số phần tử, chưa phải số byte: nhân với p.element_size() (4 với "
        "float32, 2 với bfloat16).")),
    _row("bits", lambda a: a.params == 8 * a.right[0], "params lớn gấp 8 lần: đó là số bit; hỏi số byte."),
    _row("hard-coded 4", lambda a: a.params == 4 * a.numel and a.size != 4, lambda a: (
        f"params = số phần tử × 4, nhưng mô hình này mỗi số chỉ {a.size} byte: đừng viết cứng 4, dùng "
        "p.element_size().")),
    _row("no bias", lambda a: a.params == a.weights_only, "params chỉ tính weight của các lớp Linear, quên bias: "
                                                          "cộng mọi tensor trong model.parameters()."),
    _row("params", lambda a: True, lambda a: (
        f"params = {format_count(a.params)} byte, đúng là {format_count(a.right[0])} ({format_bytes(a.right[0])}).")),
]
GRADS_WRONGS = [
    _row("frozen grads", lambda a: a.grads == a.right[0] != a.right[1],
         "grads = params, nhưng tham số requires_grad=False không có gradient: chỉ cộng các p có p.requires_grad."),
    _row("grad elements", lambda a: a.grads == a.trainable, "grads là số phần tử, chưa nhân số byte mỗi phần tử."),
    _row("grads hard-coded 4", lambda a: a.grads == 4 * a.trainable and a.size != 4, lambda a: (
        f"grads viết cứng 4 byte/số; gradient có cùng dtype với tham số ({a.size} byte).")),
    _row("grads", lambda a: True, lambda a: (
        f"grads = {format_count(a.grads)} byte, đúng là {format_count(a.right[1])}: gradient có đúng kích thước và "
        "dtype của tham số được train.")),
]
ADAM_WRONGS = [
    _row("one buffer", lambda a: a.adam == a.right[1], "adam = grads: Adam giữ HAI buffer cho mỗi tham số được "
                                                       "train (exp_avg và exp_avg_sq), tức 2 × grads."),
    _row("frozen adam", lambda a: a.adam == 2 * a.right[0] != 2 * a.right[1],
         "adam = 2 × params, nhưng Adam chỉ giữ trạng thái cho tham số được train (requires_grad): 2 × grads."),
    _row("float32 state", lambda a: a.adam in (8 * a.trainable, 8 * a.trainable + a.steps) and a.size != 4,
         lambda a: (f"adam tính hai buffer ở float32 (4 byte/số), nhưng mô hình này là {a.dtype}: torch.optim.Adam "
                    f"tạo exp_avg và exp_avg_sq cùng dtype với tham số ({a.size} byte/số), nên adam = 2 × grads. Chỉ "
                    "khi optimizer giữ bản chép FP32 của trọng số (master weights, như vài thư viện mixed precision) "
                    "thì trạng thái mới là 4 byte/số.")),
    _row("too much", lambda a: a.adam in (2 * a.right[2], sum(a.right), a.right[2] + a.right[0]),
         "adam quá lớn: chỉ tính hai buffer exp_avg và exp_avg_sq (2 × grads), không cộng tham số hay gradient vào."),
    _row("adam", lambda a: True, lambda a: (
        f"adam = {format_count(a.adam)} byte, đúng là {format_count(a.right[2])} (exp_avg + exp_avg_sq).")),
]


def _evaluate(report: Report, training_bytes=None) -> None:
    report.require_function(training_bytes, "training_bytes(model)")
    for where, model in _cases():
        got = _as_triple(report, report.call("training_bytes(model)", training_bytes, model))
        answer = _answer(where, got, model)
        params, grads, adam = answer.right
        for wrong, rows in ((got[0] != params, PARAMS_WRONGS), (got[1] != grads, GRADS_WRONGS),
                            (got[2] not in (adam, adam + answer.steps), ADAM_WRONGS)):  # the step counters may count
            if wrong:
                report.diagnose(rows, answer, stop=False)
        if report.problems:
            return                                         # one model's problems at a time
    params, grads, adam = _measured_bytes(_cases()[1][1])
    report.success("đúng trên cả ba mô hình, kể cả khi có lớp đóng băng (không gradient, không trạng thái Adam) và "
                   f"khi tham số là bfloat16 (2 byte/số). Mô hình có lớp đóng băng: tham số {format_bytes(params)}, "
                   f"gradient {format_bytes(grads)}, Adam {format_bytes(adam)}.")
    report.note("số byte của một tensor không phụ thuộc thiết bị: trên GPU, memory_allocated() tăng đúng chừng ấy "
                "(làm tròn lên bội số 512 byte mỗi tensor).")


task1 = Exercise("task1", "Bài 14.6 · Tự tính bộ nhớ của tham số, gradient và Adam", _evaluate,
                 wrongs=PARAMS_WRONGS + GRADS_WRONGS + ADAM_WRONGS, hints=[
    "Byte của một tensor = p.numel() * p.element_size(). params: cộng qua mọi p trong model.parameters(); "
    "grads: chỉ những p có p.requires_grad.",
    "Adam giữ exp_avg và exp_avg_sq, mỗi cái cùng kích thước và dtype với tham số được train: adam = 2 * grads.",
])

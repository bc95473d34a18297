"""Lesson 06's checked task: ``training_bytes(model) -> (params, grads, adam)`` by hand, compared on three models
(float32, a frozen first layer, bfloat16) with the bytes real tensors hold after a real Adam step."""

from __future__ import annotations

import copy

import torch
from torch import nn

from ..bench.timing import format_count
from ..memory import format_bytes, optimizer_state_bytes
from ._core import Exercise, Report, is_blank, number

GROUP = "lesson06"  # the exercise group (tools/grade.py reads it)


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
    state = optimizer_state_bytes(optimizer)
    params = sum(p.numel() * p.element_size() for p in twin.parameters())
    grads = sum(p.grad.numel() * p.grad.element_size() for p in twin.parameters() if p.grad is not None)
    return params, grads, state.get("exp_avg", 0) + state.get("exp_avg_sq", 0)


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


def _diagnose(report: Report, where: str, model: nn.Module, got: tuple[float, float, float]) -> bool:
    """Record what is wrong with `got` for `model`; return True when it is right."""
    params, grads, adam = _measured_bytes(model)
    all_numel = sum(p.numel() for p in model.parameters())
    trainable_numel = sum(p.numel() for p in model.parameters() if p.requires_grad)
    size = next(model.parameters()).element_size()
    model_dtype = next(model.parameters()).dtype
    weights_only = sum(m.weight.numel() * m.weight.element_size() for m in model.modules() if isinstance(m, nn.Linear))
    g_params, g_grads, g_adam = got
    steps = 4 * sum(1 for p in model.parameters() if p.requires_grad)   # one float32 `step` counter per tensor
    parts = [
        (g_params != params, [
            (g_params == all_numel, f"params = {format_count(g_params)} là số phần tử, chưa phải số byte: nhân với "
                                    "p.element_size() (4 với float32, 2 với bfloat16)."),
            (g_params == 8 * params, "params lớn gấp 8 lần: đó là số bit; hỏi số byte."),
            (g_params == 4 * all_numel and size != 4,
             f"params = số phần tử × 4, nhưng mô hình này mỗi số chỉ {size} byte: đừng viết cứng 4, dùng "
             "p.element_size()."),
            (g_params == weights_only,
             "params chỉ tính weight của các lớp Linear, quên bias: cộng mọi tensor trong "
             "model.parameters()."),
            (True, f"params = {format_count(g_params)} byte, đúng là {format_count(params)} ({format_bytes(params)})."),
        ]),
        (g_grads != grads, [
            (g_grads == params and grads != params,
             "grads = params, nhưng tham số requires_grad=False không có gradient: chỉ cộng các p có "
             "p.requires_grad."),
            (g_grads == trainable_numel, "grads là số phần tử, chưa nhân số byte mỗi phần tử."),
            (g_grads == 4 * trainable_numel and size != 4,
             f"grads viết cứng 4 byte/số; gradient có cùng dtype với tham số ({size} byte)."),
            (True, f"grads = {format_count(g_grads)} byte, đúng là {format_count(grads)}: gradient có đúng kích thước và dtype "
                   "của tham số được train."),
        ]),
        (g_adam not in (adam, adam + steps), [
            (g_adam == grads, "adam = grads: Adam giữ HAI buffer cho mỗi tham số được train (exp_avg và "
                              "exp_avg_sq), tức 2 × grads."),
            (g_adam == 2 * params and params != grads,
             "adam = 2 × params, nhưng Adam chỉ giữ trạng thái cho tham số được train (requires_grad): "
             "2 × grads."),
            (g_adam in (8 * trainable_numel, 8 * trainable_numel + steps) and size != 4,
             f"adam tính hai buffer ở float32 (4 byte/số), nhưng mô hình này là {str(model_dtype)[6:]}: "
             "torch.optim.Adam tạo exp_avg và exp_avg_sq cùng dtype với tham số "
             f"({size} byte/số), nên adam = 2 × grads. Chỉ khi optimizer giữ bản chép FP32 của trọng số "
             "(master weights, như vài thư viện mixed precision) thì trạng thái mới là 4 byte/số."),
            (g_adam in (2 * adam, adam + grads + params, adam + params),
             "adam quá lớn: chỉ tính hai buffer exp_avg và exp_avg_sq (2 × grads), không cộng tham số hay "
             "gradient vào."),
            (True, f"adam = {format_count(g_adam)} byte, đúng là {format_count(adam)} (exp_avg + exp_avg_sq)."),
        ]),
    ]
    for wrong, slips in parts:
        if wrong:
            report.problem(f"[{where}] " + next(message for matches, message in slips if matches))
    return not any(wrong for wrong, _ in parts)


def _evaluate(report: Report, training_bytes=None) -> None:
    report.require_function(training_bytes, "training_bytes(model)")
    for where, model in _cases():
        got = _as_triple(report, report.call("training_bytes(model)", training_bytes, model))
        if not _diagnose(report, where, model, got):
            return                                         # one model's problems at a time
    params, grads, adam = _measured_bytes(_cases()[1][1])
    report.success("đúng trên cả ba mô hình, kể cả khi có lớp đóng băng (không gradient, không trạng thái Adam) và "
                   f"khi tham số là bfloat16 (2 byte/số). Mô hình có lớp đóng băng: tham số {format_bytes(params)}, "
                   f"gradient {format_bytes(grads)}, Adam {format_bytes(adam)}.")
    report.note("số byte của một tensor không phụ thuộc thiết bị: trên GPU, memory_allocated() tăng đúng chừng ấy "
                "(làm tròn lên bội số 512 byte mỗi tensor).")


task1 = Exercise("task1", "Bài 14.6 · Tự tính bộ nhớ của tham số, gradient và Adam", _evaluate,
                 group=GROUP, hints=[
    "Byte của một tensor = p.numel() * p.element_size(). params: cộng qua mọi p trong model.parameters(); "
    "grads: chỉ những p có p.requires_grad.",
    "Adam giữ exp_avg và exp_avg_sq, mỗi cái cùng kích thước và dtype với tham số được train: adam = 2 * grads.",
])

"""Lesson 06's checked task (bytes of parameters, gradients and Adam state by hand): the solution passes, each typical
slip fails with its own message, a blank is "not done yet", and nothing raises."""

from __future__ import annotations

import pytest
import torch
from _lesson_tasks import assert_checks_never_raise, assert_fails, assert_missing, assert_passes, load

from lessons_lib.exercises import _core
from lessons_lib.exercises.lesson06 import _cases, _measured_bytes, task1
from lessons_lib.memory import training_state_sizes

RIGHT = '''
def training_bytes(model):
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    grads = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return params, grads, 2 * grads
'''


def test_the_group_lists_the_task():
    assert _core.GROUPS["lesson06"] == {"task1": task1}


def test_solution_passes(tmp_path):
    assert_passes(task1.evaluate(load(task1.solution_code, tmp_path, "training_bytes")))
    assert_passes(task1.evaluate(load(RIGHT, tmp_path, "training_bytes")))


def test_counting_the_step_counters_too_is_accepted(tmp_path):
    code = RIGHT.replace("2 * grads", "2 * grads + 4 * sum(1 for p in model.parameters() if p.requires_grad)")
    assert_passes(task1.evaluate(load(code, tmp_path, "training_bytes")))


def test_measured_bytes_agree_with_training_state_sizes_after_a_real_step():
    for _, model in _cases():
        params, grads, adam = _measured_bytes(model)
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.Adam(trainable)
        for p in trainable:
            p.grad = torch.zeros_like(p)
        optimizer.step()
        sizes = training_state_sizes(model, optimizer)
        assert (sizes.params, sizes.grads) == (params, grads)
        assert sizes.optimizer_by_key["exp_avg"] + sizes.optimizer_by_key["exp_avg_sq"] == adam
    assert _measured_bytes(_cases()[1][1])[1] < _measured_bytes(_cases()[0][1])[1]   # the frozen layer has no gradient


@pytest.mark.parametrize(
    ("code", "fragment"),
    [
        ("n = sum(p.numel() for p in model.parameters())\n    return n, n, 2 * n", "số phần tử"),
        ("n = sum(p.numel() for p in model.parameters())\n    return 32 * n, 32 * n, 64 * n", "bit"),
        ("n = sum(p.numel() for p in model.parameters() if p.requires_grad)\n"
         "    a = sum(p.numel() for p in model.parameters())\n    return 4 * a, 4 * n, 8 * n", "đừng viết cứng 4"),
        ("w = sum(m.weight.numel() * 4 for m in model.modules() if isinstance(m, nn.Linear))\n    return w, w, 2 * w",
         "quên bias"),
        ("b = sum(p.numel() * p.element_size() for p in model.parameters())\n    return b, b, 2 * b",
         "requires_grad=False không có gradient"),
        ("b = sum(p.numel() * p.element_size() for p in model.parameters())\n"
         "    g = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)\n"
         "    return b, g, 2 * b", "chỉ giữ trạng thái cho tham số được train"),
        ("b = sum(p.numel() * p.element_size() for p in model.parameters())\n    return b, b, b", "HAI buffer"),
        ("b = sum(p.numel() * p.element_size() for p in model.parameters())\n    return b, b, 4 * b", "quá lớn"),
        ("b = sum(p.numel() * p.element_size() for p in model.parameters())\n    return b, b, 2 * b + 7", "adam = "),
        ("return 1, 2", "bộ ba"),
        ("return 'a', 'b', 'c'", "số byte"),
    ],
    ids=["elements", "bits", "hard-coded-4", "no-bias", "frozen-grads", "frozen-adam", "adam-1x", "adam-total",
         "adam-off", "pair", "strings"],
)
def test_typical_slips_fail_with_their_message(tmp_path, code, fragment):
    answer = load(f"def training_bytes(model):\n    {code}\n", tmp_path, "training_bytes")
    assert_fails(task1.evaluate(answer), fragment)


def test_adam_state_counted_as_float32_for_a_bf16_model_is_named(tmp_path):
    """Issue 38: 4 bytes per Adam number on the bfloat16 model is not "added params and grads"."""
    code = ("params = sum(p.numel() * p.element_size() for p in model.parameters())\n"
            "    grads = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)\n"
            "    return params, grads, 2 * 4 * sum(p.numel() for p in model.parameters() if p.requires_grad)")
    report = task1.evaluate(load(f"def training_bytes(model):\n    {code}\n", tmp_path, "training_bytes"))
    assert_fails(report, "cùng dtype với tham số")
    assert_fails(report, "bfloat16")
    text = str(report)
    assert "không cộng tham số" not in text


def test_blank_answers_are_not_done_yet(tmp_path):
    assert_missing(task1.evaluate(None), "training_bytes")
    blank = load("def training_bytes(model):\n    params = grads = adam = ...\n    return params, grads, adam\n",
                 tmp_path, "training_bytes")
    assert_missing(task1.evaluate(blank), "params, grads, adam")
    assert_missing(task1.evaluate(load("def training_bytes(model):\n    pass\n", tmp_path, "training_bytes")))


def test_an_error_in_the_answer_is_reported_not_raised(tmp_path):
    answer = load("def training_bytes(model):\n    return model.weight.numel()\n", tmp_path, "training_bytes")
    assert_fails(task1.evaluate(answer), "training_bytes(model)")


def test_never_raises(capsys):
    assert_checks_never_raise(task1, capsys)



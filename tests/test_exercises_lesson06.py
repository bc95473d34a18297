"""Lesson 06's checked task (bytes of parameters, gradients and Adam state by hand): the solution passes, a blank is
"chưa làm", each row of the checker's tables is found by an example of it, and nothing raises."""

from __future__ import annotations

import pytest
from _lesson_tasks import (
    assert_checks_never_raise,
    assert_fails,
    assert_missing,
    load,
    rows,
)

from lessons_lib.exercises.lesson06 import task1

BYTES = "sum(p.numel() * p.element_size() for p in model.parameters(){})"
ALL, TRAINED = BYTES.format(""), BYTES.format(" if p.requires_grad")
NUMEL = "sum(p.numel() for p in model.parameters(){})"
RIGHT = f"params, grads = {ALL}, {TRAINED}\n    return params, grads, 2 * grads"

#: An example of each row of the checker's tables: (body of training_bytes, what the message must name).
EXAMPLES = {
    "elements": (f"n = {NUMEL.format('')}\n    return n, {TRAINED}, 2 * {TRAINED}", "p.element_size()"),
    "bits": (f"return 8 * {ALL}, {TRAINED}, 2 * {TRAINED}", "bit"),
    "hard-coded 4": (f"return 4 * {NUMEL.format('')}, {TRAINED}, 2 * {TRAINED}", "p.element_size()"),
    "no bias": ("w = sum(m.weight.numel() * m.weight.element_size() for m in model.modules() "
                f"if isinstance(m, nn.Linear))\n    return w, {TRAINED}, 2 * {TRAINED}", "bias"),
    "params": (f"return {ALL} + 1, {TRAINED}, 2 * {TRAINED}", "params ="),
    "frozen grads": (f"return {ALL}, {ALL}, 2 * {TRAINED}", "p.requires_grad"),
    "grad elements": (f"return {ALL}, {NUMEL.format(' if p.requires_grad')}, 2 * {TRAINED}", "số byte"),
    "grads hard-coded 4": (f"return {ALL}, 4 * {NUMEL.format(' if p.requires_grad')}, 2 * {TRAINED}", "dtype"),
    "grads": (f"return {ALL}, {TRAINED} + 1, 2 * {TRAINED}", "grads ="),
    "one buffer": (f"return {ALL}, {TRAINED}, {TRAINED}", "exp_avg_sq"),
    "frozen adam": (f"return {ALL}, {TRAINED}, 2 * {ALL}", "requires_grad"),
    "float32 state": (f"return {ALL}, {TRAINED}, 8 * {NUMEL.format(' if p.requires_grad')}", "bfloat16"),
    "too much": (f"return {ALL}, {TRAINED}, 2 * {TRAINED} + {ALL} + {TRAINED}", "2 × grads"),
    "adam": (f"return {ALL}, {TRAINED}, 2 * {TRAINED} + 7", "exp_avg + exp_avg_sq"),
}


def answer(tmp_path, body):
    return load(f"def training_bytes(model):\n    {body}\n", tmp_path, "training_bytes")


def test_solution_and_other_right_answers_pass(tmp_path):
    assert task1.evaluate(load(task1.solution_code, tmp_path, "training_bytes")).passed
    assert task1.evaluate(answer(tmp_path, RIGHT)).passed
    steps = "4 * sum(1 for p in model.parameters() if p.requires_grad)"   # Adam's step counters may be counted too
    assert task1.evaluate(answer(tmp_path, RIGHT.replace("2 * grads", f"2 * grads + {steps}"))).passed


@pytest.mark.parametrize("name", rows(task1))  # a row without an example fails (KeyError)
def test_each_slip_is_found_and_named(name, tmp_path):
    body, named = EXAMPLES[name]
    assert_fails(task1.evaluate(answer(tmp_path, body)), named, row=name)


@pytest.mark.parametrize(("body", "names"), [("return 1, 2", "(params, grads, adam)"), ("return 'a', 'b', 'c'", "int")])
def test_other_shapes_say_what_to_return(body, names, tmp_path):
    assert_fails(task1.evaluate(answer(tmp_path, body)), names)


def test_blank_answers_are_not_done_yet(tmp_path):
    assert_missing(task1.evaluate(None), "training_bytes")
    assert_missing(task1.evaluate(answer(tmp_path, "params = grads = adam = ...\n    return params, grads, adam")),
                   "params, grads, adam")
    assert_missing(task1.evaluate(answer(tmp_path, "pass")))


def test_an_error_in_the_answer_is_reported_not_raised(tmp_path, capsys):
    assert_fails(task1.evaluate(answer(tmp_path, "return model.weight.numel()")), "training_bytes(model)")
    assert_checks_never_raise(task1, capsys)

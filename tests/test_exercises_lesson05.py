"""Lesson 05's checked task: the solution passes, each slip gets its own message, a blank is "not done yet"."""

from __future__ import annotations

import pytest
import torch
from _lesson_tasks import assert_checks_never_raise, assert_fails, assert_missing, lines_of, load, rows

from lessons_lib.exercises.lesson05 import task1

HEAD = '''
def amp_step(model, x, y, optimizer, scaler, amp_dtype, max_norm):
'''
ZERO = "    optimizer.zero_grad(set_to_none=True)\n"
FORWARD = ("    with torch.autocast(device_type=x.device.type, dtype=amp_dtype):\n"
           "        loss = F.cross_entropy(model(x), y)\n")
BACKWARD = "    scaler.scale(loss).backward()\n"
UNSCALE = "    scaler.unscale_(optimizer)\n"
CLIP = "    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n"
STEP = "    scaler.step(optimizer)\n"
UPDATE = "    scaler.update()\n"
RETURN = "    return loss.item()\n"
RIGHT = [ZERO, FORWARD, BACKWARD, UNSCALE, CLIP, STEP, UPDATE, RETURN]


def answer(tmp_path, lines):
    return load(HEAD + "".join(lines), tmp_path, "amp_step")


def test_solution_passes(tmp_path):
    assert task1.evaluate(load(task1.solution_code, tmp_path, "amp_step")).passed
    assert task1.evaluate(answer(tmp_path, RIGHT)).passed
    assert task1.evaluate(answer(tmp_path, [ZERO.replace("True", "False"), *RIGHT[1:]])).passed


#: The lines of a wrong amp_step for each row of the table, and what its message must name.
WRONG = {
    "no autocast": ([ZERO, "    loss = F.cross_entropy(model(x), y)\n", *RIGHT[2:]], ["torch.autocast"]),
    "another scaler": ([ZERO, FORWARD, "    scaler = torch.amp.GradScaler(x.device.type)\n", *RIGHT[2:]],
                       ["`scaler`"]),
    "loss not scaled": ([ZERO, FORWARD, "    loss.backward()\n", CLIP, "    optimizer.step()\n", RETURN],
                        ["scaler.scale(loss).backward()"]),
    "no zero_grad": (RIGHT[1:], ["optimizer.zero_grad()"]),
    "optimizer.step directly": ([*RIGHT[:5], "    optimizer.step()\n", UPDATE, RETURN],
                                ["optimizer.step()", "scaler.step(optimizer)"]),
    "no step": ([*RIGHT[:5], UPDATE, RETURN], ["scaler.step(optimizer)"]),
    "clip with S": ([ZERO, FORWARD, BACKWARD, CLIP, STEP, UPDATE, RETURN], ["scaler.unscale_(optimizer)", "S = 1024"]),
    "no unscale, no clip": ([ZERO, FORWARD, BACKWARD, STEP, UPDATE, RETURN], ["scaler.unscale_", "clip_grad_norm_"]),
    "clip before unscale": ([ZERO, FORWARD, BACKWARD, CLIP, UNSCALE, STEP, UPDATE, RETURN], ["unscale_", "clip"]),
    "no clip": ([ZERO, FORWARD, BACKWARD, UNSCALE, STEP, UPDATE, RETURN], ["clip_grad_norm_", "max_norm = 0.1"]),
    "no update": (RIGHT[:6] + [RETURN], ["scaler.update()"]),
    "update before step": ([*RIGHT[:5], UPDATE, STEP, RETURN], ["scaler.update()", "scaler.step(optimizer)"]),
}


@pytest.mark.parametrize("row", rows(task1))
def test_each_misconception_has_its_message(row, tmp_path):
    lines, names = WRONG[row]
    assert_fails(task1.evaluate(answer(tmp_path, lines)), *names, row=row)


@pytest.mark.parametrize(("lines", "named"), [
    ([*RIGHT[:-1], "    return loss\n"], "loss.item()"), ([*RIGHT[:-1], "    return 'done'\n"], "str"),
    ([*RIGHT[:-1], "    return 0.0\n"], "0.0000"),
    ([ZERO, FORWARD, BACKWARD, STEP, UNSCALE, CLIP, UPDATE, RETURN], "unscale_() is being called after step()"),
    (["    return model(x) @ torch.ones(3)\n"], "amp_step(model, x, y, optimizer, scaler")],
    ids=["returns-tensor", "returns-str", "wrong-loss", "unscale-after-step", "raises"])
def test_what_it_returns_and_raises_is_named(tmp_path, lines, named):
    feedback = task1.evaluate(answer(tmp_path, lines))
    assert feedback.status == "fail" and named in lines_of(feedback), str(feedback)


def test_a_too_small_max_norm_is_caught_by_the_weights(tmp_path):
    lines = list(RIGHT)
    lines[4] = "    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm / 2)\n"
    feedback = task1.evaluate(answer(tmp_path, lines))
    assert feedback.status == "fail" and "max_norm" in lines_of(feedback), str(feedback)


def test_blank_and_empty_answers_are_not_done_yet(tmp_path):
    assert_missing(task1.evaluate(None), "amp_step")
    assert_missing(task1.evaluate(...))
    assert_missing(task1.evaluate(answer(tmp_path, ["    ...  # TODO\n"])), "chưa làm gì")


def test_the_scaler_is_restored_after_a_check(tmp_path):
    before = {name: getattr(torch.amp.GradScaler, name) for name in ("scale", "unscale_", "step", "update")}
    task1.evaluate(answer(tmp_path, [*RIGHT[:2], "    raise ValueError('boom')\n"]))
    assert {name: getattr(torch.amp.GradScaler, name) for name in before} == before


def test_never_raises(capsys):
    assert_checks_never_raise(task1, capsys)

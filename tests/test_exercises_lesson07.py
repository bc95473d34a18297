"""Lesson 07's checked tasks (a training loop with gradient accumulation; per-GPU bytes under ZeRO): the solutions
pass, each typical slip fails with its own message, a blank is "not done yet", and nothing raises."""

from __future__ import annotations

import pytest
from _lesson_tasks import assert_checks_never_raise, assert_fails, assert_missing, assert_passes, load

from lessons_lib.exercises import _core
from lessons_lib.exercises.lesson07 import task1


def test_the_group_lists_both_tasks():
    assert _core.GROUPS["lesson07"] == {"task1": task1}


# --------------------------------------------------------------------------- task 1: accumulation loop

LOOP = '''
def train_accumulated(model, optimizer, micro_batches, accum_steps):
{body}
'''
RIGHT = '''    optimizer.zero_grad()
    for i, (xb, yb) in enumerate(micro_batches):
        loss = F.cross_entropy(model(xb), yb) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()'''


def loop(tmp_path, body):
    return load(LOOP.format(body=body), tmp_path, "train_accumulated")


def test_accumulation_solution_passes(tmp_path):
    assert_passes(task1.evaluate(load(task1.solution_code, tmp_path, "train_accumulated")))
    assert_passes(task1.evaluate(loop(tmp_path, RIGHT)))


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (RIGHT.replace(" / accum_steps", ""), "chưa chia cho accum_steps"),
        (RIGHT.replace("        loss = F", "        optimizer.zero_grad()\n        loss = F"), "zero_grad trước MỖI"),
        (RIGHT.replace("            optimizer.step()\n            optimizer.zero_grad()", "            optimizer.step()"),
         "thiếu optimizer.zero_grad() sau"),
        (RIGHT.replace("(i + 1) % accum_steps == 0", "i % accum_steps == 0"), "step sai micro-batch"),
        (RIGHT.replace("if (i + 1) % accum_steps == 0:", "if True:"), "sau MỖI micro-batch"),
        (RIGHT.replace("(i + 1) % accum_steps == 0", "i == 3"), "được gọi 1 lần"),
        (RIGHT.replace("            optimizer.step()\n", ""), "không có optimizer.step()"),
        ("    x = torch.cat([b[0] for b in micro_batches])\n    y = torch.cat([b[1] for b in micro_batches])\n"
         "    optimizer.zero_grad()\n    F.cross_entropy(model(x), y).backward()\n    optimizer.step()",
         "lớn hơn micro-batch"),
        (RIGHT.replace("enumerate(micro_batches)", "enumerate(micro_batches[:4])"), "chỉ có 4 lần forward"),
        (RIGHT.replace("/ accum_steps", "/ accum_steps * 0.5"), "khác train trên batch lớn"),
    ],
    ids=["no-division", "zero-each", "no-zero-after-step", "offset", "step-each", "one-step", "no-step", "concat",
         "half-the-data", "other"],
)
def test_accumulation_slips_fail_with_their_message(tmp_path, body, fragment):
    assert_fails(task1.evaluate(loop(tmp_path, body)), fragment)


def test_accumulation_blank_is_not_done_yet(tmp_path):
    assert_missing(task1.evaluate(None), "train_accumulated")
    assert_missing(task1.evaluate(loop(tmp_path, "    ...  # TODO")), "chưa làm gì")


def test_accumulation_error_is_reported_not_raised(tmp_path):
    assert_fails(task1.evaluate(loop(tmp_path, "    for xb in micro_batches:\n        model(xb)")),
                 "train_accumulated(model, optimizer, micro_batches")


# --------------------------------------------------------------------------- both


def test_never_raises(capsys):
    assert_checks_never_raise(task1, capsys)



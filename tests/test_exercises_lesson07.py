"""Lesson 07's checked task (a gradient-accumulation loop): the solution passes, a blank is "chưa làm", each row of
the checker's table of slips is found by an example of it, and nothing raises."""

from __future__ import annotations

import pytest
from _lesson_tasks import (
    assert_checks_never_raise,
    assert_fails,
    assert_missing,
    load,
    rows,
)

from lessons_lib.exercises.lesson07 import task1

RIGHT = '''    optimizer.zero_grad()
    for i, (xb, yb) in enumerate(micro_batches):
        loss = F.cross_entropy(model(xb), yb) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()'''

#: An example of each slip of the checker's table: (the loop's body, what the message must name).
EXAMPLES = {
    "one big batch": ("    x = torch.cat([b[0] for b in micro_batches])\n    y = torch.cat([b[1] for b in micro_batches])\n"
                      "    optimizer.zero_grad()\n    F.cross_entropy(model(x), y).backward()\n    optimizer.step()",
                      "TỪNG micro-batch"),
    "too few forwards": (RIGHT.replace("enumerate(micro_batches)", "enumerate(micro_batches[:4])"), "4 lần forward"),
    "no step": (RIGHT.replace("            optimizer.step()\n", ""), "optimizer.step()"),
    "step each": (RIGHT.replace("if (i + 1) % accum_steps == 0:", "if True:"), "(i + 1) % accum_steps == 0"),
    "step count": (RIGHT.replace("(i + 1) % accum_steps == 0", "i == 3"), "1 lần"),
    "no division": (RIGHT.replace(" / accum_steps", ""), "/ accum_steps"),
    "zero each": (RIGHT.replace("        loss = F", "        optimizer.zero_grad()\n        loss = F"),
                  "sau optimizer.step()"),
    "no zero after step": (RIGHT.replace("            optimizer.step()\n            optimizer.zero_grad()",
                                         "            optimizer.step()"), "optimizer.zero_grad()"),
    "offset": (RIGHT.replace("(i + 1) % accum_steps == 0", "i % accum_steps == 0"), "(i + 1) % accum_steps == 0"),
    "other": (RIGHT.replace("/ accum_steps", "/ accum_steps * 0.5"), "/ accum_steps"),
}


def loop(tmp_path, body):
    code = f"def train_accumulated(model, optimizer, micro_batches, accum_steps):\n{body}\n"
    return load(code, tmp_path, "train_accumulated")


def test_solution_passes(tmp_path):
    assert task1.evaluate(load(task1.solution_code, tmp_path, "train_accumulated")).passed
    assert task1.evaluate(loop(tmp_path, RIGHT)).passed


@pytest.mark.parametrize("name", rows(task1))  # a row without an example fails (KeyError)
def test_each_slip_is_found_and_named(name, tmp_path):
    body, named = EXAMPLES[name]
    assert_fails(task1.evaluate(loop(tmp_path, body)), named, row=name)


def test_blank_is_not_done_yet(tmp_path):
    assert_missing(task1.evaluate(None), "train_accumulated")
    assert_missing(task1.evaluate(loop(tmp_path, "    ...  # TODO")))


def test_an_error_is_reported_not_raised(tmp_path, capsys):
    assert_fails(task1.evaluate(loop(tmp_path, "    for xb in micro_batches:\n        model(xb)")),
                 "train_accumulated(model, optimizer, micro_batches")
    assert_checks_never_raise(task1, capsys)

"""Lesson 05's checked task (an AMP step with gradient clipping): the solution passes, each typical slip fails with
its own message, a blank is "not done yet", and nothing raises."""

from __future__ import annotations

import pytest
import torch
from _lesson_tasks import assert_checks_never_raise, assert_fails, assert_missing, assert_passes, load

from lessons_lib.exercises import _core
from lessons_lib.exercises.lesson05 import _MAX_NORM, task1

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


def test_the_group_lists_the_task():
    assert _core.GROUPS["lesson05"] == {"task1": task1}


def test_solution_passes(tmp_path):
    assert_passes(task1.evaluate(load(task1.solution_code, tmp_path, "amp_step")))
    assert_passes(task1.evaluate(answer(tmp_path, RIGHT)))


def test_zero_grad_without_set_to_none_passes_too(tmp_path):
    lines = list(RIGHT)
    lines[0] = "    optimizer.zero_grad(set_to_none=False)\n"
    assert_passes(task1.evaluate(answer(tmp_path, lines)))


@pytest.mark.parametrize(
    ("lines", "fragment"),
    [
        ([ZERO, FORWARD, BACKWARD, CLIP, UNSCALE, STEP, UPDATE, RETURN], "clip trước unscale_"),
        ([ZERO, FORWARD, BACKWARD, CLIP, STEP, UPDATE, RETURN], "TRƯỚC clip_grad_norm_"),
        ([ZERO, FORWARD, BACKWARD, STEP, UPDATE, RETURN], "chưa được clip"),
        ([ZERO, FORWARD, BACKWARD, UNSCALE, STEP, UPDATE, RETURN], "chưa clip"),
        ([ZERO, "    loss = F.cross_entropy(model(x), y)\n", BACKWARD, UNSCALE, CLIP, STEP, UPDATE, RETURN],
         "autocast"),
        ([FORWARD, BACKWARD, UNSCALE, CLIP, STEP, UPDATE, RETURN], "zero_grad"),
        ([ZERO, FORWARD, "    loss.backward()\n", CLIP, "    optimizer.step()\n", RETURN], "scaler.scale(loss)"),
        ([ZERO, FORWARD, BACKWARD, UNSCALE, CLIP, "    optimizer.step()\n", UPDATE, RETURN],
         "optimizer.step() trực tiếp"),
        ([ZERO, FORWARD, BACKWARD, UNSCALE, CLIP, STEP, RETURN], "thiếu scaler.update()"),
        ([ZERO, FORWARD, BACKWARD, UNSCALE, CLIP, UPDATE, STEP, RETURN], "SAU scaler.step"),
        ([ZERO, FORWARD, BACKWARD, STEP, UNSCALE, CLIP, UPDATE, RETURN], "unscale_() is being called after step()"),
        ([ZERO, FORWARD, "    scaler = torch.amp.GradScaler(x.device.type)\n", BACKWARD, UNSCALE, CLIP, STEP, UPDATE,
          RETURN], "GradScaler khác"),
        ([*RIGHT[:-1], "    return loss\n"], "loss.item()"),
        ([*RIGHT[:-1], "    return 'done'\n"], "loss.item()"),
        ([*RIGHT[:-1], "    return 0.0\n"], "loss của batch này"),
    ],
    ids=["clip-then-unscale", "no-unscale", "no-clip-no-unscale", "no-clip", "no-autocast", "no-zero-grad",
         "no-scaler", "optimizer-step", "no-update", "update-before-step", "unscale-after-step", "new-scaler",
         "returns-tensor", "returns-str", "wrong-loss"],
)
def test_typical_slips_fail_with_their_message(tmp_path, lines, fragment):
    assert_fails(task1.evaluate(answer(tmp_path, lines)), fragment)


def test_a_too_small_max_norm_is_caught_by_the_weights(tmp_path):
    lines = list(RIGHT)
    lines[4] = "    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm / 2)\n"
    assert_fails(task1.evaluate(answer(tmp_path, lines)), "trọng số khác bước chuẩn")


def test_blank_and_empty_answers_are_not_done_yet(tmp_path):
    assert_missing(task1.evaluate(None), "amp_step")
    assert_missing(task1.evaluate(...))
    assert_missing(task1.evaluate(answer(tmp_path, ["    ...  # TODO\n"])), "chưa làm gì")


def test_an_error_in_the_answer_is_reported_not_raised(tmp_path):
    feedback = task1.evaluate(answer(tmp_path, ["    return model(x) @ torch.ones(3)\n"]))
    assert_fails(feedback, "amp_step(model, x, y, optimizer, scaler")


def test_the_scaler_is_restored_after_a_check(tmp_path):
    before = {name: getattr(torch.amp.GradScaler, name) for name in ("scale", "unscale_", "step", "update")}
    task1.evaluate(answer(tmp_path, [*RIGHT[:2], "    raise ValueError('boom')\n"]))
    assert {name: getattr(torch.amp.GradScaler, name) for name in before} == before


def test_the_clip_really_matters_for_the_test_data():
    from lessons_lib.exercises.lesson05 import _device_and_dtype, _grad_norm
    from lessons_lib.training import make_classification_data, make_mlp

    device, _ = _device_and_dtype()
    model = make_mlp(16, 4, hidden=32, depth=1, seed=0, device=device)
    x, y = make_classification_data(64, 16, 4, seed=0, device=device)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    assert _grad_norm(model) > 2 * _MAX_NORM


def test_never_raises(capsys):
    assert_checks_never_raise(task1, capsys)



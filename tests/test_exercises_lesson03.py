"""Lesson 03's checked tasks: the solutions pass, each wrong answer fails with its own message, blanks are "missing"."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from _lesson_tasks import assert_fails, lines_of, rows, solution_of

from lessons_lib.exercises import _core
from lessons_lib.exercises.lesson03 import _missing_gpu, task1, task2

SCOPE = {"torch": torch, "nn": nn}


# --------------------------------------------------------------------------- task 1: misplaced


def _stub(model, device_or_path, device=None):
    ...


@pytest.mark.parametrize(("task", "name"), [(task1, "misplaced"), (task2, "load_weights")])
def test_solutions_pass_and_blanks_are_missing(task, name):
    feedback = task.evaluate(solution_of(task, name, SCOPE))
    assert feedback.passed and not any("weights_only" in note for note in feedback.notes), str(feedback)
    for blank in (None, ..., _stub):
        assert task.evaluate(blank).status == _core.MISSING


def _finder(keep, tensors=lambda m: [*m.named_parameters(), *m.named_buffers()], name=lambda n: n):
    """Return a misplaced that keeps `name` of each tensor that `keep(tensor, device, want)` picks."""
    def misplaced(model, device):
        want = torch.empty(0, device=device).device
        return [name(n) for n, t in tensors(model) if keep(t, device, want)]
    return misplaced


_OFF = lambda t, device, want: t.device != want  # noqa: E731 - the right test, which the wrong ones vary


def test_task1_comparing_type_and_index_passes_too():
    def type_and_index(t, device, want):  # index None counted as 0
        device = torch.device(device)
        return t.device.type != device.type or (t.device.index or 0) != (device.index or 0)

    assert task1.evaluate(_finder(type_and_index)).passed


def _no_return(model, device):
    [n for n, _ in model.named_parameters()]


#: A wrong misplaced for each row of task1's table, and what its message must name.
WRONG_TASK1 = {
    ".type only": (_finder(lambda t, device, want: t.device.type != want.type),
                   [".type", "cuda:1", "torch.empty(0, device=device).device"]),
    "cuda not normalised": (_finder(lambda t, device, want: t.device != (want if want.type == "cpu" else device)),
                            ["torch.device('cuda:0')", "torch.empty(0, device=device).device"]),
    "naive comparison": (_finder(lambda t, device, want: t.device != device),
                         ["cpu:0", "torch.empty(0, device=device).device"]),
    "parameters only": (_finder(_OFF, lambda m: m.named_parameters()), ["mask", "named_buffers()"]),
    "buffers only": (_finder(_OFF, lambda m: m.named_buffers()), ["named_parameters()"]),
    "inverted": (_finder(lambda t, device, want: not _OFF(t, device, want)), ["KHÔNG"]),
    "every name": (_finder(lambda t, device, want: True), ["t.device"]),
    "short names": (_finder(_OFF, name=lambda n: n.rsplit(".", 1)[-1]), ["'head.bias'", "'bias'"]),
}


@pytest.mark.parametrize("row", rows(task1))
def test_task1_each_misconception_has_its_message(row):
    fn, names = WRONG_TASK1[row]
    assert_fails(task1.evaluate(fn), *names, row=row)


@pytest.mark.parametrize(("fn", "names"), [(lambda model, device: list(model.parameters()), ["TÊN", "named_parameters()"]),
                                           (lambda model, device: "head.bias", ["str"]),
                                           (lambda model, device: model.nope, ["AttributeError"]),
                                           (_no_return, ["return"]), (42, ["int"])],
                         ids=["tensors", "a str", "raises", "no return", "not a function"])
def test_task1_answers_of_the_wrong_kind_are_named(fn, names):
    feedback = task1.evaluate(fn)
    assert feedback.status != "pass" and all(name in lines_of(feedback) for name in names), str(feedback)


# --------------------------------------------------------------------------- task 2: load_weights


def _load(model, path, **options):
    """Load the file into `model` as the solution does (`options` change torch.load's arguments, None drops one)."""
    options = {"map_location": "cpu", "weights_only": True, **options}
    model.load_state_dict(torch.load(path, **{key: value for key, value in options.items() if value is not None}))
    return model


def _state(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def test_task2_map_location_device_passes_too():
    assert task2.evaluate(lambda model, path, device: _load(model, path, map_location=device).to(device)).passed


#: A wrong load_weights for each row of task2's table, and what its message must name.
WRONG_TASK2 = {
    "no map_location": (lambda m, path, d: _load(m, path, map_location=None).to(d), ["map_location", _missing_gpu()]),
    "no torch.load": (lambda m, path, d: m.to(d), ["torch.load(path"]),
    "weights_only=False": (lambda m, path, d: _load(m, path, weights_only=False).to(d), ["weights_only=True"]),
    "returns the state_dict": (lambda m, path, d: _state(path), ["model.load_state_dict", "return model"]),
    "returns load_state_dict's keys": (lambda m, path, d: m.to(d).load_state_dict(_state(path)), ["return model"]),
    "not the model": (lambda m, path, d: [_state(path)], ["list"]),
    "model not moved": (lambda m, path, d: _load(m, path), ["model.to(device)"]),
    "wrong device": (lambda m, path, d: _load(m, path).to("meta"), ["model.to(device)"]),
    "never loads": (lambda m, path, d: _state(path) and m.to(d), ["model.load_state_dict"]),
}


@pytest.mark.parametrize("row", rows(task2))
def test_task2_each_misconception_has_its_message(row):
    fn, names = WRONG_TASK2[row]
    assert_fails(task2.evaluate(fn), *names, row=row)


def test_task2_without_weights_only_gets_a_note_not_a_failure():
    feedback = task2.evaluate(lambda model, path, device: _load(model, path, weights_only=None).to(device))
    assert feedback.passed and any("weights_only=True" in n for n in feedback.notes)


def test_task2_leaves_torch_load_and_location_tag_alone():
    real_load, real_tag = torch.load, torch.serialization.location_tag
    task2.evaluate(WRONG_TASK2["no map_location"][0])
    task2.evaluate(solution_of(task2, "load_weights", SCOPE))
    assert torch.load is real_load and torch.serialization.location_tag is real_tag

"""Checked tasks of lesson 03: the solutions pass, typical wrong answers fail with their own message, blanks are "missing"."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from _lesson_tasks import assert_shows, lines_of, rows, solution_of

from lessons_lib.exercises import _core
from lessons_lib.exercises.lesson03 import _cases, _missing_gpu, _save_as_if_on_gpu, task1, task2

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


def _naive(model, device):
    return [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.device != device]


def _params_only(model, device):
    want = torch.empty(0, device=device).device
    return [n for n, t in model.named_parameters() if t.device != want]


def _buffers_only(model, device):
    want = torch.empty(0, device=device).device
    return [n for n, t in model.named_buffers() if t.device != want]


def _inverted(model, device):
    want = torch.empty(0, device=device).device
    return [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.device == want]


def _everything(model, device):
    return [n for n, _ in [*model.named_parameters(), *model.named_buffers()]]


def _tensors(model, device):
    want = torch.empty(0, device=device).device
    return [t for t in [*model.parameters(), *model.buffers()] if t.device != want]


def _short_names(model, device):
    want = torch.empty(0, device=device).device
    return [n.rsplit(".", 1)[-1] for n, t in [*model.named_parameters(), *model.named_buffers()] if t.device != want]


def _type_only(model, device):  # passes CPU and meta; misses cuda:1 when device is "cuda"
    want = torch.device(device)
    return [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.device.type != want.type]


def _normalises_cpu_only(model, device):  # "cpu:0" handled by hand, "cuda" left unequal to cuda:0
    want = torch.device("cpu") if str(device).startswith("cpu") else torch.device(device)
    return [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.device != want]


def _type_and_index(model, device):  # another right answer: compare type and index, index None counted as 0
    want = torch.device(device)
    return [n for n, t in [*model.named_parameters(), *model.named_buffers()]
            if t.device.type != want.type or (t.device.index or 0) != (want.index or 0)]


def test_task1_comparing_type_and_index_passes_too():
    assert task1.evaluate(_type_and_index).passed


def _no_return(model, device):
    [n for n, _ in model.named_parameters()]


#: A wrong misplaced for each row of task1's table, and what its message must name.
WRONG_TASK1 = {
    ".type only": (_type_only, [".type", "cuda:1", "torch.empty(0, device=device).device"]),
    "cuda not normalised": (_normalises_cpu_only, ["torch.device('cuda:0')", "torch.empty(0, device=device).device"]),
    "naive comparison": (_naive, ["cpu:0", "torch.empty(0, device=device).device"]),
    "parameters only": (_params_only, ["mask", "named_buffers()"]),
    "buffers only": (_buffers_only, ["named_parameters()"]),
    "inverted": (_inverted, ["KHÔNG"]),
    "every name": (_everything, ["t.device"]),
    "short names": (_short_names, ["'head.bias'", "'bias'"]),
}


@pytest.mark.parametrize("row", rows(task1))
def test_task1_each_misconception_has_its_message(row):
    fn, names = WRONG_TASK1[row]
    assert_shows(task1.evaluate(fn), row, *names)


@pytest.mark.parametrize(("fn", "names"), [(_tensors, ["TÊN", "named_parameters()"]),
                                           (lambda model, device: "head.bias", ["str"]),
                                           (lambda model, device: model.nope, ["AttributeError"]),
                                           (_no_return, ["return"]), (42, ["int"])],
                         ids=["tensors", "a str", "raises", "no return", "not a function"])
def test_task1_answers_of_the_wrong_kind_are_named(fn, names):
    feedback = task1.evaluate(fn)
    assert feedback.status != "pass" and all(name in lines_of(feedback) for name in names), str(feedback)


@pytest.mark.parametrize("case", _cases(), ids=lambda case: case.label)
def test_task1_the_cases_are_what_the_solution_answers(case):
    with case.setup():
        assert set(solution_of(task1, "misplaced", SCOPE)(*case.args)) == case.want


# --------------------------------------------------------------------------- task 2: load_weights


def test_the_fake_gpu_checkpoint_fails_without_map_location(tmp_path):
    path = tmp_path / "ckpt.pt"
    _save_as_if_on_gpu(nn.Linear(3, 2).state_dict(), str(path), _missing_gpu())
    assert torch.serialization.location_tag(torch.ones(1).untyped_storage()) == "cpu"  # the patch is undone
    with pytest.raises(Exception, match="deserialize object on"):
        torch.load(path, weights_only=True)
    assert torch.load(path, map_location="cpu", weights_only=True)["weight"].shape == (2, 3)


def test_task2_map_location_device_passes_too():
    def load_weights(model, path, device):
        model.load_state_dict(torch.load(path, map_location=device, weights_only=True))
        model.to(device)
        return model

    assert task2.evaluate(load_weights).passed


def _no_map_location(model, path, device):
    model.load_state_dict(torch.load(path, weights_only=True))
    return model.to(device)


def _unsafe(model, path, device):
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=False))
    return model.to(device)


def _not_moved(model, path, device):
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model


def _returns_state(model, path, device):
    return torch.load(path, map_location="cpu", weights_only=True)


def _returns_keys(model, path, device):
    model.to(device)
    return model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))


def _never_loads(model, path, device):
    torch.load(path, map_location="cpu", weights_only=True)
    return model.to(device)


def _no_torch_load(model, path, device):
    return model.to(device)


def _to_meta(model, path, device):
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model.to("meta")


#: A wrong load_weights for each row of task2's table, and what its message must name.
WRONG_TASK2 = {
    "no map_location": (_no_map_location, ["map_location", _missing_gpu()]),
    "no torch.load": (_no_torch_load, ["torch.load(path"]),
    "weights_only=False": (_unsafe, ["weights_only=True"]),
    "returns the state_dict": (_returns_state, ["model.load_state_dict", "return model"]),
    "returns load_state_dict's keys": (_returns_keys, ["return model"]),
    "not the model": (lambda model, path, device: [torch.load(path, map_location="cpu", weights_only=True)],
                      ["list"]),
    "model not moved": (_not_moved, ["model.to(device)"]),
    "wrong device": (_to_meta, ["model.to(device)"]),
    "never loads": (_never_loads, ["model.load_state_dict"]),
}


@pytest.mark.parametrize("row", rows(task2))
def test_task2_each_misconception_has_its_message(row):
    fn, names = WRONG_TASK2[row]
    assert_shows(task2.evaluate(fn), row, *names)


def test_task2_without_weights_only_gets_a_note_not_a_failure():
    def load_weights(model, path, device):
        model.load_state_dict(torch.load(path, map_location="cpu"))
        return model.to(device)

    feedback = task2.evaluate(load_weights)
    assert feedback.passed and any("weights_only=True" in n for n in feedback.notes)


def test_task2_leaves_torch_load_and_location_tag_alone():
    real_load, real_tag = torch.load, torch.serialization.location_tag
    task2.evaluate(_no_map_location)
    task2.evaluate(solution_of(task2, "load_weights", SCOPE))
    assert torch.load is real_load and torch.serialization.location_tag is real_tag

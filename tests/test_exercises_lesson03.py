"""Checked tasks of lesson 03: the solutions pass, typical wrong answers fail with their own message, blanks are "missing"."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from _lesson_tasks import assert_fails, lines_of, solution_of

from lessons_lib.exercises import _core
from lessons_lib.exercises.lesson03 import _missing_gpu, _save_as_if_on_gpu, task1, task2

SCOPE = {"torch": torch, "nn": nn}


# --------------------------------------------------------------------------- task 1: misplaced


def test_task1_solution_passes():
    feedback = task1.evaluate(solution_of(task1, "misplaced", SCOPE))
    assert feedback.passed, str(feedback)


@pytest.mark.parametrize("blank", [None, ...])
def test_task1_blank_is_missing(blank):
    feedback = task1.evaluate(blank)
    assert feedback.status == _core.MISSING and "misplaced" in lines_of(feedback)


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


WRONG_TASK1 = {
    "naive comparison": (_naive, "cpu:0"),
    ".type only": (_type_only, "chỉ so .type"),
    "cuda not normalised": (_normalises_cpu_only, "torch.device('cuda:0') != torch.device('cuda')"),
    "parameters only": (_params_only, "named_buffers"),
    "buffers only": (_buffers_only, "named_parameters"),
    "inverted": (_inverted, "đảo ngược"),
    "every name": (_everything, "mọi tên"),
    "tensors not names": (_tensors, "TÊN"),
    "short names": (_short_names, "tên đầy đủ"),
    "a str": (lambda model, device: "head.bias", "list"),
    "raises": (lambda model, device: model.nope, "báo lỗi"),
}


@pytest.mark.parametrize(("fn", "message"), WRONG_TASK1.values(), ids=WRONG_TASK1.keys())
def test_task1_typical_wrong_answers_fail_with_their_message(fn, message):
    assert_fails(task1.evaluate(fn), message, in_lines=True)


def test_task1_no_return_is_missing():
    feedback = task1.evaluate(_no_return)
    assert feedback.status == _core.MISSING and "return" in lines_of(feedback)


def test_task1_not_a_function():
    assert_fails(task1.evaluate(42), "misplaced(model, device)", in_lines=True)


# --------------------------------------------------------------------------- task 2: load_weights


def test_the_fake_gpu_checkpoint_fails_without_map_location(tmp_path):
    path = tmp_path / "ckpt.pt"
    _save_as_if_on_gpu(nn.Linear(3, 2).state_dict(), str(path), _missing_gpu())
    assert torch.serialization.location_tag(torch.ones(1).untyped_storage()) == "cpu"  # the patch is undone
    with pytest.raises(Exception, match="deserialize object on"):
        torch.load(path, weights_only=True)
    assert torch.load(path, map_location="cpu", weights_only=True)["weight"].shape == (2, 3)


def test_task2_solution_passes():
    feedback = task2.evaluate(solution_of(task2, "load_weights", SCOPE))
    assert feedback.passed, str(feedback)
    assert not any("weights_only" in n for n in feedback.notes)


def test_task2_the_learner_stub_is_missing():
    def load_weights(model, path, device):
        ...

    feedback = task2.evaluate(load_weights)
    assert feedback.status == _core.MISSING and "..." in lines_of(feedback)


def test_task1_the_learner_stub_is_missing():
    def misplaced(model, device):
        ...

    assert task1.evaluate(misplaced).status == _core.MISSING


def test_task2_map_location_device_passes_too():
    def load_weights(model, path, device):
        model.load_state_dict(torch.load(path, map_location=device, weights_only=True))
        model.to(device)
        return model

    assert task2.evaluate(load_weights).passed


@pytest.mark.parametrize("blank", [None, ...])
def test_task2_blank_is_missing(blank):
    feedback = task2.evaluate(blank)
    assert feedback.status == _core.MISSING and "load_weights" in lines_of(feedback)


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


WRONG_TASK2 = {
    "no map_location": (_no_map_location, "map_location"),
    "weights_only=False": (_unsafe, "weights_only=False"),
    "model not moved": (_not_moved, "model.to(device)"),
    "returns the state_dict": (_returns_state, "dict"),
    "returns load_state_dict's keys": (_returns_keys, "khoá thiếu/thừa"),
    "never loads": (_never_loads, "không khớp"),
    "no torch.load": (_no_torch_load, "torch.load"),
}


@pytest.mark.parametrize(("fn", "message"), WRONG_TASK2.values(), ids=WRONG_TASK2.keys())
def test_task2_typical_wrong_answers_fail_with_their_message(fn, message):
    assert_fails(task2.evaluate(fn), message, in_lines=True)


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


def test_lesson03_tasks_are_grouped(capsys):
    assert set(_core.GROUPS["lesson03"]) == {"task1", "task2"}
    _core.progress("lesson03")
    out = capsys.readouterr().out
    assert "Nhiệm vụ 1" in out and "Nhiệm vụ 2" in out

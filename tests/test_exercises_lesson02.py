"""Lesson 02's checked tasks: the solutions pass, each wrong answer gets its message, blanks are "not done yet"."""

from __future__ import annotations

import textwrap

import pytest
import torch
from _lesson_tasks import (
    TORCH_SCOPE,
    assert_checks_never_raise,
    assert_fails,
    code_cells,
    load,
    load_function,
    notebook_pair,
    rows,
)

from lessons_lib.exercises.lesson02 import task1, task2

LEARNER_NB, _ = notebook_pair("02_moving_tensors")


def noise(body: str, tmp_path):
    return load_function("add_noise(x, std=0.1)", body, tmp_path, TORCH_SCOPE)


# --------------------------------------------------------------------------- task 1: add_noise


@pytest.mark.parametrize(("task", "name"), [(task1, "add_noise"), (task2, "move_keep")])
def test_solutions_pass_and_blanks_are_missing(task, name, tmp_path):
    assert task.evaluate(load(task.solution_code, tmp_path, name, TORCH_SCOPE)).passed
    unfinished = load(f"def {name}(a, b):\n    return None   # TODO", tmp_path, name, TORCH_SCOPE)
    for blank in (None, ..., unfinished):
        assert task.evaluate(blank).status == "missing"


#: A wrong add_noise body for each row of task1's table, and what its message must name.
WRONG_TASK1 = {
    "copied to the CPU": ("return (x + std * torch.randn_like(x)).cpu()", [".cpu()"]),
    "noise made on the CPU": ("return x + std * torch.randn(x.shape)", ["torch.randn_like(x)", "device=x.device"]),
    "moved elsewhere": ("return torch.zeros(x.shape, dtype=x.dtype)", ["meta", "cpu"]),
    "other shape": ("return (x + std * torch.randn_like(x))[0]", ["(8,)", "(4, 8)"]),
    "float32 noise": ("return x + std * torch.randn(x.shape, device=x.device)", ["float32", "dtype=x.dtype"]),
    "made then copied": ("return x + std * torch.randn(x.shape).to(x.device, x.dtype)", ["torch.randn_like(x)"]),
    "in place": ("return x.add_(std * torch.randn_like(x))", ["x.add_"]),
    "forgot x": ("return std * torch.randn_like(x)", ["x + std"]),
    "uniform noise": ("return x + std * torch.rand_like(x)", ["torch.randn"]),
    "mean off": ("return x + 1 + std * torch.randn_like(x)", ["≈ 3"]),
    "no std": ("return x + torch.randn_like(x)", ["std"]),
    "std squared": ("return x + std**2 * torch.randn_like(x)", ["std**2"]),
    "spread off": ("return x + 3 * std * torch.randn_like(x)", ["1.51", "≈ 0.5"]),
}


@pytest.mark.parametrize("row", rows(task1))
def test_task1_each_misconception_has_its_message(row, tmp_path):
    body, names = WRONG_TASK1[row]
    assert_fails(task1.evaluate(noise(body, tmp_path)), *names, row=row)


@pytest.mark.parametrize(("body", "named"), [("return x + std * undefined_name", "NameError"),
                                             ("return 'noisy'", "str")])
def test_task1_errors_and_other_kinds_are_named(body, named, tmp_path):
    feedback = task1.evaluate(noise(body, tmp_path))
    assert feedback.status == "fail" and named in feedback.lines[0] and "Traceback" not in str(feedback)


def test_task1_keeps_the_learners_random_state(tmp_path):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    task1.evaluate(load(task1.solution_code, tmp_path, "add_noise", TORCH_SCOPE))
    assert torch.equal(torch.rand(3), expected)


# --------------------------------------------------------------------------- task 2: move_keep

MOVE = '''
def move(batch, device):
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {key: move(value, device) for key, value in batch.items()}
    if isinstance(batch, list):
        return [move(value, device) for value in batch]
    if isinstance(batch, tuple):
        return tuple(move(value, device) for value in batch)
    return batch                      # chuỗi, số, None…: không phải tensor, giữ nguyên
'''


def mover(body: str, tmp_path):
    return load_function("move_keep(batch, device)", body, tmp_path, TORCH_SCOPE)


#: A right move_keep body: most typical mistakes below are this body with one change.
KEEP = '''
if isinstance(batch, torch.Tensor):
    return batch.to(device)
if isinstance(batch, dict):
    return {k: move_keep(v, device) for k, v in batch.items()}
if isinstance(batch, tuple) and hasattr(batch, "_fields"):
    return type(batch)(*(move_keep(v, device) for v in batch))
if isinstance(batch, (list, tuple)):
    return type(batch)(move_keep(v, device) for v in batch)
return batch
'''
TENSOR_BRANCH = "if isinstance(batch, torch.Tensor):\n    return batch.to(device)\n"
NAMEDTUPLE_BRANCH = ('if isinstance(batch, tuple) and hasattr(batch, "_fields"):\n'
                     "    return type(batch)(*(move_keep(v, device) for v in batch))\n")


def keep_but(*changes: tuple[str, str]) -> str:
    """Return KEEP with each (old, new) change made; each old text must stand in it exactly once."""
    body = KEEP
    for old, new in changes:
        assert body.count(old) == 1, old
        body = body.replace(old, new)
    return body


STR_AS_SEQUENCE = '''
from collections.abc import Sequence
if isinstance(batch, torch.Tensor):
    return batch.to(device)
if isinstance(batch, dict):
    return {k: move_keep(v, device) for k, v in batch.items()}
if isinstance(batch, Sequence):
    return [move_keep(v, device) for v in batch]
return batch
'''
ONLY_BOX = keep_but(('hasattr(batch, "_fields")', "type(batch).__name__ == 'Box'"))
#: A wrong move_keep body for each row of task2's table, and what its message must name.
WRONG_TASK2 = {
    "a string as a sequence": (STR_AS_SEQUENCE, ["RecursionError", "dict, list và tuple"]),
    ".to on a non-tensor": (keep_but((TENSOR_BRANCH, ""), ("return batch\n", "return batch.to(device)\n")), [".to()"]),
    "only Box": (ONLY_BOX, ["Sample", "Box", "hasattr(batch, '_fields')"]),
    "namedtuple from an iterable": (keep_but((NAMEDTUPLE_BRANCH, "")), ["Box", "type(batch)(*"]),
}


@pytest.mark.parametrize("row", rows(task2))
def test_task2_each_misconception_has_its_message(row, tmp_path):
    body, names = WRONG_TASK2[row]
    assert_fails(task2.evaluate(mover(body, tmp_path)), *names, row=row)


@pytest.mark.parametrize(("body", "names"), [
    (keep_but((NAMEDTUPLE_BRANCH, ""), ("return type(batch)(move_keep(v, device) for v in batch)",
                                        "return [move_keep(v, device) for v in batch]")), ["Box", "list"]),
    (MOVE.replace("def move(batch, device):", "").replace("move(value", "move_keep(value"), ["Box", "type(batch)(*"]),
    ('''
     for key in batch:
         if isinstance(batch[key], torch.Tensor):
             batch[key] = batch[key].to(device)
     return batch
     ''', ["batch['pixels']"]),
    ("return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in batch.items()}",
     ["batch['boxes'][0].coords", "cpu"]),
    (keep_but(("batch.to(device)", "batch.to(device, dtype=torch.float32)")), ["batch['labels']", ".to(device)"]),
    (keep_but(("batch.items()}", 'batch.items() if k != "scale"}')), ["scale"]),
    (keep_but(("return batch\n", "return str(batch)\n")), ["0.5", "'0.5'"]),
], ids=["all-lists", "the-notebooks-move", "in-place", "shallow", "dtype", "lost-key", "stringified"])
def test_task2_each_wrong_place_is_named(body, names, tmp_path):
    feedback = task2.evaluate(mover(body, tmp_path))
    assert feedback.status == "fail" and all(name in feedback.lines[0] for name in names), str(feedback)


def test_task2_single_tensor(tmp_path):
    no_tensor_branch = mover(keep_but((TENSOR_BRANCH, ""), (
        "return batch\n", 'return batch.to(device) if hasattr(batch, "to") and not isinstance(batch, str) else batch\n'
    )), tmp_path)
    assert task2.evaluate(no_tensor_branch).passed  # tensors reached through the last branch are fine
    only_dicts = mover("return {k: move_keep(v, device) for k, v in batch.items()} if isinstance(batch, dict) "
                       "else (batch.to(device) if isinstance(batch, torch.Tensor) and batch.dim() > 1 else batch)",
                       tmp_path)
    assert task2.evaluate(only_dicts).status == "fail"


# --------------------------------------------------------------------------- both tasks

@pytest.mark.parametrize("exercise", [task1, task2], ids=["task1", "task2"])
def test_checkers_never_raise(exercise, capsys):
    assert_checks_never_raise(exercise, capsys, keyword=True)


# --------------------------------------------------------------------------- the notebooks


def test_the_notebooks_move_is_the_one_tested_here():
    assert textwrap.dedent(MOVE).strip() in "\n".join(code_cells(LEARNER_NB))

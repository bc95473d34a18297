"""Lesson 01's checked task: the solution passes on every simulated machine, each wrong answer gets its message."""

from __future__ import annotations

import inspect

import pytest
import torch
from _lesson_tasks import (
    TORCH_SCOPE,
    assert_checks_never_raise,
    assert_fails,
    load_function,
    rows,
    run_cell,
    solution_of,
)

from lessons_lib.exercises import lesson01
from lessons_lib.exercises.lesson01 import task1


def solution(tmp_path) -> dict:
    """Return the namespace the reference solution defines (choose_device and x)."""
    return run_cell(task1.solution_code, tmp_path, TORCH_SCOPE)


def here() -> torch.device:
    return solution_of(task1, "choose_device", TORCH_SCOPE)()


def chooser(body: str, tmp_path, signature: str = "prefer=None"):
    return load_function(f"choose_device({signature})", body, tmp_path, TORCH_SCOPE)


FULL = '''
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
'''


ACCELERATOR = getattr(torch, "accelerator", None)
HAS_CHECK_AVAILABLE = ACCELERATOR is not None and "check_available" in inspect.signature(
    ACCELERATOR.current_accelerator).parameters
PREFERRED = "if prefer is not None:\n    return torch.device(prefer)\n"
CHECKED = PREFERRED + "return torch.accelerator.current_accelerator(check_available=True) or torch.device('cpu')"


def test_solution_passes_and_blanks_are_not_done_yet(tmp_path):
    ns, real = solution(tmp_path), torch.cuda.is_available
    assert task1.evaluate(ns["choose_device"], ns["x"]).passed
    assert torch.cuda.is_available is real  # the simulated machines are undone
    assert task1.evaluate(None, None).status == task1.evaluate().status == "missing"
    assert task1.evaluate(chooser("return None   # TODO", tmp_path), None).status == "missing"
    feedback = task1.evaluate(ns["choose_device"], None)
    assert feedback.status == "missing" and "x = torch.ones(3, device=choose_device())" in feedback.lines[0]


#: A wrong choose_device (its body) for each row of the table, and what its message must name.
WRONG = {
    "torch.device(None)": ("return torch.device(prefer)", ["torch.device(None)", "prefer is not None"]),
    "prefer ignored": (FULL, ["prefer", "torch.device(prefer)"]),
    "forgotten parentheses": ("if torch.cuda.is_available:\n    return torch.device('cuda')\nreturn torch.device('cpu')",
                              ["torch.cuda.is_available()"]),
    "hard-coded cuda": ("return torch.device('cuda')", ["'cuda'", "torch.cuda.is_available()"]),
    "the build's accelerator": (PREFERRED + "return torch.accelerator.current_accelerator() or torch.device('cpu')",
                                ["check_available=True", "torch.accelerator.is_available()"]),
    "asks the build": (PREFERRED + "if torch.version.cuda:\n    return torch.device('cuda')\nreturn torch.device('cpu')",
                       ["torch.version.cuda", "torch.cuda.is_available()"]),
    "cuda without a GPU": (PREFERRED + "if torch.cuda.is_available() or getattr(torch.version, 'cuda'):\n"
                           "    return torch.device('cuda')\nreturn torch.device('cpu')", ["torch.cuda.is_available()"]),
    "misses mps": ("return torch.device('cuda' if torch.cuda.is_available() else 'cpu')",
                   ["mps", "torch.backends.mps.is_available()"]),
    "misses cuda": (PREFERRED + "if torch.backends.mps.is_available():\n    return torch.device('mps')\n"
                    "return torch.device('cpu')", ["cpu", "torch.cuda.is_available()"]),
    "check_available on torch 2.6": (CHECKED, ["check_available", "torch.accelerator.is_available()"]),
    "no optional prefer": (("", FULL), ["def choose_device(prefer=None)"]),
}


@pytest.mark.parametrize("row", rows(task1))
def test_each_misconception_has_its_message(row, tmp_path, monkeypatch):
    if row == "check_available on torch 2.6":
        if ACCELERATOR is None:
            pytest.skip("torch.accelerator is new in torch 2.6")
        monkeypatch.setattr(lesson01, "_has_check_available", lambda: False)  # answer as torch 2.6 does
    elif row == "the build's accelerator" and not HAS_CHECK_AVAILABLE:
        pytest.skip("check_available is new in torch 2.7")
    body, names = WRONG[row]
    signature, body = body if isinstance(body, tuple) else ("prefer=None", body)
    assert_fails(task1.evaluate(chooser(body, tmp_path, signature), torch.ones(3)), *names, row=row)


@pytest.mark.parametrize(("fn", "x", "names"), [
    ("prefer", torch.ones(3), ["prefer=None"]), (None, torch.ones(3, device="meta"), ["meta", "device=choose_device()"]),
    (None, [1, 1, 1], ["list"]), (3, torch.ones(3), ["int"])],
    ids=["prefer required", "x elsewhere", "x not a tensor", "int"])
def test_the_function_and_x_are_checked(fn, x, names, tmp_path):
    if isinstance(fn, str):
        fn = chooser(FULL, tmp_path, fn)
    feedback = task1.evaluate(solution(tmp_path)["choose_device"] if fn is None else fn, x)
    assert feedback.status == "fail" and all(name in feedback.lines[0] for name in names), str(feedback)


@pytest.mark.parametrize(("body", "named"), [("return 5", "int"), ('return "cdua"', "'cdua'"),
                                             ('return torch.zeros(1, device="nope").device', "báo lỗi")])
def test_answers_that_are_no_device_are_named(body, named, tmp_path):
    feedback = task1.evaluate(chooser(body, tmp_path), torch.ones(3))
    assert feedback.status == "fail" and named in feedback.lines[0] and "Traceback" not in str(feedback)


def test_a_string_device_passes_with_a_note(tmp_path):
    strings = chooser('''
        if prefer is not None:
            return prefer
        return "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    ''', tmp_path)
    feedback = task1.evaluate(strings, torch.ones(3, device=here()))
    assert feedback.passed, str(feedback)
    assert sum("torch.device(" in note for note in feedback.notes) == 1  # said once, not once per call


@pytest.mark.parametrize("body", [CHECKED, PREFERRED + "if torch.accelerator.is_available():\n"
                                  "    return torch.accelerator.current_accelerator()\nreturn torch.device('cpu')"],
                         ids=["check_available", "is_available first"])
def test_the_accelerator_api_passes(body, tmp_path):
    if ACCELERATOR is None or ("check_available" in body and not HAS_CHECK_AVAILABLE):
        pytest.skip("torch.accelerator is new in torch 2.6, check_available in 2.7")
    assert task1.evaluate(chooser(body, tmp_path), torch.ones(3, device=here())).passed


def test_checker_never_raises(capsys):
    assert_checks_never_raise(task1, capsys, arities=(1, 2, 3), keyword=True)

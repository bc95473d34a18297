"""Lesson 01's checked task checks itself: the solution passes on every (simulated) machine, each typical wrong
``choose_device`` fails with its own message, blanks are "not done yet", nothing raises, and the notebooks agree."""

from __future__ import annotations

import pytest
import torch
from _lesson_tasks import (
    TORCH_SCOPE,
    assert_checks_never_raise,
    assert_fails,
    assert_task_cell_reports,
    load_function,
    notebook_pair,
    run_cell,
    solution_of,
    task_cell,
)

from lessons_lib import i18n
from lessons_lib.exercises import _core
from lessons_lib.exercises.lesson01 import COLAB_T4, CPU_ONLY, MAC, MACHINES, simulated, task1

LEARNER_NB, SOLUTION_NB = notebook_pair("01_device_basics")


def solution(tmp_path) -> dict:
    """Return the namespace the reference solution defines (choose_device and x)."""
    return run_cell(task1.solution_code, tmp_path, TORCH_SCOPE)


def here() -> torch.device:
    return solution_of(task1, "choose_device", TORCH_SCOPE)()


def check(*args) -> _core.Feedback:
    feedback = task1.evaluate(*args)
    assert isinstance(feedback, _core.Feedback)
    return feedback


def chooser(body: str, tmp_path, signature: str = "prefer=None"):
    return load_function(f"choose_device({signature})", body, tmp_path, TORCH_SCOPE)


FULL = '''
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")
'''


def test_solution_passes(tmp_path):
    ns = solution(tmp_path)
    feedback = check(ns["choose_device"], ns["x"])
    assert feedback.passed, str(feedback)
    assert "ba máy giả lập" in str(feedback)


def test_blanks_are_not_done_yet(tmp_path):
    assert check(None, None).status == "missing"
    assert check().status == "missing"
    learner = chooser("return None   # TODO", tmp_path)
    feedback = check(learner, None)
    assert feedback.status == "missing" and "chưa trả về" in str(feedback)
    ns = solution(tmp_path)
    feedback = check(ns["choose_device"], None)
    assert feedback.status == "missing" and "chưa tạo x" in str(feedback)


def test_the_tutorial_one_liner_misses_mps(tmp_path):
    one_liner = chooser('return torch.device("cuda" if torch.cuda.is_available() else "cpu")', tmp_path)
    assert_fails(check(one_liner, torch.ones(3)), "bỏ sót MPS", "elif torch.backends.mps.is_available()")


def test_hard_coded_cuda_fails_on_a_cpu_machine(tmp_path):
    assert_fails(check(chooser('return torch.device("cuda")', tmp_path), torch.ones(3)), "viết cứng 'cuda'")


def test_forgotten_parentheses_are_named(tmp_path):
    no_call = chooser('''
        if torch.cuda.is_available:
            return torch.device("cuda")
        return torch.device("cpu")
    ''', tmp_path)
    assert_fails(check(no_call, torch.ones(3)), "quên dấu ngoặc", "torch.cuda.is_available()")


def test_missing_or_late_cuda_branch(tmp_path):
    mps_only = chooser('''
        if prefer is not None:
            return torch.device(prefer)
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    ''', tmp_path)
    assert_fails(check(mps_only, torch.ones(3)), "trên máy có GPU CUDA", "hỏi CUDA trước tiên")


def test_prefer_must_exist_and_be_respected(tmp_path):
    assert_fails(check(chooser(FULL, tmp_path, signature=""), torch.ones(3)), "def choose_device(prefer=None)")
    assert_fails(check(chooser(FULL, tmp_path, signature="prefer"), torch.ones(3)), "def choose_device(prefer=None)")
    assert_fails(check(chooser(FULL, tmp_path), torch.ones(3)), "prefer bị bỏ qua")
    always = chooser("return torch.device(prefer)", tmp_path)
    assert_fails(check(always, torch.ones(3)), "torch.device(None)")


def test_x_must_live_on_the_chosen_device(tmp_path):
    ns = solution(tmp_path)
    assert_fails(check(ns["choose_device"], torch.ones(3, device="meta")), "x đang ở meta", "device=choose_device()")
    assert_fails(check(ns["choose_device"], [1, 1, 1]), "x phải là một tensor")


def test_a_device_is_required(tmp_path):
    assert_fails(check(chooser("return 5", tmp_path), torch.ones(3)), "torch.device")
    assert_fails(check(chooser('return "cdua"', tmp_path), torch.ones(3)), "torch.device")


def test_a_string_device_passes_with_a_note(tmp_path):
    strings = chooser('''
        if prefer is not None:
            return prefer
        return "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    ''', tmp_path)
    feedback = check(strings, torch.ones(3, device=here()))
    assert feedback.passed, str(feedback)
    assert sum("chuỗi" in note for note in feedback.notes) == 1  # said once, not once per call


def test_errors_in_learner_code_are_summarised(tmp_path):
    makes_a_tensor = chooser('return torch.zeros(1, device="cuda").device', tmp_path)
    feedback = check(makes_a_tensor, torch.ones(3))
    if torch.cuda.is_available():
        assert_fails(feedback)
    else:
        assert_fails(feedback, "báo lỗi")
    assert "Traceback" not in str(feedback)


def test_not_a_function():
    assert_fails(check(3, torch.ones(3)), "phải là một hàm")


def test_checker_never_raises(capsys):
    assert_checks_never_raise(task1, capsys, arities=(1, 2, 3), keyword=True)


def test_english_messages(tmp_path):
    one_liner = chooser('return torch.device("cuda" if torch.cuda.is_available() else "cpu")', tmp_path)
    i18n.set_language("en")
    try:
        text = str(check(one_liner, torch.ones(3)))
    finally:
        i18n.set_language("vi")
    assert "MPS is left out" in text and "not yet right" in text


@pytest.mark.parametrize("machine", MACHINES, ids=lambda m: m.best)
def test_simulated_machines_answer_and_restore(machine):
    original = (torch.cuda.is_available, torch.cuda.device_count, torch.backends.mps.is_available)
    with simulated(machine) as cuda_check:
        assert torch.cuda.is_available() is machine.cuda
        assert torch.backends.mps.is_available() is machine.mps
        assert torch.cuda.device_count() == int(machine.cuda)
        accelerator = getattr(torch, "accelerator", None)
        if accelerator is not None:
            current = accelerator.current_accelerator()
            assert (current.type if current is not None else "cpu") == machine.best
        assert cuda_check.called
    assert (torch.cuda.is_available, torch.cuda.device_count, torch.backends.mps.is_available) == original


def test_the_three_machines():
    assert [m.best for m in (CPU_ONLY, COLAB_T4, MAC)] == ["cpu", "cuda", "mps"]


def test_progress_lists_the_lesson(capsys):
    _core.progress("lesson01")
    out = capsys.readouterr().out
    assert "Nhiệm vụ 1" in out and "Tiến độ:" in out


# --------------------------------------------------------------------------- the notebooks


def test_solution_notebook_holds_the_solution_and_learner_notebook_the_blanks():
    assert task1.solution_code in task_cell(SOLUTION_NB, "task1")
    learner = task_cell(LEARNER_NB, "task1")
    assert "TODO" in learner and "return None" in learner and "task1.check(choose_device, x)" in learner


@pytest.mark.parametrize(("path", "status"), [(SOLUTION_NB, "pass"), (LEARNER_NB, "missing")], ids=["solution", "learner"])
def test_the_task_cell_runs_in_both_notebooks(path, status, capsys):
    assert_task_cell_reports(path, task1, status, capsys)

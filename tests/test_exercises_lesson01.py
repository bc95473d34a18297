"""Lesson 01's checked task checks itself: the solution passes on every (simulated) machine, each typical wrong
``choose_device`` fails with its own message, blanks are "not done yet", nothing raises, and the notebooks agree."""

from __future__ import annotations

import inspect

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

from lessons_lib.exercises import _core
from lessons_lib.exercises.lesson01 import (
    _COLAB_T4,
    _CPU_ONLY,
    _CUDA_NO_GPU,
    _MAC,
    _MACHINES,
    _simulated,
    task1,
)

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
    assert "bốn máy giả lập" in str(feedback) and "bản CUDA trên máy không có GPU" in str(feedback)


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


ACCELERATOR = getattr(torch, "accelerator", None)
HAS_CHECK_AVAILABLE = ACCELERATOR is not None and "check_available" in inspect.signature(
    ACCELERATOR.current_accelerator).parameters


@pytest.mark.parametrize("machine", _MACHINES, ids=lambda m: m.name)
def test_simulated_machines_answer_and_restore(machine):
    original = (torch.cuda.is_available, torch.cuda.device_count, torch.backends.mps.is_available, torch.version.cuda)
    with _simulated(machine) as probe:
        assert torch.cuda.is_available() is machine.cuda
        assert torch.backends.mps.is_available() is machine.mps
        assert torch.cuda.device_count() == int(machine.cuda)
        assert (torch.version.cuda is not None) is (machine.built == "cuda")
        assert torch.backends.cuda.is_built() is (machine.built == "cuda")
        if HAS_CHECK_AVAILABLE:  # torch >= 2.7: the build's accelerator, and the runtime check on request
            built = ACCELERATOR.current_accelerator()
            assert (built.type if built is not None else None) == machine.built
            usable = ACCELERATOR.current_accelerator(check_available=True)
            assert (usable.type if usable is not None else "cpu") == machine.best
            assert probe.compile_time_calls == [built]
        if ACCELERATOR is not None:
            assert ACCELERATOR.is_available() is (machine.best != "cpu")
        assert probe.cuda_check.called
    assert (torch.cuda.is_available, torch.cuda.device_count, torch.backends.mps.is_available,
            torch.version.cuda) == original


def test_the_four_machines():
    assert [m.best for m in (_CPU_ONLY, _CUDA_NO_GPU, _COLAB_T4, _MAC)] == ["cpu", "cpu", "cuda", "mps"]
    assert [m.built for m in (_CPU_ONLY, _CUDA_NO_GPU, _COLAB_T4, _MAC)] == [None, "cuda", "cuda", "mps"]


@pytest.mark.skipif(ACCELERATOR is None, reason="torch.accelerator is new in torch 2.6")
def test_plain_current_accelerator_is_told_it_names_the_build(tmp_path):
    plain = chooser('''
        if prefer is not None:
            return torch.device(prefer)
        found = torch.accelerator.current_accelerator()
        return found if found is not None else torch.device("cpu")
    ''', tmp_path)
    feedback = check(plain, torch.ones(3))
    if HAS_CHECK_AVAILABLE:  # passes _CPU_ONLY (no accelerator built), fails on the CUDA build without a GPU
        assert_fails(feedback, "bản CUDA trên máy không có GPU", "bản build được biên dịch cho", "check_available=True")
    else:  # torch 2.6 raises there instead
        assert_fails(feedback, "báo lỗi")


@pytest.mark.skipif(not HAS_CHECK_AVAILABLE, reason="check_available is new in torch 2.7")
def test_current_accelerator_with_the_runtime_check_passes(tmp_path):
    checked = chooser('''
        if prefer is not None:
            return torch.device(prefer)
        return torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
    ''', tmp_path)
    feedback = check(checked, torch.ones(3, device=here()))
    assert feedback.passed, str(feedback)


@pytest.mark.skipif(ACCELERATOR is None, reason="torch.accelerator is new in torch 2.6")
def test_accelerator_is_available_first_passes(tmp_path):
    guarded = chooser('''
        if prefer is not None:
            return torch.device(prefer)
        if torch.accelerator.is_available():
            return torch.accelerator.current_accelerator()
        return torch.device("cpu")
    ''', tmp_path)
    assert check(guarded, torch.ones(3, device=here())).passed


def test_asking_the_build_is_told_it_is_not_the_machine(tmp_path):
    by_build = chooser('''
        if prefer is not None:
            return torch.device(prefer)
        if torch.version.cuda:
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    ''', tmp_path)
    assert_fails(check(by_build, torch.ones(3)), "bản CUDA trên máy không có GPU", "không nói máy có GPU")


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


@pytest.mark.skipif(ACCELERATOR is None, reason="torch.accelerator is new in torch 2.6")
def test_on_torch_2_6_the_simulation_has_no_check_available(tmp_path, monkeypatch):
    from lessons_lib.exercises import lesson01
    monkeypatch.setattr(lesson01, "_has_check_available", lambda: False)  # answer as torch 2.6 does
    with _simulated(_CUDA_NO_GPU):
        with pytest.raises(RuntimeError, match="none is available"):
            torch.accelerator.current_accelerator()
    with _simulated(_COLAB_T4):
        assert torch.accelerator.current_accelerator().type == "cuda"
    checked = chooser('''
        if prefer is not None:
            return torch.device(prefer)
        return torch.accelerator.current_accelerator(check_available=True) or torch.device("cpu")
    ''', tmp_path)
    assert_fails(check(checked, torch.ones(3)), "chưa có tham số check_available", "is_available()")

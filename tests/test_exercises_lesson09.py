"""Checked tasks of lesson 09: the solutions pass, each typical wrong answer fails with its own message, a blank
is "chưa làm", nothing raises, and the learner / solutions notebooks hold the blank / the solution."""

from __future__ import annotations

import re

import pytest
from _lesson_tasks import assert_checks_never_raise, assert_fails, code_cells, notebook_pair, run_cell

from lessons_lib.exercises import _core, progress
from lessons_lib.exercises.lesson09 import _WORKER_CASES, task1, task2

LEARNER_NB, SOLUTION_NB = notebook_pair("09_profiling")


# --------------------------------------------------------------------------- task 1: the dominant op


def test_task1_solution_passes(tmp_path):
    ns = run_cell(task1.solution_code, tmp_path, {})
    feedback = task1.evaluate(ns["dominant_op"])
    assert feedback.passed, str(feedback)
    assert "aten::mm" in str(feedback) and "aten::add" in str(feedback)


def test_task1_other_correct_filters_pass():
    from torch.profiler import profile, record_function

    with profile() as probe, record_function("label"):
        pass
    if not any(hasattr(r, "is_user_annotation") for r in probe.key_averages()):
        pytest.skip("this torch (before 2.5) does not mark record_function rows: the answer below cannot work here")

    def by_annotation(prof):
        rows = [r for r in prof.key_averages() if not getattr(r, "is_user_annotation", False)]
        return sorted(rows, key=lambda r: r.self_cpu_time_total)[-1].key
    assert task1.evaluate(by_annotation).passed


def ops(prof):
    return [r for r in prof.key_averages() if r.key.startswith("aten::")]


@pytest.mark.parametrize(("answer", "fragments"), [
    (lambda p: max(p.key_averages(), key=lambda r: r.self_cpu_time_total).key,
     ("'python_wait' là một nhãn record_function", "time.sleep")),
    (lambda p: max(ops(p), key=lambda r: r.cpu_time_total).key, ("'aten::linear' có CPU TOTAL lớn nhất",
                                                                  "row.self_cpu_time_total")),
    (lambda p: max(ops(p), key=lambda r: r.count).key, ("NHIỀU LẦN nhất", "row.count")),
    (lambda p: min(ops(p), key=lambda r: r.self_cpu_time_total).key, ("NHỎ nhất", "max, không phải min")),
    (lambda p: max(ops(p), key=lambda r: r.self_cpu_time_total), ("trả về cả dòng", "row.key")),
    (lambda p: "aten::addmm", ("không phải tên một dòng",)),
    (lambda p: p.key_averages().table(), ("không phải tên một dòng", "...'")),
    (lambda p: 3, ("phải trả về tên phép (str)", "int")),
    (lambda p: 1 / 0, ("ZeroDivisionError",)),
])
def test_task1_typical_wrong_answers(answer, fragments):
    assert_fails(task1.evaluate(answer), *fragments)


def test_task1_hard_coded_answer_fails_on_the_second_profile():
    feedback = task1.evaluate(lambda p: "aten::mm")
    assert_fails(feedback, "profile 2")
    assert "profile 1" not in str(feedback)


def test_task1_blank_and_missing_return():
    assert task1.evaluate(None).status == "missing"
    assert task1.evaluate(...).status == "missing"
    assert task1.evaluate(lambda p: None).status == "missing"
    assert_fails(task1.evaluate("aten::mm"), "phải là một hàm")


def test_task1_hides_kineto_log_lines(capfd):
    task1.evaluate(lambda p: None)
    task1.evaluate(lambda p: ops(p)[0].key)
    err = capfd.readouterr().err
    assert "profiler_start" not in err and "STAGE:" not in err


# --------------------------------------------------------------------------- task 2: num_workers


def test_task2_solution_passes(tmp_path):
    ns = run_cell(task2.solution_code, tmp_path, {})
    feedback = task2.evaluate(ns["pick_num_workers"])
    assert feedback.passed, str(feedback)
    for loader_sps, step_sps, right, _ in _WORKER_CASES:
        assert ns["pick_num_workers"](dict(loader_sps), step_sps) == right


def first_fast_enough(loader_sps, step_sps, order=sorted, strict=False, fallback="fastest"):
    for workers in order(loader_sps):
        if loader_sps[workers] > step_sps or (not strict and loader_sps[workers] == step_sps):
            return workers
    return max(loader_sps, key=loader_sps.get) if fallback == "fastest" else None


@pytest.mark.parametrize(("answer", "fragments"), [
    (lambda s, t: max(s), ("= 4: đủ nhanh, nhưng 2 worker cũng đủ nhanh", "NHỎ NHẤT")),
    (lambda s, t: max(s, key=s.get), ("= 4: đủ nhanh",)),
    (lambda s, t: first_fast_enough(s, t, order=list), ("dict không xếp theo số worker", "sorted(loader_sps)")),
    (lambda s, t: first_fast_enough(s, t, strict=True), ("so sánh bằng >=",)),
    (lambda s, t: first_fast_enough(s, t, fallback=None), ("trả về None", "cấu hình nhanh nhất")),
    (lambda s, t: first_fast_enough(s, t, fallback="first") or min(s), ("= 0: không cấu hình nào theo kịp",)),
    (lambda s, t: next((s[w] for w in sorted(s) if s[w] >= t), max(s.values())), ("TỐC ĐỘ (mẫu/s)",)),
    (lambda s, t: next((w for w in sorted(s) if s[w] <= t), 0), ("GPU sẽ chờ dữ liệu",)),
    (lambda s, t: 3, ("không có cấu hình 3 worker",)),
    (lambda s, t: True, ("không phải True/False",)),
    (lambda s, t: "2", ("số nguyên", "str")),
    (lambda s, t: s[99], ("KeyError",)),
])
def test_task2_typical_wrong_answers(answer, fragments):
    assert_fails(task2.evaluate(answer), *fragments)


def test_task2_already_fast_and_none_enough_cases_have_their_own_messages():
    def always_two(s, t):
        return 2 if 2 in s else max(s)

    def skips_zero(s, t):
        return next((w for w in sorted(s) if w > 0 and s[w] >= t), max(s, key=s.get))

    assert_fails(task2.evaluate(skips_zero), "0 worker đã đưa ra 2000 mẫu/s", "NHỎ NHẤT")

    def fast_enough_or_zero(s, t):
        return next((w for w in sorted(s) if s[w] >= t), 0)

    assert_fails(task2.evaluate(fast_enough_or_zero), "không cấu hình nào theo kịp", "nút cổ chai", "(2 worker)")
    assert task2.evaluate(always_two).status == "fail"


def test_task2_blank():
    assert task2.evaluate(None).status == "missing"
    assert task2.evaluate(lambda s, t: None).status == "missing"


WEIRD = [0, "x", 3.5, [], {}, object(), lambda *a, **k: 1 / 0, lambda *a: [1, 2]]


@pytest.mark.parametrize("exercise", [task1, task2], ids=lambda e: e.key)
def test_checkers_never_raise(exercise, capsys):
    assert_checks_never_raise(exercise, capsys, WEIRD, keyword=True)


def test_progress_lists_the_lesson(capsys):
    task2.evaluate(None)
    progress("lesson09")
    out = capsys.readouterr().out
    assert "Nhiệm vụ 1" in out and "Nhiệm vụ 2" in out
    assert set(_core.GROUPS["lesson09"]) == {"task1", "task2"}


# --------------------------------------------------------------------------- the notebooks


def norm(code: str) -> str:
    return re.sub(r"\s+", " ", code).strip()


def test_solutions_notebook_holds_the_solutions_and_learner_notebook_the_blanks(tmp_path):
    solutions, learner = code_cells(SOLUTION_NB), code_cells(LEARNER_NB)
    for exercise, name in ((task1, "dominant_op"), (task2, "pick_num_workers")):
        assert norm(exercise.solution_code) in norm("\n".join(solutions))
        assert f"{exercise.key}.check({name})" in solutions and f"{exercise.key}.check({name})" in learner
        blank = next(c for c in learner if f"def {name}(" in c)
        assert "TODO" in blank and "return None" in blank
        ns = run_cell(blank.replace("from lessons_lib.exercises.lesson09 import task1, task2\n", ""), tmp_path, {})
        assert exercise.evaluate(ns[name]).status == "missing"

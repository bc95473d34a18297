"""Lesson 10's debugging tasks check themselves (solutions pass, blanks and unchanged starters are "chưa làm", each
wrong fix gets its own message naming the fix, nothing raises), the `Exercise` API works, and every task's
solution() is its lesson source's SOLUTION region (tests/test_rerun.py runs the solutions notebooks)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from _lesson_tasks import (
    CELL_SCOPE,
    WEIRD,
    assert_checks_never_raise,
    assert_fails,
    assert_missing,
    rows,
    run_cell,
)

from lessons_lib.device import pick_device
from lessons_lib.exercises import _core, lesson10, progress
from tools import build_course

ROOT = Path(__file__).resolve().parent.parent

TASKS = _core.GROUPS["lesson10"]
#: The functions each task's check() takes, in order.
ANSWERS = {"task1": ("train",), "task2": ("evaluate",), "task3": ("fetch_predictions",), "task4": ("train_epochs",),
           "task5": ("train_accum",), "task6": ("save_checkpoint", "load_checkpoint")}


def load(code: str, tmp_path: Path) -> dict:
    """Run `code` from a real file (so inspect.getsource works, as in a notebook) and return its namespace."""
    return run_cell(code, tmp_path, {**CELL_SCOPE, "device": pick_device()})


def answers(key: str, code: str, tmp_path: Path) -> list:
    ns = load(code, tmp_path)
    return [ns[name] for name in ANSWERS[key]]


def edited(key: str, old: str, new: str, tmp_path: Path, starter: bool = False) -> _core.Feedback:
    """Return the feedback on the task's solution (or starter) with `old` replaced by `new` (a wrong fix)."""
    code = TASKS[key].starter_code if starter else TASKS[key].solution_code
    assert old in code, old
    return TASKS[key].evaluate(*answers(key, code.replace(old, new), tmp_path))


def test_the_group_holds_the_six_tasks():
    assert list(TASKS) == list(ANSWERS)


@pytest.mark.parametrize("key", list(ANSWERS))
def test_solution_passes_and_blank_and_unchanged_starter_are_not_done(key, tmp_path):
    task = TASKS[key]
    feedback = task.evaluate(*answers(key, task.solution_code, tmp_path))
    assert feedback.passed and str(feedback).startswith("✅"), str(feedback)
    assert_missing(task.evaluate(*[None] * len(ANSWERS[key])))
    commented = task.starter_code.replace("\n", "  # a comment changes nothing\n", 1)
    assert_missing(task.evaluate(*answers(key, commented, tmp_path)), "y như bản có sẵn")


#: The shared odd answers, plus nan, a huge int, functions that return odd results, and a type.
ODD_ANSWERS = [*WEIRD, float("nan"), 10**30, lambda *a, **k: None, lambda *a, **k: "?", lambda *a, **k: [1, 2],
               int]


@pytest.mark.parametrize("key", list(ANSWERS))
def test_checkers_never_raise(key, capsys):
    assert_checks_never_raise(TASKS[key], capsys, ODD_ANSWERS, arities=(1, 2), keyword=True)


def test_wrong_argument_count_says_what_to_pass():
    assert_fails(lesson10.task6.evaluate(1, 2, 3), "task6.check(save_checkpoint, load_checkpoint)")


def test_errors_in_learner_code_are_summarised_and_explained(tmp_path):
    feedback = edited("task4", "sampler.set_epoch(epoch)", "sampler.set_epoch(epoch); 1 / 0", tmp_path)
    assert_fails(feedback, "train_epochs(loader, sampler, 3, train_step)", "ZeroDivisionError")
    assert "Traceback" not in str(feedback)


# --------------------------------------------------------------------------- each wrong fix, named

_SET_EPOCH = "        sampler.set_epoch(epoch)           # TRƯỚC khi duyệt loader: thứ tự mới cho epoch này\n"
_STEP_AND_UPDATE = ("        if (i + 1) % accum_steps == 0:                # đủ một batch lớn\n"
                    "            scaler.step(optimizer)\n            scaler.update()")

_SCALER_LOAD = '    scaler.load_state_dict(ckpt["scaler"])'
#: (task, old, new, from the starter?, the row of the task's table it shows (None: a check outside the tables),
#: what the message must name: the wrong thing or the fix).
WRONG_FIXES = [
    ("task1", "    model.to(device)                                # Module.to: tại chỗ\n", "", False, None,
     ["model.to(device)"]),
    ("task1", "xb, yb = xb.to(device), yb.to(device)", "xb.to(device); yb = yb.to(device)", False, None,
     ["xb = xb.to(device)"]),
    ("task1", "xb, yb = xb.to(device), yb.to(device)", "xb = xb.to(device)", False, None, ["yb = yb.to(device)"]),
    ("task1", "losses.append(loss.item())", "losses.append(loss)", False, None, ["losses.append(loss.item())"]),
    ("task1", "optimizer.step()", "pass", False, None, ["step"]),
    ("task2", "    model.eval()                                     # tắt Dropout\n", "", False, None, ["model.eval()"]),
    ("task2", "with torch.no_grad():", "if True:", False, None, ["torch.no_grad()"]),
    ("task2", 'reduction="sum").item()', 'reduction="sum")', False, None, ["Tensor, float", ".item()"]),
    ("task2", "(logits.argmax(dim=1) == yb).sum().item()", "(logits.argmax(dim=1) == yb).sum()", False, None,
     ["float, Tensor", ".item()"]),
    ("task2", 'F.cross_entropy(logits, yb, reduction="sum").item()', "F.cross_entropy(logits, yb).item()", False,
     "mean of batch means", ["reduction='sum'"]),
    ("task2", "return total_loss / count, correct / count", "return total_loss / count, correct / count * 100",
     False, "accuracy", ["accuracy"]),
    ("task2", "return total_loss / count, correct / count", "return total_loss / count", False, None,
     ["(loss trung bình, accuracy)"]),
    ("task3", "        pending.append(", "        sync()\n        pending.append(", True, "sync before the last copy",
     ["sync()"]),
    ("task3", "    return [p.tolist() for p in pending]", "    out = [p.tolist() for p in pending]\n    sync()\n"
     "    return out", True, "read before sync", [".tolist()", "sync()"]),
    ("task3", 'preds.to("cpu", non_blocking=True)', "preds.cpu()", True, "blocking copies", ["non_blocking=True"]),
    ("task3", "    return [p.tolist() for p in pending]", "    return pending", True, None, ["p.tolist()"]),
    ("task3", "    return [p.tolist() for p in pending]", "    return [p.clone().tolist() for p in pending]", True,
     "no sync", ["non_blocking=True", "sync()"]),
    ("task4", "sampler.set_epoch(epoch)", "torch.manual_seed(epoch)", False, "no set_epoch",
     ["sampler.set_epoch(epoch)", "torch.manual_seed"]),
    ("task4", "sampler.set_epoch(epoch)", "sampler.set_epoch(1)", False, "constant epoch",
     ["nhận 1", "sampler.set_epoch(epoch)"]),
    ("task4", _SET_EPOCH + "        for xb, yb in loader:\n            train_step(xb, yb)",
     "        for xb, yb in loader:\n            train_step(xb, yb)\n        sampler.set_epoch(epoch)", False,
     "set_epoch after the loop", ["set_epoch", "trước vòng for"]),
    ("task4", "sampler.set_epoch(epoch)", "sampler.set_epoch(epoch % 2)", False, "other", ["sampler.set_epoch(epoch)"]),
    ("task4", "            train_step(xb, yb)", "            train_step(xb, yb)\n            break", False, None,
     ["train_step", "loader"]),
    ("task5", "model(xb), yb) / accum_steps", "model(xb), yb)", False, "no division", ["/ accum_steps"]),
    ("task5", "            scaler.step(optimizer)\n", "", False, None, ["scaler.step(...)", "(i + 1) % accum_steps == 0"]),
    ("task5", _STEP_AND_UPDATE, "        scaler.step(optimizer)\n        if (i + 1) % accum_steps == 0:\n"
     "            scaler.update()", False, None, ["scaler.step(...)", "(i + 1) % accum_steps == 0"]),
    ("task5", _STEP_AND_UPDATE, "        scaler.update()\n        if (i + 1) % accum_steps == 0:\n"
     "            scaler.step(optimizer)", False, None, ["scaler.update(...)", "(i + 1) % accum_steps == 0"]),
    ("task5", "\n            optimizer.zero_grad(set_to_none=True)", "", False, "other", ["zero_grad"]),
    ("task5", "scaler.scale(loss).backward()", "loss.backward()", False, None, ["scaler.scale(loss).backward()"]),
    ("task5", "        scaler.scale(loss).backward()", "        if i < 7: scaler.scale(loss).backward()", False, None,
     ["scaler.scale(loss).backward()", "7 lần", "8 micro-batch"]),
    ("task6", '"scaler": scaler.state_dict()', '"scaler": scaler', False, "scaler object", ["scaler.state_dict()"]),
    ("task6", ',\n                "scaler": scaler.state_dict()}', "}", False, "no scaler saved",
     ['"scaler": scaler.state_dict()']),
    ("task6", _SCALER_LOAD, "    pass", False, "scaler not loaded", ["scaler.load_state_dict"]),
    ("task6", _SCALER_LOAD, '    scaler._init_scale = ckpt["scaler"]["scale"]', False, "scale only",
     ["scaler.load_state_dict"]),
    ("task6", '    model.load_state_dict(ckpt["model"])', "    pass", False, "model not loaded", ["model"]),
    ("task6", '    optimizer.load_state_dict(ckpt["optimizer"])', "    pass", False, "optimizer not loaded",
     ["optimizer.load_state_dict"]),
]


@pytest.mark.parametrize("key", list(ANSWERS))
def test_each_wrong_fix_fails_with_its_own_message_naming_the_fix_and_every_row_has_one(key, tmp_path):
    fixes = [fix for fix in WRONG_FIXES if fix[0] == key]
    assert set(rows(TASKS[key])) <= {fix[4] for fix in fixes}
    found = []
    for _, old, new, starter, row, names in fixes:
        found.append(edited(key, old, new, tmp_path, starter))
        assert_fails(found[-1], *names, row=row)
    assert len({feedback.lines for feedback in found}) == len(found), found


def test_task1_reports_every_device_bug_of_a_half_fixed_starter(tmp_path):
    feedback = edited("task1", "losses.append(loss)", "losses.append(loss.item())", tmp_path, starter=True)
    assert_fails(feedback, "model.to(device)", "xb = xb.to(device)", "yb = yb.to(device)")
    assert len(feedback.lines) == 3


def test_task2_detach_after_forward_is_too_late(tmp_path):
    too_late = edited("task2", "with torch.no_grad():", "if True:", tmp_path)
    graph = TASKS["task2"].solution_code.replace("with torch.no_grad():", "if True:").replace('"sum").item()', '"sum")')
    kept = TASKS["task2"].evaluate(*answers("task2", graph, tmp_path))
    assert_fails(kept, "grad_fn", "torch.no_grad()")
    assert "grad_fn" not in str(too_late)  # .item() alone: the result is fine, only the forward kept its graph
    assert edited("task2", "torch.no_grad()", "torch.inference_mode()", tmp_path).passed


def test_task3_accepts_cuda_synchronize_and_notes_extra_syncs(tmp_path):
    assert edited("task3", "    sync()  ", "    torch.cuda.synchronize()  ", tmp_path).passed
    each = edited("task3", "non_blocking=True))", "non_blocking=True)); sync()", tmp_path)
    assert each.passed and "4 lần" in "\n".join(each.notes)
    assert_missing(TASKS["task3"].evaluate(*answers("task3", "def fetch_predictions(model, batches, sync):\n    pass\n",
                                                     tmp_path)), "thiếu return")


def test_task6_a_new_scaler_in_load_is_the_same_slip_as_not_loading(tmp_path):
    rebound = edited("task6", '    scaler.load_state_dict(ckpt["scaler"])',
                     '    scaler = torch.amp.GradScaler("cpu"); scaler.load_state_dict(ckpt["scaler"])', tmp_path)
    unloaded = edited("task6", '    scaler.load_state_dict(ckpt["scaler"])', "    pass", tmp_path)
    assert rebound.lines == unloaded.lines and rebound.status == "fail"


def test_task6_writes_only_in_a_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    save, load_checkpoint = answers("task6", TASKS["task6"].solution_code, tmp_path)
    paths = []
    assert lesson10.task6.evaluate(lambda path, *a: (paths.append(path), save(path, *a)), load_checkpoint).passed
    assert paths and not Path(paths[0]).exists() and list(tmp_path.iterdir()) == list(tmp_path.glob("answer_*.py"))


# --------------------------------------------------------------------------- the Exercise API


def test_check_prints_and_hints_progress(capsys, monkeypatch):
    lesson10.task4.check(None)
    assert "⏳" in capsys.readouterr().out
    monkeypatch.setattr(_core, "_solutions", lambda: {"solution": {"lesson99": {"tmp_ex": "x = 1"}}})
    exercise = _core.Exercise("tmp_ex", "Bài X", lambda report, a=None: None, ["gợi ý một", "gợi ý hai"],
                              group="lesson99")
    try:
        exercise.hint()
        assert "1/2" in capsys.readouterr().out
        exercise.hint()
        out = capsys.readouterr().out
        assert "2/2" in out and "gợi ý hai" in out and "tmp_ex.solution()" in out
        exercise.hint()
        assert "2/2" in capsys.readouterr().out
        exercise.solution()
        assert "x = 1" in capsys.readouterr().out
        assert exercise.evaluate().passed and "tmp_ex" in repr(exercise)
    finally:
        del _core.GROUPS["lesson99"]


def test_groups_keep_lesson_tasks_apart(capsys):
    task = _core.Exercise("task1", "Nhiệm vụ thử", lambda report: report.success("ok"), ["gợi ý"], group="lesson99")
    try:
        assert _core.GROUPS["lesson99"]["task1"] is task and TASKS["task1"] is lesson10.task1
        task.check()
        capsys.readouterr()
        progress("lesson99")
        out = capsys.readouterr().out
        assert "Tiến độ: 1/1 nhiệm vụ đạt" in out and "Nhiệm vụ thử" in out
        progress("lesson10")
        assert "Nhiệm vụ thử" not in capsys.readouterr().out
    finally:
        del _core.GROUPS["lesson99"]
    with pytest.raises(ValueError, match="'lesson99'"):  # names what it got, and the lessons there are
        progress("lesson99")
    with pytest.raises(TypeError, match="lesson04"):  # says what to pass
        progress(4)


def test_progress_loads_the_lessons_tasks_when_none_was_imported():
    code = "from lessons_lib.exercises import progress; progress('lesson03')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("Tiến độ: 0/2 nhiệm vụ đạt"), out


@pytest.fixture
def fresh_statuses():
    saved = {key: task.last_status for key, task in TASKS.items()}
    for task in TASKS.values():
        task.last_status = None
    yield
    for key, status in saved.items():
        TASKS[key].last_status = status


def test_progress_lists_the_tasks_in_order(fresh_statuses, capsys, tmp_path):
    lesson10.task4.check(*answers("task4", TASKS["task4"].solution_code, tmp_path))
    capsys.readouterr()
    progress("lesson10")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Tiến độ: 1/6")
    assert [task.title in line for line, task in zip(lines[1:], TASKS.values(), strict=True)] == [True] * 6
    assert "✅" in lines[4] and sum("✅" in line for line in lines) == 1


def test_progress_marks_the_core_tasks_and_counts_them_apart(capsys):
    from lessons_lib.exercises import lesson04  # noqa: F401 - registers the lesson's tasks

    tasks = _core.GROUPS["lesson04"]
    saved = {key: task.last_status for key, task in tasks.items()}
    try:
        for task in tasks.values():
            task.last_status = None
        progress("lesson04")
    finally:
        for key, status in saved.items():
            tasks[key].last_status = status
    out = capsys.readouterr().out
    core = _core._solutions()["core"]["lesson04"]
    assert f"(⭐ cốt lõi: 0/{len(core)})" in out
    assert len([line for line in out.splitlines()[1:] if line.lstrip().startswith("⭐")]) == len(core)


# --------------------------------------------------------------------------- the lesson sources


def test_every_solution_prints_the_solution_region_of_its_lesson(capsys):
    """solution() of every task prints its SOLUTION region, as built now."""
    for path in sorted((ROOT / "lessons_lib" / "exercises").glob("lesson[0-9][0-9].py")):
        importlib.import_module(f"lessons_lib.exercises.{path.stem}")
    built = json.loads(build_course.solutions_json())
    groups = {group: tasks for group, tasks in _core.GROUPS.items() if tasks}
    assert {g: sorted(t) for g, t in groups.items()} == {g: sorted(t) for g, t in built["solution"].items()}
    for group, tasks in groups.items():
        for key, exercise in tasks.items():
            exercise.solution()
            assert capsys.readouterr().out == f"📖 {exercise.title} — lời giải:\n\n{built['solution'][group][key]}\n", key

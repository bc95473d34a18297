"""The exercise checkers check themselves: every solution passes, typical wrong answers fail with the right message,
nothing raises from inside a checker, and the two notebooks generated from course_src/10_exercises.md agree with
the library (solutions pass every check, the learner version runs and reports "chưa làm")."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import pytest
import torch
from _lesson_tasks import (
    CELL_SCOPE,
    WEIRD,
    assert_checks_never_raise,
    assert_fails,
    assert_missing,
    code_cells,
    normalised,
    notebook_pair,
    run_cell,
    run_notebook,
)

from lessons_lib import exercises as ex
from lessons_lib.device import pick_device
from lessons_lib.exercises import _core
from lessons_lib.exercises._tracking import MoveTracker
from tools import build_course

ROOT = Path(__file__).resolve().parent.parent

LEARNER_NB, SOLUTION_NB = notebook_pair("10_exercises")
HAS_CUDA = torch.cuda.is_available()


# --------------------------------------------------------------------------- helpers


def load(code: str, tmp_path: Path, **names) -> dict:
    """Run `code` from a real file (so inspect.getsource works, as in a notebook) and return its namespace."""
    return run_cell(code, tmp_path, {**CELL_SCOPE, "device": pick_device(), **names})


def run(exercise, *args) -> _core.Feedback:
    feedback = exercise.evaluate(*args)
    assert isinstance(feedback, _core.Feedback)
    return feedback


def _solution(exercise, name: str):
    """Return the object `name` that the exercise's reference solution defines."""
    ns = dict(CELL_SCOPE)
    exec(exercise.solution_code, ns)  # noqa: S102 - the reference solution shipped with the exercise
    return ns[name]


def _fixed(exercise, old: str, new: str, tmp_path: Path, starter: bool = False) -> dict:
    """Return the namespace of the exercise's solution (or starter) with `old` replaced by `new` (a wrong fix)."""
    code = exercise.starter_code if starter else exercise.solution_code
    assert old in code, old
    return load(code.replace(old, new), tmp_path)


SOLUTION_ARGS = {
    "ex1": ("train",),
    "ex2": ("evaluate",),
    "ex3": ("fetch_predictions",),
    "ex4": ("train_epochs",),
    "ex5": ("train_accum",),
    "ex6": ("save_checkpoint", "load_checkpoint"),
}


# --------------------------------------------------------------------------- every solution passes, blanks, starters


@pytest.mark.parametrize("key", list(SOLUTION_ARGS))
def test_solution_passes(key, tmp_path):
    exercise = _core.REGISTRY[key]
    ns = load(exercise.solution_code, tmp_path)
    feedback = run(exercise, *[ns[name] for name in SOLUTION_ARGS[key]])
    assert feedback.passed, str(feedback)
    assert str(feedback).startswith("✅")


@pytest.mark.parametrize("key", list(SOLUTION_ARGS))
def test_blank_answers_are_not_done_yet(key):
    assert_missing(run(_core.REGISTRY[key], *[None] * len(SOLUTION_ARGS[key])))


@pytest.mark.parametrize("key", list(SOLUTION_ARGS))
def test_unchanged_starter_is_not_done_yet(key, tmp_path):
    exercise = _core.REGISTRY[key]
    ns = load(exercise.starter_code, tmp_path)
    assert_missing(run(exercise, *[ns[name] for name in SOLUTION_ARGS[key]]), "bản có lỗi")


# --------------------------------------------------------------------------- never raises


#: The shared odd answers, plus nan, a huge int, functions that return odd results, and a type.
ODD_ANSWERS = [*WEIRD, float("nan"), 10**30, lambda *a, **k: None, lambda *a, **k: "?", lambda *a, **k: [1, 2],
               int]


@pytest.mark.parametrize("key", list(_core.REGISTRY))
def test_checkers_never_raise(key, capsys):
    assert_checks_never_raise(_core.REGISTRY[key], capsys, ODD_ANSWERS, arities=(1, 2), keyword=True)


def test_wrong_argument_count_says_what_to_pass():
    assert_fails(run(ex.ex6, 1, 2, 3), "ex6.check(save_checkpoint, load_checkpoint)")


def test_errors_in_learner_code_are_summarised_and_explained(tmp_path):
    ns = _fixed(ex.ex4, "sampler.set_epoch(epoch)", "sampler.set_epoch(epoch); 1 / 0", tmp_path)
    feedback = run(ex.ex4, ns["train_epochs"])
    assert_fails(feedback, "train_epochs(loader, sampler, 3, train_step) báo lỗi", "ZeroDivisionError")
    assert "Traceback" not in str(feedback)


# --------------------------------------------------------------------------- exercise 1

_FIXED_TRAIN = ex.ex1.solution_code


@pytest.mark.parametrize(("old", "new", "message"), [
    ("    model.to(device)                                # Module.to: tại chỗ\n", "", "model chưa được đưa lên device"),
    ("xb, yb = xb.to(device), yb.to(device)", "xb.to(device); yb = yb.to(device)", "xb.to(device) không sửa xb"),
    ("xb, yb = xb.to(device), yb.to(device)", "xb = xb.to(device)", "yb không được chuyển"),
    ("losses.append(loss.item())", "losses.append(loss)", "loss.item()"),
    ("optimizer.step()", "pass", "loss không giảm"),
])
def test_ex1_finds_each_bug(old, new, message, tmp_path):
    assert old in _FIXED_TRAIN
    ns = load(_FIXED_TRAIN.replace(old, new), tmp_path)
    assert_fails(run(ex.ex1, ns["train"]), message)


def test_ex1_unchanged_starter_is_not_done_yet(tmp_path):
    ns = load(ex.ex1.starter_code, tmp_path)
    assert_missing(run(ex.ex1, ns["train"]), "bản có lỗi")
    edited = load(ex.ex1.starter_code.replace("losses.append(loss)", "losses.append(loss.item())"), tmp_path)
    feedback = run(ex.ex1, edited["train"])
    assert_fails(feedback, "model chưa được đưa", "xb.to(device) không sửa", "yb không được chuyển")
    assert "loss.item()" not in str(feedback).split("→")[0]



def test_move_tracker_sees_unused_results():
    with MoveTracker() as tracker:
        x = torch.arange(4)
        x.to("cpu")                       # thrown away
        y = x.to("cpu")                   # kept
        z = y + 1
        tracker.mark_used(z)
    assert len(tracker.moves) == 2
    thrown, kept = tracker.moves
    assert not tracker.used_after(thrown.result, thrown.index) and tracker.used_after(kept.result, kept.index)
    assert tracker.moves_of(x) == tracker.moves
    assert tracker.factories == [("arange", torch.device("cpu"))]
    assert torch.equal(y, x) and y is not x          # an alias: same values, a new object



def test_same_code_compares_functions_and_classes(tmp_path):
    ns = load("def f(a):\n    return a + 1  # comment\n\nclass C:\n    def m(self):\n        return 2\n", tmp_path)
    assert _core.same_code(ns["f"], "def f(a):\n    return a+1\n")
    assert not _core.same_code(ns["f"], "def f(a):\n    return a + 2\n")
    assert _core.same_code(ns["C"], "class C:\n    def m(self):  # x\n        return 2\n")
    assert not _core.same_code(ns["C"], "class C:\n    def m(self):\n        return 3\n")
    assert not _core.same_code(len, "def len(x): pass")
    assert not _core.same_code(ns["f"], None)



# --------------------------------------------------------------------------- exercise 2


@pytest.mark.parametrize(("old", "new", "message"), [
    ("    model.eval()                                     # tắt Dropout\n", "", "model.eval()"),
    ("with torch.no_grad():", "if True:", "torch.no_grad()"),
    ('reduction="sum").item()', 'reduction="sum")', "trả về Tensor, float"),
    ("(logits.argmax(dim=1) == yb).sum().item()", "(logits.argmax(dim=1) == yb).sum()", "float, Tensor"),
    ('F.cross_entropy(logits, yb, reduction="sum").item()', "F.cross_entropy(logits, yb).item()", "batch cuối"),
    ("return total_loss / count, correct / count", "return total_loss / count, correct / count * 100", "accuracy"),
    ("return total_loss / count, correct / count", "return total_loss / count", "một cặp"),
])
def test_ex2_names_each_wrong_fix(old, new, message, tmp_path):
    assert_fails(run(ex.ex2, _fixed(ex.ex2, old, new, tmp_path)["evaluate"]), message)


def test_ex2_detach_after_forward_is_too_late(tmp_path):
    ns = _fixed(ex.ex2, "with torch.no_grad():", "if True:", tmp_path)
    feedback = run(ex.ex2, ns["evaluate"])
    assert_fails(feedback, "đã được lưu rồi")
    assert "grad_fn" not in str(feedback)  # .item() alone: the result is fine, only the forward kept its graph
    graph = ex.ex2.solution_code.replace("with torch.no_grad():", "if True:").replace('"sum").item()', '"sum")')
    assert_fails(run(ex.ex2, load(graph, tmp_path)["evaluate"]), "grad_fn", "đã được lưu rồi")
    inference = _fixed(ex.ex2, "torch.no_grad()", "torch.inference_mode()", tmp_path)
    assert run(ex.ex2, inference["evaluate"]).passed


# --------------------------------------------------------------------------- exercise 3


@pytest.mark.parametrize(("old", "new", "message"), [
    ("        pending.append(", "        sync()\n        pending.append(", "TRƯỚC lệnh chép cuối"),
    ("    return [p.tolist() for p in pending]", "    out = [p.tolist() for p in pending]\n    sync()\n    return out",
     "trước sync()"),
    ('preds.to("cpu", non_blocking=True)', "preds.cpu()", "bỏ non_blocking"),
    ("    return [p.tolist() for p in pending]", "    return pending", "list các list"),
    ("    return [p.tolist() for p in pending]", "    return [p.clone().tolist() for p in pending]", "XẾP HÀNG"),
])
def test_ex3_names_each_wrong_fix(old, new, message, tmp_path):
    assert_fails(run(ex.ex3, _fixed(ex.ex3, old, new, tmp_path, starter=True)["fetch_predictions"]), message)


def test_ex3_accepts_cuda_synchronize_and_notes_extra_syncs(tmp_path):
    cuda_sync = _fixed(ex.ex3, "    sync()  ", "    torch.cuda.synchronize()  ", tmp_path)
    assert run(ex.ex3, cuda_sync["fetch_predictions"]).passed
    each = _fixed(ex.ex3, "non_blocking=True))", "non_blocking=True)); sync()", tmp_path)
    feedback = run(ex.ex3, each["fetch_predictions"])
    assert feedback.passed and "sync() 4 lần" in str(feedback)
    assert_missing(run(ex.ex3, load("def fetch_predictions(model, batches, sync):\n    pass\n", tmp_path)
                       ["fetch_predictions"]), "thiếu return")


# --------------------------------------------------------------------------- exercise 4


@pytest.mark.parametrize(("old", "new", "message"), [
    ("sampler.set_epoch(epoch)", "torch.manual_seed(epoch)", "set_epoch(epoch). torch.manual_seed"),
    ("sampler.set_epoch(epoch)", "sampler.set_epoch(1)", "luôn nhận 1"),
    ("        for xb, yb in loader:\n            train_step(xb, yb)",
     "        for xb, yb in loader:\n            train_step(xb, yb)\n        sampler.set_epoch(epoch)", "SAU khi"),
    ("            train_step(xb, yb)", "            train_step(xb, yb)\n            break", "mỗi epoch duyệt hết"),
])
def test_ex4_names_each_wrong_fix(old, new, message, tmp_path):
    if "SAU" in message:  # the loop is moved: set_epoch goes after the batches of its epoch
        code = ex.ex4.solution_code.replace("        sampler.set_epoch(epoch)           # TRƯỚC khi duyệt loader: "
                                            "thứ tự mới cho epoch này\n", "")
        ns = load(code.replace(old, new), tmp_path)
    else:
        ns = _fixed(ex.ex4, old, new, tmp_path)
    assert_fails(run(ex.ex4, ns["train_epochs"]), message)


# --------------------------------------------------------------------------- exercise 5


@pytest.mark.parametrize(("old", "new", "message"), [
    ("model(xb), yb) / accum_steps", "model(xb), yb)", "chưa chia cho accum_steps"),
    ("            scaler.step(optimizer)\n", "", "scaler.step(...) chạy 0 lần"),
    ("        if (i + 1) % accum_steps == 0:                # đủ một batch lớn\n            scaler.step(optimizer)",
     "        scaler.step(optimizer)\n        if (i + 1) % accum_steps == 0:", "mô hình đổi sau từng micro-batch"),
    ("        if (i + 1) % accum_steps == 0:                # đủ một batch lớn\n            scaler.step(optimizer)\n"
     "            scaler.update()",
     "        scaler.update()\n        if (i + 1) % accum_steps == 0:\n            scaler.step(optimizer)",
     "scaler.update(...) chạy 1 lần sau 1 micro-batch"),
    ("\n            optimizer.zero_grad(set_to_none=True)", "", "zero_grad sau mỗi scaler.step"),
    ("scaler.scale(loss).backward()", "loss.backward()", "không qua scaler"),
    ("        scaler.scale(loss).backward()", "        if i < 7: scaler.scale(loss).backward()", "chạy 7 lần cho 8"),
])
def test_ex5_names_each_wrong_fix(old, new, message, tmp_path):
    assert_fails(run(ex.ex5, _fixed(ex.ex5, old, new, tmp_path)["train_accum"]), message)


# --------------------------------------------------------------------------- exercise 6


@pytest.mark.parametrize(("old", "new", "message"), [
    ('    scaler.load_state_dict(ckpt["scaler"])', "    pass", "vẫn có S = 65536"),
    ('    scaler.load_state_dict(ckpt["scaler"])',
     '    scaler = torch.amp.GradScaler("cpu"); scaler.load_state_dict(ckpt["scaler"])', "tới 5 bước đầu"),
    ('"scaler": scaler.state_dict()', '"scaler": scaler', "chính đối tượng scaler"),
    (',\n                "scaler": scaler.state_dict()}', "}", "không có trạng thái của scaler"),
    ('    optimizer.load_state_dict(ckpt["optimizer"])', "    pass", "mất trạng thái"),
    ('    model.load_state_dict(ckpt["model"])', "    pass", "model nạp lại khác"),
])
def test_ex6_names_each_wrong_fix(old, new, message, tmp_path):
    ns = _fixed(ex.ex6, old, new, tmp_path)
    assert_fails(run(ex.ex6, ns["save_checkpoint"], ns["load_checkpoint"]), message)


def test_ex6_writes_only_in_a_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ns = load(ex.ex6.solution_code, tmp_path)
    paths = []
    save = ns["save_checkpoint"]
    assert run(ex.ex6, lambda path, *a: (paths.append(path), save(path, *a)), ns["load_checkpoint"]).passed
    assert paths and not Path(paths[0]).exists() and list(tmp_path.iterdir()) == list(tmp_path.glob("answer_*.py"))


# --------------------------------------------------------------------------- the Exercise API


def test_check_prints_and_hints_progress(capsys, monkeypatch):
    ex.ex4.check(None)
    assert "⏳" in capsys.readouterr().out
    monkeypatch.setattr(_core, "_solutions", lambda: {"solution": {"exercises": {"tmp_ex": "x = 1"}}})
    exercise = _core.Exercise("tmp_ex", "Bài X", lambda report, a=None: None, ["gợi ý một", "gợi ý hai"])
    try:
        exercise.hint()
        assert "1/2" in capsys.readouterr().out
        exercise.hint()
        out = capsys.readouterr().out
        assert "2/2" in out and "gợi ý hai" in out and "tmp_ex.solution()" in out
        exercise.hint()
        assert "2/2" in capsys.readouterr().out
        exercise.hint(1)
        assert "gợi ý một" in capsys.readouterr().out
        exercise.solution()
        assert "x = 1" in capsys.readouterr().out
        with pytest.raises(ValueError, match="from 1 to 2"):
            exercise.hint(3)
        with pytest.raises(TypeError, match="int from 1 to 2"):
            exercise.hint("1")
        assert exercise.evaluate().passed and "tmp_ex" in repr(exercise)
    finally:
        del _core.REGISTRY["tmp_ex"]


def test_groups_keep_lesson_tasks_apart(capsys):
    task = _core.Exercise("task1", "Nhiệm vụ thử", lambda report: report.success("ok"), ["gợi ý"], group="lesson99")
    try:
        assert "task1" not in _core.REGISTRY and _core.GROUPS["lesson99"]["task1"] is task
        task.check()
        capsys.readouterr()
        ex.progress("lesson99")
        out = capsys.readouterr().out
        assert "Tiến độ: 1/1 nhiệm vụ đạt" in out and "Nhiệm vụ thử" in out
        ex.progress()
        assert "Nhiệm vụ thử" not in capsys.readouterr().out
    finally:
        del _core.GROUPS["lesson99"]
    with pytest.raises(ValueError, match="group must be one of"):
        ex.progress("lesson99")
    with pytest.raises(TypeError, match="group must be a str"):
        ex.progress(4)


def test_progress_lists_every_exercise(capsys):
    ex.ex4.check(_solution(ex.ex4, "train_epochs"))
    ex.progress()
    out = capsys.readouterr().out
    titled = r"(?:Bài|Nhiệm vụ) "  # notebook 10's checked tasks are "Nhiệm vụ N" (issue 38), the others "Bài 14.N · …"
    assert "Tiến độ:" in out and len(re.findall(titled, out)) >= len(_core.REGISTRY)
    assert re.search(titled + r"4 .*✅ đạt", out)
    lines = [line for line in out.split("Tiến độ:")[1].splitlines() if re.search(titled, line)]
    assert re.match(titled + "1 ", lines[0].strip()) and re.match(titled + "6 ", lines[-1].strip())


def test_helpers():
    assert _core.is_blank(None) and _core.is_blank(...) and not _core.is_blank(0)
    assert _core.as_device("cuda:1") == torch.device("cuda:1") and _core.as_device("nope") is None
    assert _core.as_device(3) is None
    assert _core.same_device(torch.device("cuda"), torch.device("cuda:0"))
    assert not _core.same_device(torch.device("cuda:1"), torch.device("cuda:0"))
    assert _core.number(torch.tensor(2.5)) == 2.5 and _core.number(True) is None
    assert _core.number(torch.zeros(1, device="meta")) is None


# --------------------------------------------------------------------------- the notebooks


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def test_every_solution_prints_the_solution_region_of_its_lesson(capsys):
    """solution() of every task (notebook 10's and the lessons') prints its SOLUTION region, as built now."""
    for path in sorted((ROOT / "lessons_lib" / "exercises").glob("lesson[0-9][0-9].py")):
        importlib.import_module(f"lessons_lib.exercises.{path.stem}")
    built = json.loads(build_course.solutions_json())
    groups = {group: tasks for group, tasks in _core.GROUPS.items() if tasks}
    assert {g: sorted(t) for g, t in groups.items()} == {g: sorted(t) for g, t in built["solution"].items()}
    for group, tasks in groups.items():
        for key, exercise in tasks.items():
            exercise.solution()
            assert capsys.readouterr().out == f"📖 {exercise.title} — lời giải:\n\n{built['solution'][group][key]}\n", key


def test_learner_notebook_holds_every_starter_and_both_every_check():
    solutions = "\n".join(code_cells(SOLUTION_NB))
    learner = "\n".join(code_cells(LEARNER_NB))
    for exercise in _core.REGISTRY.values():
        assert f"{exercise.key}.check(" in solutions and f"{exercise.key}.check(" in learner
        if exercise.starter_code:
            assert normalised(exercise.starter_code) in normalised(learner), f"{exercise.key} starter differs"


def test_badges_open_both_notebooks_on_colab_and_kaggle():
    badges = (ROOT / "colab_badges.md").read_text(encoding="utf-8")
    for path in (LEARNER_NB, SOLUTION_NB):
        rel = path.relative_to(ROOT).as_posix()
        first = "".join(_cells(path)[0]["source"])
        assert f"blob/main/{rel}" in first and "kaggle.com/kernels/welcome?src=" in first
        assert rel.replace("/", "%2F") in first
        assert f"blob/main/{rel})" in badges and rel.replace("/", "%2F") + ")" in badges


@pytest.fixture
def fresh_registry():
    saved = {key: e.last_status for key, e in _core.REGISTRY.items()}
    for e in _core.REGISTRY.values():
        e.last_status = None
    yield
    for key, status in saved.items():
        _core.REGISTRY[key].last_status = status


@pytest.mark.skipif(HAS_CUDA, reason="on a GPU the notebooks run their %%gpu cells under nbval instead")
def test_solutions_notebook_passes_every_check(fresh_registry):
    out, _ = run_notebook(SOLUTION_NB)
    assert "❌" not in out and "⏳" not in out, out
    exercises = list(_core.REGISTRY.values())
    assert len(re.findall(r"^✅ (?:Bài|Nhiệm vụ) ", out, re.M)) >= len(exercises), out
    assert all(e.last_status == "pass" for e in exercises)
    assert f"Tiến độ: {len(exercises)}/{len(exercises)} nhiệm vụ đạt" in out


@pytest.mark.skipif(HAS_CUDA, reason="on a GPU the notebooks run their %%gpu cells under nbval instead")
def test_learner_notebook_runs_and_reports_not_done(fresh_registry):
    out, _ = run_notebook(LEARNER_NB)
    assert "✅ Bài" not in out and "❌" not in out, out
    assert all(e.last_status == "missing" for e in _core.REGISTRY.values())
    assert "Tiến độ: 0/" in out


def test_nothing_leaks_between_tests():
    assert sys.modules["lessons_lib.exercises"] is ex


def test_progress_marks_the_core_tasks_and_counts_them_apart(fresh_registry, capsys):
    import lessons_lib.exercises.lesson04  # noqa: F401 - registers the lesson's tasks

    _core.progress("lesson04")
    out = capsys.readouterr().out
    assert "Tiến độ: 0/3 nhiệm vụ đạt (⭐ cốt lõi: 0/1)" in out
    core_line = next(line for line in out.splitlines() if "Nhiệm vụ 1 ·" in line)
    assert core_line.lstrip().startswith("⭐") and "Nhiệm vụ 2" not in core_line

"""The capstone's checkers (lessons_lib.exercises.lesson11) check themselves: the solutions pass, each typical wrong
answer fails with its own message, a blank is "not done yet", nothing raises; and they train notebook 11's model."""

from __future__ import annotations

import pytest
import torch
from _lesson_tasks import (
    WEIRD,
    assert_checks_never_raise,
    assert_fails,
    assert_missing,
    code_cells,
    load,
    notebook_pair,
    rows,
    run_cell,
)

from lessons_lib.exercises import _core
from lessons_lib.exercises import lesson11 as L

_, SOLUTION_NB = notebook_pair("11_capstone")


# --------------------------------------------------------------------------- the data and the references


def test_digits_are_split_like_the_notebook():
    X_train, y_train, X_test, y_test = L._data(_core.Report(), torch.device("cpu"))
    assert X_train.shape == (1347, 64) and X_test.shape == (450, 64)
    assert X_train.dtype == torch.float32 and y_train.dtype == torch.int64
    assert 0 <= float(X_train.min()) and float(X_train.max()) == 1.0
    counts = torch.bincount(y_test)
    assert int(counts.sum()) == 450 and int(counts.max() - counts.min()) <= 3  # stratified
    X_train.mul_(0)                                  # a learner's in-place change cannot spoil the next check
    assert float(L._data(_core.Report(), torch.device("cpu"))[0].max()) == 1.0


def test_digits_without_scikit_learn_say_how_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_sklearn(name, *args, **kwargs):
        if name.startswith("sklearn"):
            raise ImportError("No module named 'sklearn'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(L, "_DIGITS", {})
    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    feedback = L.task2.evaluate(L.reference_train_epoch)
    assert_fails(feedback, "pip install scikit-learn")


def test_references_are_the_printed_solutions():
    import inspect

    assert inspect.getsource(L.reference_evaluate).strip() == L.task1.solution_code.strip()
    assert inspect.getsource(L.reference_train_epoch).strip() == L.task2.solution_code.strip()


def test_checks_leave_the_notebooks_random_numbers_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    L.task1.evaluate(L.reference_evaluate)
    L.task2.evaluate(L.reference_train_epoch)
    assert torch.equal(torch.rand(3), expected)


# --------------------------------------------------------------------------- task 1: evaluate


def test_task1_solution_passes_and_blanks_are_not_done(tmp_path):
    assert L.task1.evaluate(L.reference_evaluate).passed
    assert L.task1.evaluate(_evaluate(tmp_path, grad="torch.inference_mode()")).passed
    assert_missing(L.task1.evaluate(None), "evaluate")
    assert_missing(L.task1.evaluate(...))
    assert_missing(L.task1.evaluate(lambda model, X, y: None), "return")


_EVALUATE = '''
import contextlib
def evaluate(model, X, y):
    {eval}
    with {grad}:
        pred = model(X).{argmax}
    return {result}
'''


def _evaluate(tmp_path, eval="model.eval()", grad="torch.no_grad()", argmax="argmax(dim=1)",
              result="(pred == y).float().mean().item()"):
    return load(_EVALUATE.format(eval=eval, grad=grad, argmax=argmax, result=result), tmp_path, "evaluate")


_GRAD_OFF = "model.eval(); torch.set_grad_enabled(False)"
#: An example of each row of task 1's tables: (the parts of `_EVALUATE` it changes, what the message must name).
EXAMPLES = {
    "train mode": ({"eval": "pass"}, "model.eval()"),
    "autograd on": ({"grad": "contextlib.nullcontext()"}, "torch.no_grad()"),
    "autograd off for good": ({"eval": _GRAD_OFF, "grad": "contextlib.nullcontext()"},
                              "torch.set_grad_enabled(False)"),
    "no forward": ({"eval": "return 0.5"}, "model(X)"),
    "graph": ({"grad": "contextlib.nullcontext()", "result": "F.softmax(model(X), dim=1).max(dim=1).values.mean()"},
              ".item()"),
    "tensor": ({"result": "(pred == y).float().mean()"}, ".item()"),
    "not a number": ({"result": "str((pred == y).float().mean().item())"}, "str"),
    "percent": ({"result": "100 * (pred == y).float().mean().item()"}, "0 đến 1"),
    "count": ({"result": "(pred == y).sum().item()"}, "len(y) = 450"),
    "other": ({"result": "(pred[:64] == y[:64]).float().mean().item()"}, "argmax(dim=1)"),
}


def test_task1_every_row_of_its_tables_has_an_example():
    assert rows(L.task1) == list(EXAMPLES)


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_task1_each_mistake_is_found_and_named(name, tmp_path):
    parts, names = EXAMPLES[name]
    feedback = L.task1.evaluate(_evaluate(tmp_path, **parts))
    assert_fails(feedback, names)
    assert name in feedback.causes
    assert torch.is_grad_enabled(), "the checker must restore grad mode"


def test_task1_reports_every_mode_mistake_at_once(tmp_path):
    feedback = L.task1.evaluate(_evaluate(tmp_path, eval="pass", grad="contextlib.nullcontext()"))
    assert feedback.causes == ("train mode", "autograd on")


# --------------------------------------------------------------------------- task 2: train_epoch


def test_task2_solution_passes_and_blanks_are_not_done():
    feedback = L.task2.evaluate(L.reference_train_epoch)
    assert feedback.passed, str(feedback)
    assert_missing(L.task2.evaluate(None), "train_epoch")
    assert_missing(L.task2.evaluate(lambda *args: None), "thiếu return")


def _train(tmp_path, *edits: tuple[str, str]):
    code = L.task2.solution_code
    for old, new in edits:
        assert old in code, old
        code = code.replace(old, new)
    return load(code, tmp_path, "train_epoch")


_RETURN, _TOTAL, _STEP = "return (total / len(X)).item()", "total += loss.detach().float() * len(idx)", \
    "scaler.step(optimizer)  "
#: An example of each row of task 2's tables: (edits of the solution, what the message must name).
EXAMPLES_2 = {
    "graph": ([(_RETURN, "return loss")], ["loss.detach()", ".item()"]),
    "tensor": ([(_RETURN, "return total / len(X)")], [".item()"]),
    "not a number": ([(_RETURN, "return [total.item()]")], ["list"]),
    "diverged": ([(_RETURN, "return float('nan')")], ["nan"]),
    "item each step": ([(_TOTAL, "total += loss.item() * len(idx)")], ["22 batch", "float(loss)", ".item()"]),
    "eval mode": ([("model.train()  ", "pass  ")], ["model.train()"]),
    "whole data": ([("model(X[idx]), y[idx]", "model(X), y")], ["batch_size=64", "X[idx]"]),
    "last batch left out": ([("range(0, len(X), batch_size)", "range(0, len(X) - batch_size, batch_size)")],
                            ["range(0, len(X), batch_size)"]),
    "batches left out": ([("order[start:start + batch_size]", "order[start:start + 32]")], ["675/1347"]),
    "samples twice": ([("range(0, len(X), batch_size)", "range(0, len(X), batch_size // 2)")], ["1347"]),
    "fixed batch size": ([("range(0, len(X), batch_size)", "range(0, len(X), 32)"),
                          ("order[start:start + batch_size]", "order[start:start + 32]")], ["batch_size=64"]),
    "no autocast": ([("with torch.autocast(X.device.type, dtype=amp_dtype, enabled=amp_dtype is not None):",
                      "if True:")], ["torch.autocast"]),
    "no step": ([("    model.train()  ", "    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)\n"
                                        "    model.train()  ")], ["đừng tạo optimizer mới"]),
    "two steps": ([(_STEP, "scaler.step(optimizer); optimizer.step()  ")], ["scaler.step(optimizer)"]),
    "stale gradients": ([("        optimizer.zero_grad()\n", "")], ["optimizer.zero_grad()"]),
    "no scaler": ([("scaler.scale(loss).backward()", "loss.backward()")], ["scaler.scale(...)"]),
    "no backward": ([("scaler.scale(loss).backward()", "scaler.scale(loss)")], ["scaler.scale(loss).backward()"]),
    "zero_grad before step": ([(_STEP, "optimizer.zero_grad(); scaler.step(optimizer)  ")],
                              ["zero_grad()", "backward()"]),
    "not learning": ([("    model.train()  ", "    optimizer.param_groups[0]['lr'] = 0.0\n    model.train()  ")],
                     ["scaler.step(optimizer)"]),
    "not shuffled": ([("torch.randperm(len(X), device=X.device)", "torch.arange(len(X), device=X.device)")],
                     ["torch.randperm"]),
    "below target": ([("F.cross_entropy(model(X[idx]), y[idx])", "F.cross_entropy(model(X[idx]), y[idx].roll(1))")],
                     ["idx", "95%"]),
}


def test_task2_every_row_of_its_tables_has_an_example():
    assert rows(L.task2) == list(EXAMPLES_2)


@pytest.mark.parametrize("name", list(EXAMPLES_2))
def test_task2_each_mistake_is_found_and_named(name, tmp_path):
    edits, names = EXAMPLES_2[name]
    feedback = L.task2.evaluate(_train(tmp_path, *edits))
    assert_fails(feedback, *names)
    assert feedback.causes[0] == name


def test_task2_accepts_other_right_ways(tmp_path):
    zero_after_step = load(L.task2.solution_code.replace("        optimizer.zero_grad()\n", "").replace(
        "scaler.update()", "scaler.update(); optimizer.zero_grad(set_to_none=False)"), tmp_path, "train_epoch")
    assert L.task2.evaluate(zero_after_step).passed


def test_task2_fp16_path_as_on_a_gpu(monkeypatch, tmp_path):
    """With float16 (what a CUDA GPU gets) and an enabled GradScaler, the solution passes and a loop without it fails."""
    monkeypatch.setattr(L, "_amp_dtype_for_check", lambda device: torch.float16)
    assert L.task2.evaluate(L.reference_train_epoch).passed
    no_scaler = _train(tmp_path, ("scaler.scale(loss).backward()", "loss.backward()"))
    assert_fails(L.task2.evaluate(no_scaler), "float16")


# --------------------------------------------------------------------------- never raises, and the API


#: The shared odd answers, plus nan, functions that return odd results, and a type.
ODD_ANSWERS = [*WEIRD, float("nan"), lambda *a, **k: "?", lambda *a, **k: [1, 2], lambda *a, **k: torch.ones(3),
               lambda *a, **k: float("inf"), int]


@pytest.mark.parametrize("task", [L.task1, L.task2], ids=lambda t: t.key)
def test_checkers_never_raise(task, capsys):
    assert_checks_never_raise(task, capsys, ODD_ANSWERS, verdicts=("❌", "⏳"))


# --------------------------------------------------------------------------- the notebooks


def test_the_checkers_train_the_notebooks_model(tmp_path):
    """The checkers build the notebook's make_model() with the same weights (the notebook's run: tests/test_rerun.py)."""
    (cell,) = [c for c in code_cells(SOLUTION_NB) if c.startswith("def make_model(")]
    torch.manual_seed(0)
    notebook_model = run_cell(cell, tmp_path)["make_model"]()
    checker_model = L._make_digits_model()
    assert str(notebook_model) == str(checker_model)
    assert all(torch.equal(a, b) for a, b in zip(notebook_model.parameters(), checker_model.parameters(), strict=True))


@pytest.mark.slow
def test_importing_the_tasks_does_not_import_scikit_learn():
    """scikit-learn is not a dependency of lessons_lib: only a running check imports it."""
    import subprocess
    import sys

    code = "import sys, lessons_lib.exercises.lesson11; assert 'sklearn' not in sys.modules, 'sklearn imported'"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr

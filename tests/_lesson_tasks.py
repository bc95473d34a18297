"""Shared helpers for the tests of the checked tasks (tests/test_exercises.py, tests/test_exercises_lessonNN.py)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from lessons_lib.exercises._core import Feedback

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"

#: Answers that are not even the right kind of thing: a checker must answer them without raising.
WEIRD = [0, "x", 3.5, [], {}, object(), torch.zeros(2), lambda *a, **k: 1 / 0, nn.Linear(2, 2)]

#: What a notebook cell can use without importing it.
CELL_SCOPE = {"torch": torch, "nn": nn, "F": F}
#: The same for the first lessons' notebooks, which import only torch.
TORCH_SCOPE = {"torch": torch}


def run_cell(code: str, tmp_path: Path, scope: dict | None = None) -> dict:
    """Run `code` from a real file (as a notebook cell would) on a copy of `scope` and return its namespace."""
    code = textwrap.dedent(code)
    path = tmp_path / f"answer_{abs(hash(code))}.py"
    path.write_text(code, encoding="utf-8")
    ns = dict(CELL_SCOPE if scope is None else scope)
    exec(compile(code, str(path), "exec"), ns)
    return ns


def load(code: str, tmp_path: Path, name: str, scope: dict | None = None):
    """Run `code` from a real file (as a notebook cell would define it) and return the object called `name`."""
    return run_cell(code, tmp_path, scope)[name]


def load_function(signature: str, body: str, tmp_path: Path, scope: dict | None = None):
    """Define ``def <signature>:`` with `body` (any indentation) as a notebook cell would and return the function."""
    code = f"def {signature}:\n" + textwrap.indent(textwrap.dedent(body), "    ")
    return load(code, tmp_path, signature.split("(", 1)[0], scope)


def solution_of(exercise, name: str, scope: dict):
    """Run the exercise's reference solution on a copy of `scope` and return the object called `name`."""
    ns = dict(scope)
    exec(exercise.solution_code, ns)  # noqa: S102 - the reference solution shipped with the exercise
    return ns[name]


def lines_of(feedback: Feedback) -> str:
    """Return the feedback's own lines (no title, notes or hint line) as one text."""
    return "\n".join(feedback.lines)


def assert_fails(feedback: Feedback, *fragments: str, row: str | None = None) -> None:
    """Assert the feedback fails (showing the misconception `row` when given) and its lines name every fragment."""
    assert feedback.status == "fail" and (row is None or row in feedback.causes), str(feedback)
    for fragment in fragments:
        assert fragment in lines_of(feedback), f"{fragment!r} not in:\n{feedback}"


def rows(exercise) -> list[str]:
    """Return the names of the exercise's misconception rows (one parametrised test case each)."""
    return [row.name for row in exercise.wrongs]


def assert_missing(feedback: Feedback, *fragments: str) -> None:
    """Assert the feedback says "not done yet" and names every fragment."""
    text = str(feedback)
    assert feedback.status == "missing", text
    assert "chưa làm" in text
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in:\n{text}"


def assert_checks_never_raise(exercise, capsys, values=WEIRD, *, arities=(1, 2), keyword: bool = False,
                              verdicts=("❌", "⏳", "✅")) -> None:
    """Check each odd value with `arities` positional copies (and as ``extra=`` when `keyword`); each prints a verdict."""
    for value in values:
        for count in arities:
            exercise.check(*[value] * count)
        if keyword:
            exercise.check(value, extra=value)
        out = capsys.readouterr().out
        assert out.startswith(verdicts), out


def notebook_pair(stem: str) -> tuple[Path, Path]:
    """Return the learner notebook `stem` and its solutions twin."""
    return NOTEBOOKS / f"{stem}.ipynb", NOTEBOOKS / "solutions" / f"{stem}_solutions.ipynb"


def code_cells(path: Path) -> list[str]:
    """Return the source of every code cell of the notebook at `path`."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]

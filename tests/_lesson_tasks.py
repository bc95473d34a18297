"""Shared helpers for the tests of the lessons' checked tasks (tests/test_exercises_lessonNN.py)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from lessons_lib.exercises import Feedback

#: Answers that are not even the right kind of thing: a checker must answer them without raising.
WEIRD = [0, "x", 3.5, [], {}, object(), torch.zeros(2), lambda *a, **k: 1 / 0, nn.Linear(2, 2)]


def load(code: str, tmp_path: Path, name: str):
    """Run `code` from a real file (as a notebook cell would define it) and return the object called `name`."""
    code = textwrap.dedent(code)
    path = tmp_path / f"answer_{abs(hash(code))}.py"
    path.write_text(code, encoding="utf-8")
    ns = {"torch": torch, "nn": nn, "F": F}
    exec(compile(code, str(path), "exec"), ns)
    return ns[name]


def assert_passes(feedback: Feedback) -> None:
    assert feedback.status == "pass", str(feedback)
    assert str(feedback).startswith("✅")


def assert_fails(feedback: Feedback, *fragments: str) -> None:
    text = str(feedback)
    assert feedback.status == "fail", text
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in:\n{text}"


def assert_missing(feedback: Feedback, *fragments: str) -> None:
    text = str(feedback)
    assert feedback.status == "missing", text
    assert "chưa làm" in text
    for fragment in fragments:
        assert fragment in text, f"{fragment!r} not in:\n{text}"

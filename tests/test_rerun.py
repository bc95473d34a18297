"""Every course notebook runs top to bottom twice in one kernel without a cell error (learners re-run cells).

Each notebook goes through tools/execute_course.py: it runs twice in one kernel and, when it passes, its
executed copy (outputs of the second pass) is cached under build/executed/ by content hash. The website build
reads the same copies, so within one test command each notebook is executed once for both. A notebook, a file
of lessons_lib, or the torch/Python version changing makes it run again.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import execute_course  # noqa: E402

NOTEBOOKS = execute_course.course_notebooks()


def test_the_course_has_notebooks():
    assert NOTEBOOKS, "no notebook found under notebooks/"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_notebook_runs_twice_in_one_kernel(notebook):
    result = execute_course.execute_cached(notebook)
    assert result.error is None, (
        f"{notebook.relative_to(ROOT)} failed when run top to bottom twice in one kernel "
        f"(the second pass is what a learner who re-runs cells gets):\n{result.error}")

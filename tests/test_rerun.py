"""Every course notebook runs top to bottom twice in one kernel without a cell error (learners re-run cells),
and its outputs keep the lesson's promises on this machine (tools/output_checks.py: the `<!-- expect … -->` lines
of its source, and no warning or error line on the learner's screen that the prose does not explain).

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
import output_checks  # noqa: E402

NOTEBOOKS = execute_course.course_notebooks()
_RUNS: dict[Path, execute_course.Executed] = {}  # a failed run is not cached: the two tests share it here


def executed(notebook: Path) -> execute_course.Executed:
    if notebook not in _RUNS:
        _RUNS[notebook] = execute_course.execute_cached(notebook)
    return _RUNS[notebook]


def test_the_course_has_notebooks():
    assert NOTEBOOKS, "no notebook found under notebooks/"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_notebook_runs_twice_in_one_kernel(notebook):
    result = executed(notebook)
    assert result.error is None, (
        f"{notebook.relative_to(ROOT)} failed when run top to bottom twice in one kernel "
        f"(the second pass is what a learner who re-runs cells gets):\n{result.error}")


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_notebook_outputs_keep_the_lessons_promises(notebook):
    result = executed(notebook)
    if result.error is not None:
        pytest.skip("the notebook does not run: test_notebook_runs_twice_in_one_kernel reports it")
    kind = output_checks.machine_kind()
    problems = output_checks.check_outputs(result.nb, kind)
    assert not problems, (
        f"{notebook.relative_to(ROOT)} ran, but on this machine ({kind}) a learner sees outputs the lesson does not "
        f"promise ({len(problems)}):\n" + "\n".join(f"  - {problem}" for problem in problems))

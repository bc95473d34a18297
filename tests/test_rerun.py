"""Every course notebook runs top to bottom twice in one kernel without a cell error (learners re-run cells),
and its outputs keep the lesson's promises on this machine (tools/output_checks.py: the `<!-- expect … -->` lines
of its source, and no warning or error line on the learner's screen that the prose does not explain).

Each notebook goes through tools/execute_course.py: it runs twice in one kernel and, when it passes, its
executed copy (outputs of the second pass) is cached under build/executed/ by content hash. The website build
reads the same copies, so within one test command each notebook is executed once for both. A notebook, a file
of lessons_lib, or the torch/Python version changing makes it run again. (nbval's single run of a notebook,
`course.sh check`, proves nothing more: this run's first pass is the same.)

Each notebook is a class of its own: pytest-xdist runs a class in one process (both tests share its run) and
different notebooks in parallel. They are taken last lesson first, so that a site build in the other process,
which executes from the first lesson on, meets this one in the middle instead of waiting on the same notebook.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import execute_course, output_checks, run_notebooks, version_matrix

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

NOTEBOOKS = run_notebooks.course_notebooks()[::-1]
_RUNS: dict[Path, execute_course.Executed] = {}  # a failed run is not cached: the two tests share it here


def test_the_course_has_notebooks():
    assert NOTEBOOKS, "no notebook found under notebooks/"


class _Notebook:
    notebook: Path

    def executed(self) -> execute_course.Executed:
        if self.notebook not in _RUNS:
            _RUNS[self.notebook] = execute_course.execute_cached(self.notebook)
        return _RUNS[self.notebook]

    def test_runs_twice_in_one_kernel(self):
        result = self.executed()
        assert result.error is None, (
            f"{self.notebook.relative_to(ROOT)} failed when run top to bottom twice in one kernel "
            f"(the second pass is what a learner who re-runs cells gets):\n{result.error}")

    def test_outputs_keep_the_lessons_promises(self):
        result = self.executed()
        if result.error is not None:
            pytest.skip("the notebook does not run: test_runs_twice_in_one_kernel reports it")
        kind = output_checks.machine_kind()
        problems = output_checks.check_outputs(result.nb, kind)
        assert not problems, (
            f"{self.notebook.relative_to(ROOT)} ran, but on this machine ({kind}) a learner sees outputs the lesson "
            f"does not promise ({len(problems)}):\n" + "\n".join(f"  - {problem}" for problem in problems))


for _path in NOTEBOOKS:
    _name = version_matrix.rerun_class(_path)  # the matrix reads a row's results back by this name
    globals()[_name] = type(_name, (_Notebook,), {"notebook": _path})

"""Every course notebook runs top to bottom twice in one kernel without a cell error (learners re-run cells),
its outputs keep the lesson's promises on this machine (tools/output_checks.py: the `<!-- expect … -->` lines
of its source, and no warning or error line on the learner's screen that the prose does not explain), and every
`%%gpu` cell that this machine's GPUs allow ran.

Each notebook goes through tools/run.py: when it passes, its executed copy (outputs of the second pass) is cached
under build/executed/ by content hash. The website build reads the same copies, so within one test command each
notebook is executed once for both. A notebook, a file of lessons_lib, or the torch/Python version changing makes
it run again.

Each notebook is a class of its own: pytest-xdist runs a class in one process (both tests share its run) and
different notebooks in parallel. They are taken last lesson first, so that a site build in the other process,
which executes from the first lesson on, meets this one in the middle instead of waiting on the same notebook.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import output_checks, run, version_matrix

pytestmark = pytest.mark.slow

NOTEBOOKS = run.course_notebooks()[::-1]
_RUNS: dict[Path, run.Report] = {}  # a failed run is not cached: the two tests share it here


def test_the_course_has_notebooks():
    assert NOTEBOOKS, "no notebook found under notebooks/"


class _Notebook:
    notebook: Path

    def report(self) -> run.Report:
        if self.notebook not in _RUNS:
            _RUNS[self.notebook] = run.report(run.execute_cached(self.notebook), run.machine_gpus(),
                                              output_checks.machine_kind())
        return _RUNS[self.notebook]

    def test_runs_twice_in_one_kernel(self):
        result = self.report()
        assert result.executed.error is None, (
            f"{result.notebook} failed when run top to bottom twice in one kernel "
            f"(the second pass is what a learner who re-runs cells gets):\n{result.executed.error}")

    def test_outputs_keep_the_lessons_promises(self):
        result = self.report()
        if result.executed.error is not None:
            pytest.skip("the notebook does not run: test_runs_twice_in_one_kernel reports it")
        assert not result.problems and not result.hollow, run.details([result])


for _path in NOTEBOOKS:
    _name = version_matrix.rerun_class(_path)  # the matrix reads a row's results back by this name
    globals()[_name] = type(_name, (_Notebook,), {"notebook": _path})

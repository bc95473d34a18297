"""`course.sh check` is tools/run.py with one notebook more at a time than the test command's processes (tools/run.py
running notebooks two at a time: tests/test_run.py)."""

from __future__ import annotations

from tools import precourse_check


def test_check_runs_one_notebook_more_than_the_test_command_runs_processes():
    assert precourse_check.check_jobs({"COURSE_TEST_WORKERS": "2"}) == 2
    assert precourse_check.check_jobs({"COURSE_TEST_WORKERS": "1"}) == 1
    assert precourse_check.check_jobs({}) in (1, 3)

"""lessons_lib.isolated: run a snippet in a fresh Python, with and without CUDA_LAUNCH_BLOCKING, bounded in time."""

from __future__ import annotations

import pytest

from lessons_lib.isolated import SNIPPET_NAME, SnippetResult, run_snippet

RAISES = """
    import os
    print("blocking =", os.environ.get("CUDA_LAUNCH_BLOCKING"))
    values = [1, 2, 3]
    print("still running")
    values[3]
"""


def test_a_snippet_that_raises_reports_its_output_and_the_failing_line():
    result = run_snippet(RAISES)
    assert not result.ok and result.returncode == 1 and not result.timed_out
    assert "blocking = None" in result.output and "still running" in result.output
    assert "IndexError: list index out of range" in result.output
    # the traceback names snippet.py (not the temporary folder) and the line that raised
    assert f'File "{SNIPPET_NAME}", line 5' in result.output and "lessons-snippet-" not in result.output
    assert result.error_line == 5 and result.line(5) == "values[3]"


def test_prints_and_the_traceback_keep_their_order():
    output = run_snippet(RAISES).output
    assert output.index("still running") < output.index("Traceback")


def test_launch_blocking_sets_the_variable_and_without_it_the_variable_is_removed(monkeypatch):
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")  # the notebook's own setting must not leak in
    assert "blocking = None" in run_snippet(RAISES).output
    blocked = run_snippet(RAISES, launch_blocking=True)
    assert "blocking = 1" in blocked.output and blocked.env == {"CUDA_LAUNCH_BLOCKING": "1"}
    assert str(blocked).startswith("$ CUDA_LAUNCH_BLOCKING=1 python snippet.py")


def test_extra_environment_and_a_clean_run():
    result = run_snippet("import os\nprint(os.environ['LESSONS_X'], 'ồ')", env={"LESSONS_X": "42"})
    assert result.ok and result.output.strip() == "42 ồ" and result.error_line is None
    assert "(mã thoát 0" in str(result) or "(exit code 0" in str(result)


def test_the_time_limit_stops_a_hanging_snippet():
    result = run_snippet("import time\nprint('start')\ntime.sleep(30)", timeout_s=2)
    assert result.timed_out and result.returncode is None and not result.ok
    assert "start" in result.output and result.seconds < 15
    assert "⏱️" in str(result)


def test_line_rejects_numbers_outside_the_snippet():
    result = SnippetResult(code="a = 1\nb = 2\n", returncode=0, output="", seconds=0.1)
    assert result.line(2) == "b = 2"
    with pytest.raises(ValueError, match="from 1 to 2"):
        result.line(3)
    with pytest.raises(TypeError, match="int"):
        result.line("1")


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"code": 42}, TypeError, "str"),
        ({"code": "  \n"}, ValueError, "empty|rỗng"),
        ({"code": "x = 1", "launch_blocking": "yes"}, TypeError, "launch_blocking"),
        ({"code": "x = 1", "env": ["A=1"]}, TypeError, "env"),
        ({"code": "x = 1", "env": {"A": 1}}, TypeError, "str values"),
        ({"code": "x = 1", "timeout_s": 0}, ValueError, "timeout_s"),
        ({"code": "x = 1", "timeout_s": "10"}, TypeError, "timeout_s"),
    ],
)
def test_bad_input(kwargs, error, match):
    code = kwargs.pop("code")
    with pytest.raises(error, match=match):
        run_snippet(code, **kwargs)

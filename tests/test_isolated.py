"""lessons_lib.isolated: run a snippet in a fresh Python, with and without CUDA_LAUNCH_BLOCKING, bounded in time."""

from __future__ import annotations

import pytest

from lessons_lib import isolated
from lessons_lib.isolated import run_snippet

RAISES = """
    import os
    print("blocking =", os.environ.get("CUDA_LAUNCH_BLOCKING"))
    values = [1, 2, 3]
    print("still running")
    values[3]
"""


def test_a_snippet_that_raises_reports_its_output_and_the_failing_line():
    result = run_snippet(RAISES)
    assert result.returncode == 1
    assert "blocking = None" in result.output and "still running" in result.output
    assert "IndexError: list index out of range" in result.output
    # the traceback names snippet.py (not the temporary folder) and the line that raised
    assert 'File "snippet.py", line 5' in result.output and "lessons-snippet-" not in result.output
    assert result.error_line == 5 and result.line(5) == "values[3]"
    assert result.output.index("still running") < result.output.index("Traceback")  # in the order printed


def test_launch_blocking_sets_the_variable_and_without_it_the_variable_is_removed(monkeypatch):
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")  # the notebook's own setting must not leak in
    assert "blocking = None" in run_snippet(RAISES).output
    blocked = run_snippet(RAISES, launch_blocking=True)
    assert "blocking = 1" in blocked.output and blocked.launch_blocking
    assert str(blocked).startswith("$ CUDA_LAUNCH_BLOCKING=1 python snippet.py")


def test_a_clean_run():
    result = run_snippet("print(42, 'ồ')")
    assert result.returncode == 0 and result.output.strip() == "42 ồ" and result.error_line is None
    assert str(result).endswith(f"(mã thoát 0, {result.seconds:.1f} s)")


def test_the_time_limit_stops_a_hanging_snippet(monkeypatch):
    monkeypatch.setattr(isolated, "_TIMEOUT_S", 2)
    result = run_snippet("import time\nprint('start')\ntime.sleep(30)")
    assert result.returncode is None
    assert "start" in result.output and result.seconds < 15
    assert str(result).endswith("(quá giới hạn thời gian)") and "⏱️ dừng sau" in str(result)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"code": 42}, TypeError, "str"),
        ({"code": "  \n"}, ValueError, "rỗng"),
        ({"code": "x = 1", "launch_blocking": "yes"}, TypeError, "launch_blocking"),
    ],
)
def test_bad_input(kwargs, error, match):
    code = kwargs.pop("code")
    with pytest.raises(error, match=match):
        run_snippet(code, **kwargs)

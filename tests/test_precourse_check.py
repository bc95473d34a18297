"""`course.sh check` is tools/run.py with one notebook more at a time than the test command's processes."""

from __future__ import annotations

import nbformat
import pytest

from tools import precourse_check


@pytest.mark.slow
def test_check_runs_notebooks_in_parallel_and_turns_red_on_a_broken_one(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COURSE_TEST_WORKERS", "2")
    paths = []
    for name, sources in (("good", ("x = 21 * 2", "print(x)")), ("broken", ("raise RuntimeError('ô hỏng cố ý')",))):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
        paths.append(str(tmp_path / f"{name}.ipynb"))
    assert precourse_check.main(["--save", str(tmp_path / "cache"), *paths]) == 1
    out = capsys.readouterr().out
    assert f"| {paths[0]} | ✅ |" in out and f"| {paths[1]} | ❌ |" in out and "ô hỏng cố ý" in out
    assert "❌ KHÔNG SẴN SÀNG: 1 / 2 notebook" in out


def test_check_runs_one_notebook_more_than_the_test_command_runs_processes():
    assert precourse_check.check_jobs({"COURSE_TEST_WORKERS": "2"}) == 2
    assert precourse_check.check_jobs({"COURSE_TEST_WORKERS": "1"}) == 1
    assert precourse_check.check_jobs({}) in (1, 3)

"""The pre-course check runs notebooks under nbval, tabulates them, and turns red when one fails."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tools import precourse_check

ROOT = Path(__file__).resolve().parent.parent


def _notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.mark.slow
def test_check_passes_then_turns_red_on_a_broken_notebook(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COURSE_TEST_WORKERS", "1")  # two tiny notebooks: no xdist start-up
    good = _notebook(tmp_path / "good.ipynb", "x = 21 * 2", "%%gpu\nprint('chỉ chạy khi có GPU')", "print(x)")
    broken = _notebook(tmp_path / "broken.ipynb", "y = 1", "raise RuntimeError('ô hỏng cố ý')")

    assert precourse_check.main([str(good)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "good.ipynb" in line)
    assert "| ✅ | 2 / 0 |" in row and "0 / 1 (cần 1 GPU, máy có 0)" in row and row.endswith("MiB |")
    assert "✅ SẴN SÀNG: 1 notebook" in out

    assert precourse_check.main([str(good), str(broken)]) == 1
    out = capsys.readouterr().out
    assert "| ❌ | 1 / 1 |" in next(line for line in out.splitlines() if "broken.ipynb" in line)
    assert "ô hỏng cố ý" in out and "❌ KHÔNG SẴN SÀNG: 1 notebook lỗi" in out


def test_check_runs_one_process_more_than_the_test_command():
    assert precourse_check.check_workers({"COURSE_TEST_WORKERS": "2"}) == ["-n", "2", "--dist", "loadgroup"]
    assert precourse_check.check_workers({"COURSE_TEST_WORKERS": "1"}) == []
    workers = precourse_check.check_workers({})
    assert workers == [] or (workers[0] == "-n" and int(workers[1]) >= 3)

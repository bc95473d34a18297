"""Tests of tools/execute_course.py: the content-keyed cache of executed notebooks."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tools import execute_course, run_notebooks

ROOT = Path(__file__).resolve().parent.parent


def write_notebook(path: Path, *sources: str) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_course_notebooks_lists_lessons_then_solutions(tmp_path):
    for name in ("02_b.ipynb", "01_a.ipynb", "solutions/01_a_solutions.ipynb", ".ipynb_checkpoints/01_a-checkpoint.ipynb"):
        write_notebook(tmp_path / name, "1")
    found = [p.relative_to(tmp_path).as_posix() for p in run_notebooks.course_notebooks(tmp_path)]
    assert found == ["01_a.ipynb", "02_b.ipynb", "solutions/01_a_solutions.ipynb"]


def test_environment_digest_follows_every_library_file(tmp_path):
    library = tmp_path / "lib"
    (library / "sub").mkdir(parents=True)
    (library / "a.py").write_text("x = 1\n")
    (library / "sub" / "b.py").write_text("y = 2\n")
    first = execute_course.environment_digest(library)
    assert execute_course.environment_digest(library) == first
    (library / "sub" / "b.py").write_text("y = 3\n")
    assert execute_course.environment_digest(library) != first
    (library / "__pycache__").mkdir()
    (library / "__pycache__" / "a.pyc").write_bytes(b"\0")  # bytecode does not count
    second = execute_course.environment_digest(library)
    (library / "__pycache__" / "a.pyc").write_bytes(b"\1")
    assert execute_course.environment_digest(library) == second


def test_a_run_beside_other_test_processes_is_not_reused_alone(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    alone = execute_course.environment_digest()
    assert execute_course.run_conditions() == "alone"
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "1")
    assert execute_course.environment_digest() == alone
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    assert execute_course.run_conditions() == "with 2 test processes"
    assert execute_course.environment_digest() != alone


def test_cache_key_changes_with_the_environment(tmp_path):
    path = write_notebook(tmp_path / "n.ipynb", "1")  # the notebook's own change: test_a_changed_notebook_runs_again
    assert execute_course.cache_key(path, "env") != execute_course.cache_key(path, "other env")


@pytest.mark.slow
def test_runs_twice_keeps_the_last_pass_then_answers_from_the_cache(tmp_path):
    source = write_notebook(tmp_path / "nb" / "n.ipynb", "import sys\ncounter = globals().get('counter', 0) + 1\n"
                            "print('run', counter)\nif counter == 1:\n    print('first pass only', file=sys.stderr)")
    cache = tmp_path / "cache"
    first = execute_course.execute_cached(source, cache_dir=cache)
    assert first.error is None and not first.cached
    (cell,) = first.nb.cells  # the probe cell is gone
    assert cell.outputs[0]["text"] == "run 2\n"  # the second pass, in the same kernel
    first_pass = cell.metadata["first_pass_streams"]  # what only the first pass showed, for the output checks
    assert [(o["name"], o["text"]) for o in first_pass] == [("stdout", "run 1\n"), ("stderr", "first pass only\n")]
    run = first.run
    assert run["key"] == execute_course.cache_key(source) and run["repeat"] == 2 and run["cores"] >= 1
    assert run["cpu"] and run["torch"] and run["python"] and len(run["date"]) == 10 and run["gpus"] == []
    saved = execute_course.saved_path(source, cache)
    assert nbformat.read(saved, as_version=4).metadata["lessons_run"]["key"] == run["key"]
    again = execute_course.execute_cached(source, cache_dir=cache)
    assert again.cached and again.nb.cells[0].outputs == cell.outputs


def test_a_changed_notebook_runs_again(tmp_path, monkeypatch):
    source = write_notebook(tmp_path / "n.ipynb", "print(1)")
    cache = tmp_path / "cache"
    monkeypatch.setattr(execute_course, "execute_notebook", lambda *a, **k: _fake_run(source))
    assert not execute_course.execute_cached(source, cache_dir=cache).cached
    assert execute_course.execute_cached(source, cache_dir=cache).cached
    write_notebook(source, "print(2)")
    changed = execute_course.execute_cached(source, cache_dir=cache)
    assert not changed.cached and changed.nb.cells[0].source == "print(2)"
    assert execute_course.execute_cached(source, cache_dir=cache, force=True).cached is False


def test_a_failed_run_is_reported_and_not_cached(tmp_path, monkeypatch):
    from tools.run_notebooks import Execution

    source = write_notebook(tmp_path / "bad.ipynb", "raise ValueError('boom')")
    failed = Execution(nb=nbformat.read(source, as_version=4), wall_s=0.1, error="ValueError: boom", probe_text="")
    monkeypatch.setattr(execute_course, "execute_notebook", lambda *a, **k: failed)
    result = execute_course.execute_cached(source, cache_dir=tmp_path / "cache")
    assert result.nb is None and result.run == {} and "boom" in result.error
    assert not execute_course.saved_path(source, tmp_path / "cache").exists()


def test_a_corrupt_cached_copy_is_run_again(tmp_path, monkeypatch):
    source = write_notebook(tmp_path / "n.ipynb", "print(1)")
    cache = tmp_path / "cache"
    target = execute_course.saved_path(source, cache)
    target.parent.mkdir(parents=True)
    target.write_text("{ not json")
    ran = []
    monkeypatch.setattr(execute_course, "execute_notebook", lambda *a, **k: ran.append(1) or _fake_run(source))
    result = execute_course.execute_cached(source, cache_dir=cache)
    assert ran == [1] and result.error is None and not result.cached
    assert nbformat.read(target, as_version=4).metadata["lessons_run"]["cpu"] == "fake cpu"


def test_two_callers_at_once_run_the_notebook_once(tmp_path, monkeypatch):
    import threading
    import time

    source = write_notebook(tmp_path / "n.ipynb", "print(1)")
    ran = []

    def slow_run(*args, **kwargs):
        ran.append(1)
        time.sleep(0.5)  # the other caller arrives while this run is still going
        return _fake_run(source)

    monkeypatch.setattr(execute_course, "execute_notebook", slow_run)
    results = []
    callers = [threading.Thread(target=lambda: results.append(
        execute_course.execute_cached(source, cache_dir=tmp_path / "cache"))) for _ in range(2)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert ran == [1], "the second caller must wait for the first run and read its copy"
    assert sorted(r.cached for r in results) == [False, True]


def _fake_run(source: Path):
    from tools.run_notebooks import Execution

    nb = nbformat.read(source, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("probe"))
    return Execution(nb=nb, wall_s=0.1, error=None,
                     probe_text='LESSONS_RUN {"cpu": "fake cpu", "cores": 1, "gpus": [], "torch": "t", '
                                '"python": "3", "platform": "p", "date": "2026-01-01"}\n')

"""The repository's conftest.py: a notebook's cells, a test class and each shared group stay in one xdist process."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
root_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(root_conftest)


@pytest.mark.parametrize("nodeid, scope", [
    ("tests/test_bench.py::test_x[a]", "tests/test_bench.py"),
    ("tests/test_rerun.py::Test_01_device_basics::test_runs_twice_in_one_kernel", "notebook-kernels"),
    ("tests/test_core_path.py::test_core_cells_run_alone_and_every_core_task_is_solved_there[01_device_basics]", "notebook-kernels"),
    ("tests/test_setup_cell.py::test_offline", "colab-env"),
    ("tests/test_colab_env.py::test_notebook_runs_top_to_bottom_in_colab_env[01.ipynb]", "colab-env"),
])
def test_a_test_goes_with_its_notebook_class_file_or_shared_group(nodeid, scope):
    assert root_conftest.xdist_scope_of(nodeid) == scope


def test_every_shared_group_names_a_test_file_that_exists():
    for path in root_conftest.SHARED_GROUPS:
        assert (ROOT / path).is_file(), f"conftest.SHARED_GROUPS names {path}, which does not exist"


def test_without_pytest_xdist_the_session_still_starts(pytester):
    pytester.makeconftest((ROOT / "conftest.py").read_text(encoding="utf-8"))
    pytester.makepyfile("def test_one():\n    pass\n")
    pytester.runpytest_inprocess("-p", "no:xdist", "-p", "no:cacheprovider").assert_outcomes(passed=1)


@pytest.mark.slow
def test_two_processes_keep_each_notebooks_cells_in_one_kernel(tmp_path):
    """A notebook whose later cells need its first cell: split across processes, they would fail with NameError."""
    pytest.importorskip("xdist", reason="pytest-xdist is not installed here (requirements.txt installs it)")
    import nbformat

    for name in ("a", "b"):
        cells = [nbformat.v4.new_code_cell("value = 41")] + [nbformat.v4.new_code_cell(f"assert value == 41\nv{i} = {i}")
                                                             for i in range(3)]
        nb = nbformat.v4.new_notebook(cells=cells)
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, tmp_path / f"{name}.ipynb")
    (tmp_path / "conftest.py").write_text((ROOT / "conftest.py").read_text(encoding="utf-8"), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                           "--nbval-current-env", "-n", "2", "--dist", "loadgroup", "a.ipynb", "b.ipynb"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "8 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]

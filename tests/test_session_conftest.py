"""The repository's conftest.py: a test class and each shared group stay in one xdist process, whose threads get their
share of the CPUs."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
root_conftest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(root_conftest)


@pytest.mark.parametrize("nodeid, scope", [
    ("tests/test_bench.py::test_x[a]", "tests/test_bench.py"),
    ("tests/test_rerun.py::Test_01_device_basics::test_runs_twice_in_one_kernel", "tests/test_rerun.py::Test_01_device_basics"),
    ("tests/test_setup_cell.py::test_offline", "colab-env"),
    ("tests/test_colab_env.py::test_notebook_runs_top_to_bottom_in_colab_env[01.ipynb]", "colab-env"),
])
def test_a_test_goes_with_its_class_file_or_shared_group(nodeid, scope):
    assert root_conftest.xdist_scope_of(nodeid) == scope


def test_every_shared_group_names_a_test_file_that_exists():
    for path in root_conftest.SHARED_GROUPS:
        assert (ROOT / path).is_file(), f"conftest.SHARED_GROUPS names {path}, which does not exist"


def test_without_pytest_xdist_the_session_still_starts(pytester):
    pytester.makeconftest((ROOT / "conftest.py").read_text(encoding="utf-8"))
    pytester.makepyfile("def test_one():\n    pass\n")
    pytester.runpytest_inprocess("-p", "no:xdist", "-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_each_xdist_process_gets_its_share_of_the_cpus_for_its_threads(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    root_conftest.share_the_cpus({"workerid": "gw1", "workercount": 2})
    assert os.environ["OMP_NUM_THREADS"] == "2"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the caller's choice stays
    root_conftest.share_the_cpus({"workerid": "gw1", "workercount": 2})
    assert os.environ["OMP_NUM_THREADS"] == "3"
    monkeypatch.delenv("OMP_NUM_THREADS")
    root_conftest.share_the_cpus(None)  # not an xdist process
    root_conftest.share_the_cpus({"workerid": "gw0", "workercount": 1})
    assert "OMP_NUM_THREADS" not in os.environ


def test_every_test_process_shares_the_first_ones_kernel_start_lock_folder():
    from tools.run import KERNEL_LOCK_DIR_ENV

    shared = Path(os.environ[KERNEL_LOCK_DIR_ENV])
    assert shared.is_dir() and Path(os.environ["TMPDIR"]).is_relative_to(shared)  # an xdist process's folder is inside


def test_the_notebook_runs_are_handed_out_first_in_their_own_order():
    class Item:
        def __init__(self, nodeid):
            self.nodeid = nodeid

    names = ["tests/test_atlas.py::t", "tests/test_rerun.py::Test_11::a", "tests/e2e/test_browser.py::t",
             "tests/test_rerun.py::Test_10::a", "tests/e2e/test_site.py::t"]
    items = [Item(name) for name in names]
    root_conftest.pytest_collection_modifyitems(None, items)
    assert [item.nodeid for item in items] == [names[4], names[1], names[3], names[0], names[2]]

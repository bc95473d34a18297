"""Test-session settings for the whole repository: one temp folder for child processes, a share of the CPUs for
the threads of each pytest-xdist process, and the xdist groups.

Everything the session starts (notebook kernels, torchrun, helpers) gets one temp folder, removed at the end: a
kernel stopped at once (``shutdown_kernel(now=True)``, a time limit) never finalizes its
``tempfile.TemporaryDirectory`` objects, so without this every test run could leave the notebooks' checkpoint and
trace folders in /tmp.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from tools import KERNEL_LOCK_DIR_ENV

_TEMP_VARIABLES = ("TMPDIR", "TEMP", "TMP")
_STATE = "_bai14_session_temp"


def pytest_configure(config):
    """Point the temp-folder variables of every child process at a new folder of this session, and every process's
    kernel-start lock at the first one's; give an xdist process's threads its share of the CPUs."""
    share_the_cpus(getattr(config, "workerinput", None))
    folder = tempfile.mkdtemp(prefix="bai14-test-session-")
    setattr(config, _STATE, (folder, {name: os.environ.get(name) for name in (*_TEMP_VARIABLES, KERNEL_LOCK_DIR_ENV)}))
    for name in _TEMP_VARIABLES:
        os.environ[name] = folder
    os.environ.setdefault(KERNEL_LOCK_DIR_ENV, folder)  # the first process's: every xdist process inherits it


def share_the_cpus(workerinput: dict | None) -> None:
    """Give this pytest-xdist process's torch threads, and those of what it starts, its share of the CPUs
    (tools/run.py's share_cpus says why)."""
    if workerinput:
        from tools.run import share_cpus

        share_cpus(int(workerinput["workercount"]))


def pytest_unconfigure(config):
    """Restore the variables and remove the session's folder with whatever the child processes left in it."""
    folder, before = getattr(config, _STATE)
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    shutil.rmtree(folder, ignore_errors=True)


# Test files whose notebook runs everything else waits on: the site test walks the course (then drives a browser
# through every page, the longest chain of the suite), test_rerun runs one notebook a class, from the last lesson.
STARTED_FIRST = ("tests/e2e/test_site.py", "tests/test_rerun.py")


def pytest_collection_modifyitems(config, items):
    """Move STARTED_FIRST's tests to the front (pytest-xdist hands out test files and classes in this order), so
    the notebook runs split over every process from the start instead of the site's walk doing most alone."""
    def rank(item) -> int:
        return next((i for i, path in enumerate(STARTED_FIRST) if item.nodeid.startswith(path)), len(STARTED_FIRST))

    items.sort(key=rank)


# Test files that change something another file's tests use; pytest-xdist runs each group in one process.
# (Notebook kernels need no group: tools/run.py's client starts them one at a time across processes.)
SHARED_GROUPS = {
    # the Colab-pinned environment: the setup-cell test uninstalls lessons_lib there while it runs
    "tests/test_colab_env.py": "colab-env",
    "tests/test_setup_cell.py": "colab-env",
}


def xdist_scope_of(nodeid: str) -> str:
    """Return the pytest-xdist scope of a test: its shared group, else its class, file or notebook (loadscope's)."""
    path = nodeid.split("::", 1)[0]
    return SHARED_GROUPS.get(path) or (nodeid.rsplit("::", 1)[0] if "::" in nodeid else nodeid)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: without it installed, pytest must not reject it
def pytest_xdist_make_scheduler(config, log):
    """Give ``--dist loadgroup`` (what `course.sh test` asks for) xdist's loadscope plus the shared groups.

    loadscope keeps a test class (a notebook's two runs) in one process, but cannot join two
    files; loadgroup's ``xdist_group`` marks could, but pytest-xdist 3.8 on pytest 9.2 drops them (it appends the
    group to ``item._nodeid``, which pytest 9 no longer reads), so every test would go to any process.
    """
    if config.getvalue("dist") != "loadgroup":
        return None  # the caller chose another mode: pytest-xdist's own scheduler
    from xdist.scheduler import LoadScopeScheduling

    class CourseScopes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope_of(nodeid)

    return CourseScopes(config, log)

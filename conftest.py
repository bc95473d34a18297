"""Give everything the test session starts (notebook kernels, torchrun, helpers) one temp folder, removed at the end.

nbval stops each notebook's kernel with ``shutdown_kernel(now=True)``, which kills it: the kernel's
``tempfile.TemporaryDirectory`` objects are never finalized, so without this every test run would leave the
notebooks' checkpoint and trace folders in /tmp. (A kernel that Jupyter shuts down normally removes them itself.)
"""

from __future__ import annotations

import os
import shutil
import tempfile

_TEMP_VARIABLES = ("TMPDIR", "TEMP", "TMP")
_STATE = "_bai14_session_temp"


def pytest_configure(config):
    """Point the temp-folder variables of every child process at a new folder of this session."""
    folder = tempfile.mkdtemp(prefix="bai14-test-session-")
    setattr(config, _STATE, (folder, {name: os.environ.get(name) for name in _TEMP_VARIABLES}))
    for name in _TEMP_VARIABLES:
        os.environ[name] = folder


def pytest_unconfigure(config):
    """Restore the variables and remove the session's folder with whatever the child processes left in it."""
    folder, before = getattr(config, _STATE)
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    shutil.rmtree(folder, ignore_errors=True)

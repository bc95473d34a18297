"""Shared fixtures for the unit tests."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")  # before any test module imports pyplot (at collection): figures need no display


@pytest.fixture(autouse=True)
def _headless_matplotlib():
    """Draw figures without a display and close them after each test."""
    matplotlib.use("Agg")
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture
def course_env_vars():
    """Environment variables that make tools/course.py reuse the environment these tests run in.

    Skips unless tools/course.py set this environment up from this checkout's requirements.txt and
    pyproject.toml (the README's test command does), so a test of course.sh never installs anything.
    """
    import sys
    from pathlib import Path

    from tools import course

    stamp = Path(sys.prefix) / course.STAMP
    recorded = stamp.read_text(encoding="utf-8").strip() if stamp.exists() else None
    for mode in ("0", "1"):
        if recorded == course.wanted_stamp(mode == "1"):
            return {"COURSE_VENV": sys.prefix, "COURSE_SYSTEM_TORCH": mode}
    pytest.skip(f"this environment ({sys.prefix}) was not set up by tools/course.py from this checkout's "
                "requirements.txt and pyproject.toml: run the tests through `bash tools/course.sh test`")

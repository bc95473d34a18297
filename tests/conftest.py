"""Shared fixtures for the unit tests."""

from __future__ import annotations

import pytest

from lessons_lib import i18n


@pytest.fixture(autouse=True)
def _vietnamese_messages():
    """Run every test with Vietnamese messages and restore the language afterwards."""
    before = i18n.get_language()
    i18n.set_language("vi")
    yield
    i18n.set_language(before)


@pytest.fixture(autouse=True)
def _headless_matplotlib():
    """Draw figures without a display and close them after each test."""
    import matplotlib

    matplotlib.use("Agg")
    yield
    import matplotlib.pyplot as plt

    plt.close("all")

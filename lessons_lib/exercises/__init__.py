"""Checked tasks, one module per lesson (``lessonNN.taskN.check(...)``, ``.hint()``, ``.solution()``), and
``progress(group)``."""

from __future__ import annotations

from ._core import progress

__all__ = ["progress"]

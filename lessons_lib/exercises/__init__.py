"""Checked exercises of notebook 10: ``exN.check(...)``, ``exN.hint()``, ``exN.solution()``, ``progress()``."""

from __future__ import annotations

from ._core import progress
from .amp import ex5, ex6
from .debugging import ex1, ex2
from .loaders import ex3, ex4

__all__ = ["ex1", "ex2", "ex3", "ex4", "ex5", "ex6", "progress"]

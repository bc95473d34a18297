"""Checked exercises of notebook 10: ``exN.check(...)``, ``exN.hint()``, ``exN.solution()``, ``progress()``."""

from __future__ import annotations

from ._core import progress
from .amp import ex5, ex5_gpu
from .debugging import ex6, ex7, ex8
from .environment import ex1, ex1_gpu
from .oom import ex4, ex4_gpu
from .speed import ex2a, ex2b, ex2c
from .tensors import ex3

__all__ = ["ex1", "ex1_gpu", "ex2a", "ex2b", "ex2c", "ex3", "ex4", "ex4_gpu", "ex5", "ex5_gpu", "ex6", "ex7", "ex8",
           "progress"]

"""Helpers for the course "Bài 14: GPU và CUDA trong PyTorch".

Importing the package does nothing but define names; the notebook extension is
loaded explicitly with ``%load_ext lessons_lib.notebook``.
"""

__version__ = "0.2.0"  # the one version: pyproject.toml reads it, the setup cell installs tag v<version>

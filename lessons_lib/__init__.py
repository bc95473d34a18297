"""Helpers for the course "Bài 14: GPU và CUDA trong PyTorch" (importing it only defines names)."""

__version__ = "0.2.0"  # the one version: pyproject.toml reads it, the setup cell installs tag v<version>

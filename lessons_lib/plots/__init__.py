"""Plots of the course: speed curves, memory breakdowns, number formats.

Every function takes ``ax=None`` (a new figure when None), labels its units and returns the axes.
"""

from .diagrams import cuda_stack  # noqa: E402,F401

"""Shared plumbing for the plot functions."""

from __future__ import annotations


def get_ax(ax=None, figsize: tuple[float, float] = (7.0, 4.0)):
    """Return `ax`, or the axes of a new figure when `ax` is None."""
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes

    if ax is None:
        return plt.subplots(figsize=figsize)[1]
    if not isinstance(ax, Axes):
        raise TypeError(f"ax phải là một matplotlib Axes hoặc None, không phải {type(ax).__name__}")
    return ax

"""Shared plumbing for the plot functions: the axes, the colour-blind-safe palette, the text alternative."""

from __future__ import annotations

# Okabe & Ito (2008), "Color Universal Design": told apart with every common colour-vision deficiency.
# Series take them in this order (yellow last: faint on white); markers and line styles differ as well.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
GREY = "#999999"  # "the rest" / "other": never a compared series
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINE_STYLES = ("-", "--", ":", "-.")
ALT_FACTS = "_lessons_alt_facts"  # an Axes attribute: the measured numbers the text alternative states


def series_style(i: int) -> dict:
    """Return the colour, marker and line style of the i-th compared series (all three differ)."""
    return {"color": PALETTE[i % len(PALETTE)], "marker": MARKERS[i % len(MARKERS)],
            "linestyle": LINE_STYLES[i % len(LINE_STYLES)]}


def add_facts(ax, text: str) -> None:
    """Record `text` (the numbers a plot shows, in words) for the figure's text alternative."""
    setattr(ax, ALT_FACTS, " ".join(filter(None, [getattr(ax, ALT_FACTS, ""), text])))


def describe_figure(fig) -> str:
    """Return a text alternative of `fig`: each axes' title, axis labels, legend and recorded numbers."""
    parts = [fig._suptitle.get_text()] if getattr(fig, "_suptitle", None) is not None else []
    for ax in fig.axes:
        title = " ".join(t for t in (ax.get_title("left"), ax.get_title(), ax.get_title("right")) if t)
        legend = ax.get_legend()
        names = [t.get_text() for t in legend.get_texts()] if legend is not None else []
        axes = "; ".join(f"{name}: {label}" for name, label in (("trục ngang", ax.get_xlabel()),
                                                                 ("trục dọc", ax.get_ylabel())) if label)
        bits = [title.replace("\n", " "), axes[:1].upper() + axes[1:],
                ("Chú thích: " + ", ".join(names)) if names else "", getattr(ax, ALT_FACTS, "")]
        parts.append(". ".join(b.strip().rstrip(".") for b in bits if b and b.strip()))
    text = ". ".join(p for p in parts if p)
    return f"Biểu đồ: {text}." if text else ""


def get_ax(ax=None, figsize: tuple[float, float] = (7.0, 4.0)):
    """Return `ax`, or the axes of a new figure when `ax` is None."""
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes

    if ax is None:
        return plt.subplots(figsize=figsize)[1]
    if not isinstance(ax, Axes):
        raise TypeError(f"ax phải là một matplotlib Axes hoặc None, không phải {type(ax).__name__}")
    return ax

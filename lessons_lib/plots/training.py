"""Training plots: loss curves of several runs, and bar charts comparing step time or memory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._validate import check_number
from ..bench.timing import format_count
from ._axes import PALETTE, add_facts, get_ax, series_style


def _check_mapping(name: str, value) -> None:
    if not isinstance(value, Mapping) or not value:
        raise TypeError(f"{name} phải là dict không rỗng {{nhãn: ...}}, không phải {type(value).__name__}.")


def plot_loss_curves(curves: Mapping[str, Sequence[float]], ax=None, title: str | None = None):
    """Plot one loss curve per run (label → losses per step) on a log scale against the step; return the axes."""
    _check_mapping("curves", curves)
    ax = get_ax(ax)
    for i, (label, losses) in enumerate(curves.items()):
        if isinstance(losses, (str, bytes)) or not isinstance(losses, Sequence) or len(losses) == 0:
            raise TypeError(f"curves[{label!r}] phải là list loss không rỗng (một số mỗi bước).")
        values = [float(v) for v in losses]
        if any(not (v > 0) for v in values):
            raise ValueError(f"curves[{label!r}] có loss ≤ 0 hoặc NaN: không vẽ được trên thang log.")
        ax.plot(range(1, len(values) + 1), values, label=str(label), linewidth=1.6 if i == 0 else 1.2,
                **{**series_style(i), "marker": None})
        add_facts(ax, f"{label}: {values[0]:.3g} ở bước 1, {values[-1]:.3g} ở bước {len(values)}.")
    ax.set_yscale("log")
    ax.set_xlabel("bước huấn luyện")
    ax.set_ylabel("loss (thang log)")
    ax.legend()
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def _course_number(value: float) -> str:
    """Return 3 significant digits below 1000 ("12.5"), else the whole number grouped by spaces ("1 857")."""
    return f"{value:.3g}" if value < 1000 else format_count(value)


def plot_bar_comparison(values: Mapping[str, float], unit: str, ax=None, title: str | None = None,
                        fmt: str | None = None):
    """Draw one labelled bar per configuration (e.g. step time in ms or peak memory in MiB); return the axes."""
    _check_mapping("values", values)
    if not isinstance(unit, str):
        raise TypeError("unit phải là chuỗi đơn vị như 'ms' hoặc 'MiB'.")
    numbers = [float(check_number(f"values[{label!r}]", value, 0)) for label, value in values.items()]
    if fmt is not None and not isinstance(fmt, str):
        raise TypeError("fmt phải là chuỗi định dạng như '{:.0f}', hoặc None.")
    show = fmt.format if fmt is not None else _course_number
    ax = get_ax(ax, figsize=(5.0, 3.5))
    labels = [str(k) for k in values]
    bars = ax.bar(labels, numbers, color=[PALETTE[i % len(PALETTE)] for i in range(len(labels))])
    add_facts(ax, "; ".join(f"{label}: {show(n)} {unit}" for label, n in zip(labels, numbers, strict=True)))
    for bar, number in zip(bars, numbers, strict=True):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), show(number) + f" {unit}",
                ha="center", va="bottom", fontsize=9)
    ax.set_ylabel(unit)
    ax.set_ylim(0, max(numbers) * 1.18 or 1)
    if title:
        ax.set_title(title, fontsize=10)
    return ax

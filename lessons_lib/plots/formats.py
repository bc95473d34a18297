"""The number-format picture: range and precision of FP32, FP16 and BF16 on a log axis."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..precision import format_facts
from ._axes import PALETTE, get_ax

_COLORS = {"fp32": PALETTE[0], "fp16": PALETTE[1], "bf16": PALETTE[2]}
_MARK = PALETTE[3]


def _check_marks(marks) -> dict[str, float]:
    if marks is None:
        return {}
    if not isinstance(marks, Mapping):
        raise TypeError("marks phải là dict {nhãn: giá trị}, vd {'70000': 7e4}.")
    out = {}
    for label, value in marks.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value > 0 and math.isfinite(value)):
            raise ValueError(f"marks[{label!r}] phải là số dương hữu hạn (trục log), nhận {value!r}.")
        out[str(label)] = float(value)
    return out


def plot_number_formats(marks: Mapping[str, float] | None = None, ax=None):
    """Draw the magnitudes FP32, FP16 and BF16 represent on a log axis, with eps (precision); return the axes.

    The thin part of a bar is the subnormal range (precision fading), the thick part the normal range up
    to the largest finite value. All limits come from ``torch.finfo``. `marks` draws labelled vertical
    lines at chosen values, e.g. ``{"70000": 7e4, "1e-8": 1e-8}``.
    """
    facts = [format_facts(d) for d in _COLORS]
    marks = _check_marks(marks)
    ax = get_ax(ax, figsize=(8.0, 1.0 + 0.9 * len(facts)))
    for i, f in enumerate(facts):
        y = len(facts) - 1 - i
        color = _COLORS[f.name]
        ax.hlines(y, f.smallest_subnormal, f.smallest_normal, color=color, linewidth=3, alpha=0.5)
        ax.hlines(y, f.smallest_normal, f.max, color=color, linewidth=12)
        ax.text(f.max * 30, y, f"max {f.max:.3g}", va="center", ha="left", fontsize=8)
        ax.text(f.smallest_subnormal, y - 0.2, f"{f.smallest_subnormal:.2g}", va="top", ha="right", fontsize=8)
        ax.text(f.smallest_normal, y - 0.2, f"{f.smallest_normal:.2g}", va="top", ha="left", fontsize=8,
                color="#555555")
    for label, value in marks.items():
        ax.axvline(value, color=_MARK, linestyle="--", linewidth=1)
        ax.text(value, len(facts) - 0.45, label, color=_MARK, ha="center", va="bottom", fontsize=8)
        for i, f in enumerate(facts):   # on an axis of ~96 decades, 7e4 and fp16's 6.55e4 look like one line
            outside = "tràn → inf" if value > f.max else "→ 0" if value < f.smallest_subnormal / 2 else None
            if outside is not None:
                y = len(facts) - 1 - i
                ax.plot([value], [y], marker="x", color=_MARK, markersize=8, markeredgewidth=2)
                above = value > f.max
                ax.annotate(f"{label}: ngoài dải {f.name} ({outside})", (value, y), xytext=(6 if above else -6, 9),
                            textcoords="offset points", ha="left" if above else "right", va="bottom", fontsize=7,
                            color=_MARK)
    ax.set_xscale("log")
    ax.set_xlim(1e-48, 1e48)
    ax.set_ylim(-0.65, len(facts) - 0.1)
    ax.set_yticks(range(len(facts)))
    ax.set_yticklabels([f"{f.name}: {f.exponent_bits} bit mũ, {f.mantissa_bits} bit định trị\neps = {f.eps:.2g} "
                        f"(≈ {f.decimal_digits:.1f} chữ số)" for f in reversed(facts)], fontsize=9)
    ax.set_xlabel("độ lớn |x| (thang log) · vạch mảnh: vùng subnormal · vạch dày: vùng chuẩn", fontsize=9)
    ax.set_title("Dải số biểu diễn được (torch.finfo)", fontsize=10)
    ax.grid(axis="y", visible=False)
    return ax

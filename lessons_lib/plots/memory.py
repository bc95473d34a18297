"""Plot where training memory goes: parameters, gradients, optimizer state and activations, stacked."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..memory.sizes import UNIT_BYTES
from ._axes import GREY, PALETTE, add_facts, get_ax

_LABELS = {"params": "tham số", "grads": "gradient", "optimizer": "trạng thái optimizer",
           "activations": "activation (lưu cho backward)"}
_COLORS = dict(zip(("params", "grads", "optimizer", "activations"), PALETTE, strict=False))
_EXTRA_COLORS = (*PALETTE[4:], GREY)  # other parts, in order


def _unit(unit: str | None, largest: float) -> tuple[str, int]:
    """Return the name and size of `unit`, or of the largest unit not above `largest` when `unit` is None."""
    if unit is None:
        unit = [name for name, size in UNIT_BYTES.items() if size <= largest or size == 1][-1]
    if unit not in UNIT_BYTES:
        raise ValueError(f"unit phải là một trong {list(UNIT_BYTES)}, nhận {unit!r}")
    return unit, UNIT_BYTES[unit]


def _check_bytes(where: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise TypeError(f"{where} phải là số byte (int/float ≥ 0), không phải {value!r}")
    return float(value)


def plot_memory_breakdown(rows: Mapping[str, Mapping[str, int | float]], *,
                          measured: Mapping[str, int | float] | None = None, ax=None, unit: str | None = None,
                          title: str | None = None):
    """Draw one stacked bar per configuration: parameters, gradients, optimizer state, activations; return the axes."""
    parts, measured = _checked_parts(rows, measured)
    largest = max([*(sum(row.values()) for row in rows.values()), *measured.values(), 1])
    unit_name, unit_size = _unit(unit, largest)
    ax = get_ax(ax)
    labels, width, offset = list(rows), *((0.38, 0.19) if measured else (0.6, 0.0))
    totals = _stack(ax, [[rows[label].get(part, 0) / unit_size for label in labels] for part in parts], parts,
                    width, -offset)
    if measured:
        ax.bar([i + offset for i in range(len(labels))], [measured.get(label, 0) / unit_size for label in labels],
               width, label="đo được (peak trên GPU)", color="white", edgecolor="black", hatch="//")
    for label, total in zip(labels, totals, strict=True):
        got = f", đo được {measured[label] / unit_size:.3g} {unit_name}" if label in measured else ""
        add_facts(ax, f"{label}: tổng {total:.3g} {unit_name}{got}.")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels)
    ax.set_ylabel(f"bộ nhớ ({unit_name})")
    if title:
        ax.set_title(title)
    ax.set_ylim(0, largest / unit_size * 1.45)  # headroom for the legend above the bars
    ax.legend(fontsize="small", loc="upper center", ncol=2)
    return ax


def _checked_parts(rows, measured) -> tuple[list[str], dict]:
    """Check `rows` and `measured`; return every part in stacking order (the known four first) and `measured`."""
    if not isinstance(rows, Mapping) or not rows:
        raise TypeError("rows phải là dict khác rỗng {nhãn: {thành phần: byte}}")
    parts: list[str] = list(_COLORS)
    for label, row in rows.items():
        if not isinstance(label, str) or not isinstance(row, Mapping):
            raise TypeError(f"mỗi dòng phải là nhãn str → dict thành phần, lỗi ở {label!r}")
        for key, value in row.items():
            _check_bytes(f"rows[{label!r}][{key!r}]", value)
            parts += [key] if key not in parts else []
    measured = dict(measured or {})
    for label, value in measured.items():
        if label not in rows:
            raise ValueError(f"measured có nhãn {label!r} không có trong rows ({list(rows)})")
        _check_bytes(f"measured[{label!r}]", value)
    return parts, measured


def _stack(ax, heights_per_part: list[list[float]], parts: list[str], width: float, shift: float) -> list[float]:
    """Draw each part's bars on top of the previous ones (skipping parts that are all zero); return the totals."""
    extras = [part for part in parts if part not in _COLORS]
    bottoms = [0.0] * len(heights_per_part[0])
    for part, heights in zip(parts, heights_per_part, strict=True):
        if any(heights):
            color = _COLORS.get(part) or _EXTRA_COLORS[extras.index(part) % len(_EXTRA_COLORS)]
            ax.bar([i + shift for i in range(len(heights))], heights, width, bottom=bottoms,
                   label=_LABELS.get(part, part), color=color)
            bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    return bottoms


def plot_activation_timeline(timeline, *, marks: Mapping[str, int] | None = None, ax=None,
                             title: str | None = None):
    """Draw the bytes autograd holds for backward after each change, as a staircase; return the axes."""
    values = getattr(timeline, "timeline", timeline)
    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__len__") or len(values) == 0:
        raise TypeError("timeline phải là một SavedTensorMeter hoặc danh sách số byte khác rỗng")
    points = [_check_bytes(f"timeline[{i}]", v) for i, v in enumerate(values)]
    marks = dict(marks or {})
    for label, index in marks.items():
        if not isinstance(label, str) or isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"marks phải là {{nhãn str: chỉ số int}}, lỗi ở {label!r}")
        if not 0 <= index <= len(points):
            raise ValueError(f"marks[{label!r}] = {index} nằm ngoài timeline (0…{len(points)})")
    largest = max(max(points), 1.0)
    unit_name, unit_size = _unit(None, largest)
    ax = get_ax(ax)
    ax.step(range(len(points)), [p / unit_size for p in points], where="post", color=_COLORS["activations"],
            label="activation autograd đang giữ")
    for label, index in marks.items():
        ax.axvline(index, color="gray", linestyle="--", linewidth=1)
        ax.annotate(label, (index, 1.0), xycoords=("data", "axes fraction"), xytext=(4, -12),
                    textcoords="offset points", fontsize="small", color="dimgray")
    add_facts(ax, f"Đỉnh {largest / unit_size:.3g} {unit_name} sau {len(points)} sự kiện.")
    ax.set_xlabel("sự kiện (lưu hoặc thả một tensor)")
    ax.set_ylabel(f"bộ nhớ ({unit_name})")
    ax.set_ylim(0, largest / unit_size * 1.15)
    if title:
        ax.set_title(title)
    return ax

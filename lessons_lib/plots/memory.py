"""Plot where training memory goes: parameters, gradients, optimizer state and activations, stacked."""

from __future__ import annotations

import math
from collections.abc import Mapping

from ..i18n import tr
from ._axes import get_ax

_ORDER = ("params", "grads", "optimizer", "activations")
_COLORS = {"params": "#4C72B0", "grads": "#DD8452", "optimizer": "#55A868", "activations": "#C44E52"}
_EXTRA_COLORS = ("#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD")  # other parts, in order
_UNITS = (("B", 1), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40))


def _label(component: str) -> str:
    names = {
        "params": (tr("tham số", "parameters")),
        "grads": "gradient",
        "optimizer": tr("trạng thái optimizer", "optimizer state"),
        "activations": tr("activation (lưu cho backward)", "activations (saved for backward)"),
    }
    return names.get(component, component)


def _pick_unit(largest: float) -> tuple[str, int]:
    name, size = _UNITS[0]
    for unit_name, unit_size in _UNITS:
        if largest >= unit_size:
            name, size = unit_name, unit_size
    return name, size


def _resolve_unit(unit: str | None, largest: float) -> tuple[str, int]:
    """Return the name and size of `unit`, or of the unit that suits `largest` when `unit` is None."""
    if unit is None:
        return _pick_unit(largest)
    sizes = dict(_UNITS)
    if unit not in sizes:
        raise ValueError(tr(f"unit phải là một trong {list(sizes)}, nhận {unit!r}",
                            f"unit must be one of {list(sizes)}, got {unit!r}"))
    return unit, sizes[unit]


def _check_bytes(where: str, value) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise TypeError(
            tr(
                f"{where} phải là số byte (int/float ≥ 0), không phải {value!r}",
                f"{where} must be a number of bytes (int/float >= 0), not {value!r}",
            )
        )
    return float(value)


def plot_memory_breakdown(rows: Mapping[str, Mapping[str, int | float]], *, measured: Mapping[str, int | float] | None = None,
                          ax=None, unit: str | None = None, title: str | None = None):
    """Draw one stacked bar per configuration: parameters, gradients, optimizer state, activations.

    Args:
        rows: {label: {"params": bytes, "grads": bytes, "optimizer": bytes, "activations": bytes}};
            missing parts count as 0, other keys are stacked after these. `StateSizes.breakdown()`
            returns such a dict.
        measured: Optional {label: bytes}, e.g. ``torch.cuda.max_memory_allocated()`` measured on a GPU;
            drawn as a hatched bar beside that label's stack, so prediction and measurement compare.
        ax: Axes to draw on (a new figure when None).
        unit: "B", "KiB", "MiB", "GiB" or "TiB"; chosen from the largest bar when None.
        title: Optional title.

    Returns:
        The axes.
    """
    if not isinstance(rows, Mapping) or not rows:
        raise TypeError(tr("rows phải là dict khác rỗng {nhãn: {thành phần: byte}}",
                           "rows must be a non-empty dict {label: {component: bytes}}"))
    parts: list[str] = list(_ORDER)
    for label, row in rows.items():
        if not isinstance(label, str) or not isinstance(row, Mapping):
            raise TypeError(tr(f"mỗi dòng phải là nhãn str → dict thành phần, lỗi ở {label!r}",
                               f"each row must be a str label -> dict of components, wrong at {label!r}"))
        for key, value in row.items():
            _check_bytes(f"rows[{label!r}][{key!r}]", value)
            if key not in parts:
                parts.append(key)
    measured = dict(measured or {})
    for label, value in measured.items():
        if label not in rows:
            raise ValueError(tr(f"measured có nhãn {label!r} không có trong rows ({list(rows)})",
                                f"measured has label {label!r} that is not in rows ({list(rows)})"))
        _check_bytes(f"measured[{label!r}]", value)
    totals = [sum(row.values()) for row in rows.values()]
    largest = max([*totals, *measured.values(), 1])
    unit_name, unit_size = _resolve_unit(unit, largest)

    ax = get_ax(ax)
    labels = list(rows)
    width = 0.38 if measured else 0.6
    offset = width / 2 if measured else 0.0
    xs = range(len(labels))
    bottoms = [0.0] * len(labels)
    extras = [part for part in parts if part not in _COLORS]
    for part in parts:
        heights = [rows[label].get(part, 0) / unit_size for label in labels]
        if not any(heights):
            continue
        color = _COLORS.get(part) or _EXTRA_COLORS[extras.index(part) % len(_EXTRA_COLORS)]
        ax.bar([x - offset for x in xs], heights, width, bottom=bottoms, label=_label(part), color=color)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    if measured:
        heights = [measured.get(label, 0) / unit_size for label in labels]
        ax.bar([x + offset for x in xs], heights, width, label=tr("đo được (peak trên GPU)", "measured (GPU peak)"),
               color="white", edgecolor="black", hatch="//")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels)
    ax.set_ylabel(tr(f"bộ nhớ ({unit_name})", f"memory ({unit_name})"))
    if title:
        ax.set_title(title)
    ax.set_ylim(0, largest / unit_size * 1.45)  # headroom for the legend above the bars
    ax.legend(fontsize="small", loc="upper center", ncol=2)
    return ax


def plot_activation_timeline(timeline, *, marks: Mapping[str, int] | None = None, ax=None, unit: str | None = None,
                             title: str | None = None):
    """Draw the bytes autograd holds for backward after each change, as a staircase (forward up, backward down).

    Args:
        timeline: A `SavedTensorMeter` (its ``timeline``) or a sequence of byte counts, one per change.
        marks: Optional {label: index into the timeline}, drawn as vertical lines (e.g. where backward starts:
            ``len(meter.timeline)`` read after the forward pass).
        ax: Axes to draw on (a new figure when None).
        unit: "B", "KiB", "MiB", "GiB" or "TiB"; chosen from the peak when None.
        title: Optional title.

    Returns:
        The axes.
    """
    values = getattr(timeline, "timeline", timeline)
    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__len__") or len(values) == 0:
        raise TypeError(tr("timeline phải là một SavedTensorMeter hoặc danh sách số byte khác rỗng",
                           "timeline must be a SavedTensorMeter or a non-empty list of byte counts"))
    points = [_check_bytes(f"timeline[{i}]", v) for i, v in enumerate(values)]
    marks = dict(marks or {})
    for label, index in marks.items():
        if not isinstance(label, str) or isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(tr(f"marks phải là {{nhãn str: chỉ số int}}, lỗi ở {label!r}",
                               f"marks must be {{str label: int index}}, wrong at {label!r}"))
        if not 0 <= index <= len(points):
            raise ValueError(tr(f"marks[{label!r}] = {index} nằm ngoài timeline (0…{len(points)})",
                                f"marks[{label!r}] = {index} is outside the timeline (0…{len(points)})"))
    largest = max(max(points), 1.0)
    unit_name, unit_size = _resolve_unit(unit, largest)
    ax = get_ax(ax)
    ax.step(range(len(points)), [p / unit_size for p in points], where="post", color=_COLORS["activations"],
            label=tr("activation autograd đang giữ", "activations held by autograd"))
    for label, index in marks.items():
        ax.axvline(index, color="gray", linestyle="--", linewidth=1)
        ax.annotate(label, (index, 1.0), xycoords=("data", "axes fraction"), xytext=(4, -12),
                    textcoords="offset points", fontsize="small", color="dimgray")
    ax.set_xlabel(tr("sự kiện (lưu hoặc thả một tensor)", "event (a tensor saved or let go)"))
    ax.set_ylabel(tr(f"bộ nhớ ({unit_name})", f"memory ({unit_name})"))
    ax.set_ylim(0, largest / unit_size * 1.15)
    if title:
        ax.set_title(title)
    return ax

"""Draw a profiler trace as a timeline, the way Perfetto or chrome://tracing shows it (one row per nesting level)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from .._validate import check_int
from ..i18n import tr
from ..profiling import TraceEvent, read_trace
from ._axes import get_ax

_COLORS = {"user_annotation": "#dd8452", "cpu_op": "#4c72b0", "cuda_runtime": "#8172b3", "kernel": "#55a868",
           "gpu_memcpy": "#c44e52", "gpu_user_annotation": "#ccb974"}
_OTHER = "#937860"
_LABELS = {"user_annotation": ("nhãn (record_function)", "label (record_function)"),
           "cpu_op": ("phép PyTorch (CPU)", "PyTorch op (CPU)"),
           "cuda_runtime": ("CUDA runtime (CPU)", "CUDA runtime (CPU)"),
           "kernel": ("kernel GPU", "GPU kernel"),
           "gpu_memcpy": ("chép bộ nhớ (GPU)", "memory copy (GPU)"),
           "gpu_user_annotation": ("nhãn trên GPU", "label on the GPU")}


_FONT_PT = 7
_PREFIXES = ("aten::", "autograd::engine::evaluate_function: ")


def _short_name(name: str) -> str:
    """Return an event's name without the prefixes that only take room (``aten::`` and autograd's)."""
    for prefix in _PREFIXES:
        name = name.removeprefix(prefix)
    return name


def _depths(events: Sequence[TraceEvent]) -> list[int]:
    """Return each event's nesting level within its track (events sorted by track, then start)."""
    depths, stack, track = [], [], None
    for ev in events:
        if ev.track != track:
            stack, track = [], ev.track
        while stack and ev.start_us >= stack[-1] - 1e-6:
            stack.pop()
        depths.append(len(stack))
        stack.append(ev.start_us + ev.dur_us)
    return depths


def plot_trace(trace: str | os.PathLike | Sequence[TraceEvent], ax=None, max_depth: int = 3,
               min_label_share: float = 0.04, title: str | None = None):
    """Draw a trace file (``prof.export_chrome_trace``) as a timeline: one bar per event, nested rows; return the axes.

    Args:
        trace: The path of the .json trace, or the events of ``profiling.read_trace``.
        ax: Axes to draw on (None: a new figure).
        max_depth: Nesting levels to draw per track (0 = only the outermost events, e.g. the labels).
        min_label_share: Write an event's name on its bar when it lasts at least this share of the timeline.
        title: Optional title.
    """
    events = read_trace(trace) if isinstance(trace, (str, os.PathLike)) else list(trace)
    if not all(isinstance(e, TraceEvent) for e in events):
        raise TypeError(tr("trace phải là đường dẫn file .json hoặc danh sách TraceEvent của read_trace.",
                           "trace must be a .json file path or the TraceEvent list of read_trace."))
    check_int("max_depth", max_depth, minimum=0)
    if isinstance(min_label_share, bool) or not isinstance(min_label_share, (int, float)) or not (
            0 <= min_label_share <= 1):
        raise ValueError(tr("min_label_share phải là số từ 0 đến 1.", "min_label_share must be a number from 0 to 1."))
    if not events:
        raise ValueError(tr("trace không có sự kiện nào để vẽ (profiler đã ghi gì chưa?).",
                            "the trace has no events to draw (did the profiler record anything?)."))
    depths = _depths(events)
    tracks = sorted({e.track for e in events}, key=lambda t: (t.startswith("GPU"), t))
    span = max(e.start_us + e.dur_us for e in events) - min(e.start_us for e in events)
    ax = get_ax(ax, figsize=(11.0, 1.2 + 0.45 * len(tracks) * (max_depth + 1)))
    y_of, ticks, labels, y = {}, [], [], 0
    for track in tracks:
        used = max(d for e, d in zip(events, depths, strict=True) if e.track == track)
        levels = min(used, max_depth) + 1
        y_of[track] = y
        ticks.append(y + (levels - 1) / 2)
        labels.append(track)
        y += levels + 0.6
    axes_px = ax.get_window_extent().width  # how many pixels the time axis spans, to fit names in their bars
    char_px = 0.6 * _FONT_PT * ax.figure.dpi / 72
    bars: dict[tuple[float, str], list[tuple[float, float]]] = {}
    for ev, depth in zip(events, depths, strict=True):
        if depth > max_depth:
            continue
        row = y_of[ev.track] + depth
        bars.setdefault((row, _COLORS.get(ev.cat, _OTHER)), []).append((ev.start_us / 1e3, ev.dur_us / 1e3))
        fits = int(0.9 * axes_px * ev.dur_us / span / char_px) if span else 0
        if span and ev.dur_us / span >= min_label_share and fits >= 4:
            name = _short_name(ev.name)
            ax.text((ev.start_us + ev.dur_us / 2) / 1e3, row, name if len(name) <= fits else name[:fits - 1] + "…",
                    ha="center", va="center", fontsize=_FONT_PT, clip_on=True)
    for (row, color), spans in bars.items():  # one collection per row and colour: fast even for 10⁴ events
        ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=color, edgecolor="white", linewidth=0.3)
    ax.set_xlim(0, span / 1e3 * 1.01 if span else 1)
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlabel(tr("thời gian từ sự kiện đầu tiên (ms)", "time since the first event (ms)"))
    ax.grid(axis="y", visible=False)
    from matplotlib.patches import Patch

    cats = {e.cat for e in events}
    handles = [Patch(color=color, label=tr(*_LABELS[cat])) for cat, color in _COLORS.items() if cat in cats]
    if cats - set(_COLORS):
        handles.append(Patch(color=_OTHER, label=tr("khác", "other")))
    ax.legend(handles=handles, fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        ax.set_title(title, fontsize=10)
    return ax

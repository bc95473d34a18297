"""Draw a profiler trace as a timeline, as Perfetto or chrome://tracing shows it (one row per nesting level)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from .._validate import check_int
from ._axes import GREY, PALETTE, add_facts, get_ax

_COLORS = dict(zip(("cpu_op", "user_annotation", "kernel", "gpu_memcpy", "cuda_runtime", "gpu_user_annotation"),
                   PALETTE, strict=False))
_LABELS = {"user_annotation": "nhãn (record_function)", "cpu_op": "phép PyTorch (CPU)",
           "cuda_runtime": "CUDA runtime (CPU)", "kernel": "kernel GPU", "gpu_memcpy": "chép bộ nhớ (GPU)",
           "gpu_user_annotation": "nhãn trên GPU"}
_FONT_PT = 7
_MIN_LABEL_SHARE = 0.04  # an event's name is written on its bar when it lasts ≥ this share of the timeline


@dataclass(frozen=True)
class _Event:
    """One complete ("X") event of a Chrome trace: name, category, track, start and duration in µs."""

    name: str
    cat: str
    track: str
    start_us: float
    dur_us: float


def _read_trace(path: str | os.PathLike) -> list[_Event]:
    """Return the complete events of a ``prof.export_chrome_trace`` file, sorted by track and start."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise ValueError(f"không có file {os.fspath(path)!r}: gọi prof.export_chrome_trace(path) trước"
                         ) from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{os.fspath(path)!r} không phải JSON của một trace ({exc})") from None
    raw = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(raw, list):
        raise ValueError(f"{os.fspath(path)!r} không có danh sách traceEvents")
    complete = [e for e in raw if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e and "ts" in e
                and e.get("cat") != "Trace"]
    origin = min((float(e["ts"]) for e in complete), default=0.0)
    events = []
    for e in complete:
        gpu = str(e.get("cat", "")).startswith(("kernel", "gpu_"))
        track = f"GPU {e.get('pid', '?')} · stream {e.get('tid', '?')}" if gpu else f"CPU {e.get('tid', '?')}"
        events.append(_Event(str(e.get("name", "")), str(e.get("cat", "")), track, float(e["ts"]) - origin,
                             float(e["dur"])))
    events.sort(key=lambda ev: (ev.track, ev.start_us, -ev.dur_us))  # a parent before its children
    return events


def _depths(events: list[_Event]) -> list[int]:
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


def plot_trace(trace: str | os.PathLike, ax=None, max_depth: int = 3, title: str | None = None):
    """Draw a ``prof.export_chrome_trace`` file as a timeline: one bar per event, nested rows; return the axes."""
    if not isinstance(trace, (str, os.PathLike)):
        raise TypeError(f"trace phải là đường dẫn tới file .json, không phải {type(trace).__name__}")
    check_int("max_depth", max_depth, 0)
    events = _read_trace(trace)
    if not events:
        raise ValueError("trace không có sự kiện nào để vẽ (profiler đã ghi gì chưa?).")
    depths = _depths(events)
    tracks = sorted({e.track for e in events}, key=lambda t: (t.startswith("GPU"), t))
    span = max(e.start_us + e.dur_us for e in events) - min(e.start_us for e in events)
    ax = get_ax(ax, figsize=(11.0, 1.2 + 0.45 * len(tracks) * (max_depth + 1)))
    y_of, ticks, y = {}, [], 0
    for track in tracks:
        levels = min(max(d for e, d in zip(events, depths, strict=True) if e.track == track), max_depth) + 1
        y_of[track] = y
        ticks.append(y + (levels - 1) / 2)
        y += levels + 0.6
    _draw_events(ax, [(ev, y_of[ev.track] + d) for ev, d in zip(events, depths, strict=True) if d <= max_depth], span)
    ax.set_xlim(0, span / 1e3 * 1.01 if span else 1)
    ax.set_yticks(ticks)
    ax.set_yticklabels(tracks)
    ax.invert_yaxis()
    ax.set_xlabel("thời gian từ sự kiện đầu tiên (ms)")
    add_facts(ax, f"{len(events)} sự kiện trong {span / 1e3:.3g} ms, các dòng: {', '.join(tracks)}.")
    ax.grid(axis="y", visible=False)
    _legend(ax, {e.cat for e in events})
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def _draw_events(ax, placed: list[tuple[_Event, float]], span: float) -> None:
    """Draw each (event, row) as a bar, with its name on it where the name fits."""
    axes_px = ax.get_window_extent().width  # how many pixels the time axis spans, to fit names in their bars
    char_px = 0.6 * _FONT_PT * ax.figure.dpi / 72
    bars: dict[tuple[float, str], list[tuple[float, float]]] = {}
    for ev, row in placed:
        bars.setdefault((row, _COLORS.get(ev.cat, GREY)), []).append((ev.start_us / 1e3, ev.dur_us / 1e3))
        fits = int(0.9 * axes_px * ev.dur_us / span / char_px) if span else 0
        if span and ev.dur_us / span >= _MIN_LABEL_SHARE and fits >= 4:
            # without the prefixes that only take room
            name = ev.name.removeprefix("aten::").removeprefix("autograd::engine::evaluate_function: ")
            name = name if len(name) <= fits else name[:fits - 1] + "…"
            ax.text((ev.start_us + ev.dur_us / 2) / 1e3, row, name, ha="center", va="center", fontsize=_FONT_PT,
                    clip_on=True)
    for (row, color), spans in bars.items():  # one collection per row and colour: fast even for 10⁴ events
        ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=color, edgecolor="white", linewidth=0.3)


def _legend(ax, cats: set[str]) -> None:
    """Add a legend entry for each category drawn, and one "khác" for the rest."""
    from matplotlib.patches import Patch

    handles = [Patch(color=color, label=_LABELS[cat]) for cat, color in _COLORS.items() if cat in cats]
    if cats - set(_COLORS):
        handles.append(Patch(color=GREY, label="khác"))
    ax.legend(handles=handles, fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))

"""Summarise a ``torch.profiler`` run in a table that fits a notebook cell, and read an exported trace file.

``prof.key_averages().table(...)`` is the real thing and the lessons show it first; its rows are wide
(seven or more columns) and kernel names can run to hundreds of characters. ``top_ops`` keeps the columns
that answer "where did the time go" (self time, share, calls, time per call), shortens long names, and
says what kind of row each one is: a PyTorch op, a ``record_function`` label, a CUDA runtime call, or
autograd's bookkeeping.

``compare_timings`` says whether one of two measured timings is faster, slower, or not told apart from the
other by what the measurement itself shows (the spread of its repeats); lesson 09's verdicts use it.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from torch.autograd import DeviceType

from ._validate import check_int
from .bench.timing import Timing
from .bench.units import format_seconds
from .i18n import tr

#: What each kind of row is, in words (see `row_kind`).
KINDS = {
    "op": ("phép PyTorch", "PyTorch op"),
    "label": ("nhãn record_function", "record_function label"),
    "runtime": ("lời gọi CUDA runtime (phía CPU)", "CUDA runtime call (CPU side)"),
    "autograd": ("việc của autograd", "autograd bookkeeping"),
    "kernel": ("kernel GPU", "GPU kernel"),
    "copy": ("chép bộ nhớ trên GPU", "memory copy on the GPU"),
    "other": ("khác", "other"),
}
_BY = ("cpu", "device")


def row_kind(name: str, is_user_annotation: bool | None = False) -> str:
    """Return what a profiler row is: "op", "label", "runtime", "autograd", "kernel", "copy" or "other".

    Args:
        name: The row's key, e.g. "aten::mm", "forward", "cudaLaunchKernel".
        is_user_annotation: The event's ``is_user_annotation`` flag (True for ``record_function`` ranges); None
            where torch does not set it (before 2.5): a row that is nothing else and has no "::" is then a label.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be the row's key (a str), got {type(name).__name__}")
    if name.startswith("aten::"):
        return "op"
    if is_user_annotation or name.startswith(("ProfilerStep#", "Optimizer.")):
        return "label"
    if name.startswith(("cuda", "cu")) and name[len("cuda" if name.startswith("cuda") else "cu"):][:1].isupper():
        return "runtime"
    if name.startswith("autograd::") or name.endswith(("Backward0", "Backward1")) or name in (
            "torch::autograd::AccumulateGrad", "detach"):
        return "autograd"
    if name.startswith(("Memcpy", "Memset")):
        return "copy"
    if any(mark in name for mark in ("kernel", "gemm", "<", "cutlass", "triton_")):
        return "kernel"
    return "label" if is_user_annotation is None and "::" not in name else "other"


@dataclass(frozen=True)
class OpRow:
    """One row of a profile summary: a name, its self time, its share of all self time, and its call count."""

    name: str
    kind: str
    self_s: float
    total_s: float
    calls: int
    share: float

    @property
    def per_call_s(self) -> float:
        """Return the mean self time of one call, in seconds."""
        return self.self_s / self.calls if self.calls else 0.0


@dataclass(frozen=True)
class OpTable:
    """The top rows of a profile by self time (CPU or device), with the total they are shares of."""

    rows: tuple[OpRow, ...]
    by: str
    total_self_s: float
    total_rows: int

    @property
    def top(self) -> OpRow | None:
        """Return the row with the most self time (None for an empty profile)."""
        return self.rows[0] if self.rows else None

    def names(self) -> list[str]:
        """Return the names of the rows, from most to least self time."""
        return [row.name for row in self.rows]

    def __str__(self) -> str:
        where = "CPU" if self.by == "cpu" else tr("thiết bị (GPU)", "device (GPU)")
        if not self.rows:
            return tr(f"Không có dòng nào có self time trên {where}.", f"No row has self time on the {where}.")
        head = tr(f"{len(self.rows)}/{self.total_rows} dòng có self time {where} lớn nhất "
                  f"(tổng self time {self.total_self_s * 1e3:.2f} ms):",
                  f"top {len(self.rows)} of {self.total_rows} rows by {where} self time "
                  f"(total self time {self.total_self_s * 1e3:.2f} ms):")
        cols = tr(f"{'self ms':>9} {'%':>4} {'lần gọi':>7} {'µs/lần':>9}  tên (loại)",
                  f"{'self ms':>9} {'%':>4} {'calls':>7} {'µs/call':>9}  name (kind)")
        lines = [head, cols]
        for row in self.rows:
            kind = tr(*KINDS[row.kind])
            lines.append(f"{row.self_s * 1e3:9.3f} {row.share * 100:3.0f}% {row.calls:7d} "
                         f"{row.per_call_s * 1e6:9.1f}  {_shorten(row.name)} ({kind})")
        return "\n".join(lines)

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(str(self))


def _shorten(name: str, width: int = 48) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _averages(prof) -> list:
    """Return the FunctionEventAvg rows of a profiler run (a ``profile`` object or ``key_averages()``)."""
    if hasattr(prof, "key_averages") and not isinstance(prof, list):
        try:
            events = prof.key_averages()
        except (AssertionError, RuntimeError, AttributeError) as exc:
            raise ValueError(tr("prof chưa có kết quả: hãy chạy code bên trong `with profile(...) as prof:` trước.",
                                "prof has no results yet: run code inside `with profile(...) as prof:` first.")
                             ) from exc
    elif isinstance(prof, Iterable) and not isinstance(prof, (str, bytes)):
        events = prof
    else:
        raise TypeError(tr(f"prof phải là một torch.profiler.profile đã chạy (hoặc prof.key_averages()), "
                           f"không phải {type(prof).__name__}",
                           f"prof must be a torch.profiler.profile that has run (or prof.key_averages()), "
                           f"not {type(prof).__name__}"))
    events = list(events)
    for event in events:
        if not hasattr(event, "key") or not hasattr(event, "self_cpu_time_total"):
            raise TypeError(tr("prof.key_averages() phải chứa các dòng của profiler (FunctionEventAvg).",
                               "prof.key_averages() must hold profiler rows (FunctionEventAvg)."))
    return events


def _on_device(event) -> bool:
    """Return True for a row of GPU work (a kernel, a copy), as the table's "Self CUDA time total" counts them."""
    device_type = getattr(event, "device_type", None)
    return (device_type is not None and device_type != DeviceType.CPU
            and not getattr(event, "is_user_annotation", False))


def _self_us(event, by: str) -> float:
    if by == "cpu":
        return float(event.self_cpu_time_total)
    value = getattr(event, "self_device_time_total", None)  # torch >= 2.4; older builds call it cuda
    if value is None:
        value = getattr(event, "self_cuda_time_total", 0)
    return float(value or 0)


def _total_us(event, by: str) -> float:
    if by == "cpu":
        return float(event.cpu_time_total)
    value = getattr(event, "device_time_total", None)
    if value is None:
        value = getattr(event, "cuda_time_total", 0)
    return float(value or 0)


def top_ops(prof, n: int = 8, by: str = "cpu", kinds: Iterable[str] | None = None) -> OpTable:
    """Return the `n` rows of a profile with the most self time, as a compact table.

    Args:
        prof: A ``torch.profiler.profile`` that has run, or its ``key_averages()``.
        n: How many rows to keep.
        by: "cpu" (self CPU time of every row) or "device" (the GPU's own rows, kernels and copies, by their
            time on the GPU; needs ``ProfilerActivity.CUDA``).
        kinds: Keep only rows of these kinds (see `row_kind`), e.g. ``{"op"}``; None keeps every row.

    Returns:
        An ``OpTable``; its shares are of the self time of every row (kept or not), so they add up to
        at most 100 %.
    """
    check_int("n", n, minimum=1)
    if by not in _BY:
        raise ValueError(tr(f"by phải là 'cpu' hoặc 'device', không phải {by!r}",
                            f"by must be 'cpu' or 'device', not {by!r}"))
    if kinds is not None:
        if isinstance(kinds, str):
            kinds = {kinds}
        kinds = set(kinds)
        unknown = kinds - set(KINDS)
        if unknown:
            raise ValueError(tr(f"kinds chỉ gồm {sorted(KINDS)}, không có {sorted(unknown)}",
                                f"kinds may only hold {sorted(KINDS)}, not {sorted(unknown)}"))
    events = _averages(prof)
    if by == "device":
        events = [e for e in events if _on_device(e)]
    total = sum(_self_us(e, by) for e in events)
    rows = []
    for event in events:
        self_us = _self_us(event, by)
        if self_us <= 0:
            continue
        kind = row_kind(event.key, getattr(event, "is_user_annotation", None))  # None: torch < 2.5 does not say
        if kinds is not None and kind not in kinds:
            continue
        rows.append(OpRow(event.key, kind, self_us / 1e6, _total_us(event, by) / 1e6, int(event.count),
                          self_us / total if total else 0.0))
    rows.sort(key=lambda r: r.self_s, reverse=True)
    return OpTable(tuple(rows[:n]), by, total / 1e6, len(rows))


def count_calls(prof, name: str) -> int:
    """Return how many times the row `name` (e.g. "aten::item", "cudaStreamSynchronize") was called (0 if never)."""
    if not isinstance(name, str) or not name:
        raise TypeError(tr("name phải là tên một dòng của profiler, vd 'aten::item'",
                           "name must be a profiler row's name, e.g. 'aten::item'"))
    return sum(int(e.count) for e in _averages(prof) if e.key == name)


@dataclass(frozen=True)
class TraceEvent:
    """One complete ("X") event of a Chrome trace: name, category, track, start and duration in µs."""

    name: str
    cat: str
    track: str
    start_us: float
    dur_us: float


def read_trace(path: str | os.PathLike) -> list[TraceEvent]:
    """Return the complete events of a Chrome/Perfetto trace written by ``prof.export_chrome_trace``.

    Times are in µs from the first event. The track is "CPU <thread id>" for CPU threads and
    "GPU <device> · stream <stream id>" for GPU streams, as Perfetto groups them.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(tr(f"path phải là đường dẫn tới file .json, không phải {type(path).__name__}",
                           f"path must be the path of a .json file, not {type(path).__name__}"))
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise ValueError(tr(f"không có file {os.fspath(path)!r}: gọi prof.export_chrome_trace(path) trước",
                            f"no file {os.fspath(path)!r}: call prof.export_chrome_trace(path) first")) from None
    except json.JSONDecodeError as exc:
        raise ValueError(tr(f"{os.fspath(path)!r} không phải JSON của một trace ({exc})",
                            f"{os.fspath(path)!r} is not a trace's JSON ({exc})")) from None
    raw = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(raw, list):
        raise ValueError(tr(f"{os.fspath(path)!r} không có danh sách traceEvents",
                            f"{os.fspath(path)!r} has no traceEvents list"))
    complete = [e for e in raw if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e and "ts" in e
                and e.get("cat") != "Trace"]
    if not complete:
        return []
    origin = min(float(e["ts"]) for e in complete)
    events = []
    for e in complete:
        gpu = str(e.get("cat", "")).startswith(("kernel", "gpu_", "gpu_memcpy", "gpu_memset"))
        track = f"GPU {e.get('pid', '?')} · stream {e.get('tid', '?')}" if gpu else f"CPU {e.get('tid', '?')}"
        events.append(TraceEvent(str(e.get("name", "")), str(e.get("cat", "")), track,
                                 float(e["ts"]) - origin, float(e["dur"])))
    events.sort(key=lambda ev: (ev.track, ev.start_us, -ev.dur_us))  # a parent before its children
    return events


#: Two medians within this factor of each other are "ngang nhau" (the same), however quiet the machine: a
#: 25 % difference (ratio 0.8 or 1.25) is the least the lessons call faster or slower.
MIN_FACTOR = 1.25
#: A measurement whose slowest repeat took this many times its fastest is flagged as noisy.
NOISY_SPREAD = 2.0


def _noise_warning(times_s) -> str | None:
    """Return "from … to … (N×)" when the repeats of one measurement disagree too much, else None.

    (``lessons_lib.bench.noise.noise_warning``, once it exists, answers the same question for every lesson.)
    """
    fastest, slowest = min(times_s), max(times_s)
    if slowest < NOISY_SPREAD * fastest and statistics.median(times_s) < MIN_FACTOR * fastest:
        return None
    return f"từ {format_seconds(fastest)} đến {format_seconds(slowest)} ({slowest / fastest:.1f}×)"


NOISE_ADVICE = ("có thể máy đang bận việc khác (Colab miễn phí chỉ có 2 vCPU trên một máy dùng chung, nghe nói "
                "là hai luồng của cùng một nhân); chạy lại ô khi máy rảnh để có số đáng tin hơn.")


@dataclass(frozen=True)
class TimingComparison:
    """Two timings of the same work and what they show: "faster", "slower" or "same" (not told apart).

    Attributes:
        base: The reference timing (eager, the loop that reads nothing, ...).
        other: The timing compared with it.
        factor: The smallest ratio of medians called a difference: `MIN_FACTOR`, or more when a typical
            repeat (the median) of either measurement sits further above its fastest repeat than that.
    """

    base: Timing
    other: Timing
    factor: float

    @property
    def speedup(self) -> float:
        """Return base median / other median (> 1: `other` is faster)."""
        return self.base.median_s / self.other.median_s

    @property
    def outcome(self) -> str:
        """Return "faster", "slower" or "same": how `other` compares with `base`, given the measured spread."""
        if self.speedup >= self.factor:
            return "faster"
        if self.speedup <= 1 / self.factor:
            return "slower"
        return "same"

    def notes(self) -> list[str]:
        """Return, for each measurement whose repeats disagree too much, "label: from … to … (N×)"."""
        notes = []
        for timing in (self.base, self.other):
            note = _noise_warning(timing.times_s)
            if note:
                notes.append(f"{timing.label or 'số đo'} {note}")
        return notes

    def __str__(self) -> str:
        s, notes = self.speedup, self.notes()
        who = f"{self.other.label or 'B'} so với {self.base.label or 'A'}"
        unsure = " (chưa chắc: số đo nhiễu)" if notes else ""
        if self.outcome == "faster":
            text = f"{who}: nhanh hơn {s:.2f}×{unsure}"
        elif self.outcome == "slower":
            text = f"{who}: chậm hơn {1 / s:.2f}× (tỉ lệ {s:.2f}×){unsure}"
        else:
            text = (f"{who}: ngang nhau ({s:.2f}×; chênh dưới {self.factor:.3g}× thì chưa phân biệt được "
                    f"với nhiễu đo)")
        if notes:
            text += "\n  ⚠️ số đo nhiễu: các lần lặp của " + ", của ".join(notes) + "; " + NOISE_ADVICE
        return text

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(str(self))


def compare_timings(base: Timing, other: Timing) -> TimingComparison:
    """Compare two timings of the same work: faster, slower or the same, judged by their own spread.

    The ratio of medians must reach `MIN_FACTOR` (1.25×, i.e. 0.8× the other way), or the factor by which a
    typical repeat of either measurement exceeds its fastest repeat when that is larger (a noisy measurement
    cannot tell smaller differences apart).

    Args:
        base: The reference ``Timing`` (from ``bench.measure``).
        other: The ``Timing`` compared with it.
    """
    for name, value in (("base", base), ("other", other)):
        if not isinstance(value, Timing):
            raise TypeError(f"{name} phải là kết quả của bench.measure (một Timing), không phải {type(value).__name__}")
    spread = max(t.median_s / t.min_s if t.min_s > 0 else float("inf") for t in (base, other))
    return TimingComparison(base, other, max(MIN_FACTOR, spread))

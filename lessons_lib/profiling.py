"""Summarise a ``torch.profiler`` run in a table that fits a notebook cell, and compare two timings."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from torch.autograd import DeviceType

from ._validate import check_int
from .bench.timing import Timing, format_count, noise_signs
from .display import Printable

_KINDS = {"op": "phép PyTorch", "label": "nhãn record_function", "runtime": "lời gọi CUDA runtime (phía CPU)",
          "autograd": "việc của autograd", "kernel": "kernel GPU", "copy": "chép bộ nhớ trên GPU",
          "other": "khác"}


def _row_kind(name: str, is_user_annotation: bool | None = False) -> str:
    """Return what a profiler row is: one of `_KINDS`."""
    if name.startswith("aten::"):
        return "op"
    if is_user_annotation or name.startswith(("ProfilerStep#", "Optimizer.")):
        return "label"
    prefix = "cuda" if name.startswith("cuda") else "cu"
    if name.startswith(prefix) and name[len(prefix):][:1].isupper():
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
    """One row of a profile summary: name, kind, self time, calls, share of all self time."""

    name: str
    kind: str
    self_s: float
    calls: int
    share: float

    @property
    def per_call_s(self) -> float:
        return self.self_s / self.calls if self.calls else 0.0


@dataclass(frozen=True, repr=False)
class OpTable(Printable):
    """The top rows of a profile by self time (CPU or device), with the total they are shares of."""

    rows: tuple[OpRow, ...]
    by: str
    total_self_s: float
    total_rows: int

    def __str__(self) -> str:
        where = "CPU" if self.by == "cpu" else "thiết bị (GPU)"
        if not self.rows:
            return f"Không có dòng nào có self time trên {where}."
        lines = [f"{len(self.rows)}/{self.total_rows} dòng có self time {where} lớn nhất "
                 f"(tổng self time {self.total_self_s * 1e3:.2f} ms):",
                 f"{'self ms':>9} {'%':>4} {'lần gọi':>7} {'µs/lần':>9}  tên (loại)"]
        for row in self.rows:
            name = row.name if len(row.name) <= 48 else row.name[:47] + "…"
            lines.append(f"{row.self_s * 1e3:9.2f} {row.share * 100:3.0f}% {row.calls:7d} "
                         f"{format_count(row.per_call_s * 1e6, 1):>9}  {name} ({_KINDS[row.kind]})")
        return "\n".join(lines)


def _averages(prof) -> list:
    """Return the FunctionEventAvg rows of a profiler run (a ``profile`` object or ``key_averages()``)."""
    if hasattr(prof, "key_averages") and not isinstance(prof, list):
        try:
            events = prof.key_averages()
        except (AssertionError, RuntimeError, AttributeError) as exc:
            raise ValueError("prof chưa có kết quả: hãy chạy code bên trong `with profile(...) as prof:` trước."
                             ) from exc
    elif isinstance(prof, Iterable) and not isinstance(prof, (str, bytes)):
        events = prof
    else:
        raise TypeError("prof phải là một torch.profiler.profile đã chạy (hoặc prof.key_averages()), "
                        f"không phải {type(prof).__name__}")
    events = list(events)
    if not all(hasattr(e, "key") and hasattr(e, "self_cpu_time_total") for e in events):
        raise TypeError("prof.key_averages() phải chứa các dòng của profiler (FunctionEventAvg).")
    return events


def top_ops(prof, n: int = 8, by: str = "cpu", kinds: Iterable[str] | None = None) -> OpTable:
    """Return the `n` rows of a profile with the most self time, as a compact table."""
    check_int("n", n, 1)
    if by not in ("cpu", "device"):
        raise ValueError(f"by phải là 'cpu' hoặc 'device', không phải {by!r}")
    if kinds is not None:
        kinds = {kinds} if isinstance(kinds, str) else set(kinds)
        if kinds - set(_KINDS):
            raise ValueError(f"kinds chỉ gồm {sorted(_KINDS)}, không có {sorted(kinds - set(_KINDS))}")
    events = _averages(prof)
    if by == "device":  # the GPU's own rows, as the table's "Self CUDA time total" counts them
        events = [e for e in events if getattr(e, "device_type", None) not in (None, DeviceType.CPU)
                  and not getattr(e, "is_user_annotation", False)]
    self_us = [float(e.self_cpu_time_total) if by == "cpu" else float(e.self_device_time_total) for e in events]
    total = sum(self_us)
    rows = []
    for event, own in zip(events, self_us, strict=True):
        kind = _row_kind(event.key, getattr(event, "is_user_annotation", None))
        if own <= 0 or (kinds is not None and kind not in kinds):
            continue
        rows.append(OpRow(event.key, kind, own / 1e6, int(event.count), own / total))
    rows.sort(key=lambda r: r.self_s, reverse=True)
    return OpTable(tuple(rows[:n]), by, total / 1e6, len(rows))


def count_calls(prof, name: str) -> int:
    """Return how many times the row `name` (e.g. "aten::item") was called (0 if never)."""
    if not isinstance(name, str) or not name:
        raise TypeError("name phải là tên một dòng của profiler, vd 'aten::item'")
    return sum(int(e.count) for e in _averages(prof) if e.key == name)


# Two medians within this factor are "ngang nhau", however quiet the machine: 25 % is the least difference
# the lessons call faster or slower.
_MIN_FACTOR = 1.25


@dataclass(frozen=True, repr=False)
class TimingComparison(Printable):
    """Two timings of the same work and what they show: "faster", "slower" or "same" (not told apart)."""

    base: Timing
    other: Timing
    factor: float

    @property
    def speedup(self) -> float:
        """Return base median / other median (> 1: `other` is faster)."""
        return self.base.median_s / self.other.median_s

    @property
    def min_speedup(self) -> float:
        """Return base fastest repeat / other fastest repeat (> 1: `other` is faster)."""
        return self.base.min_s / self.other.min_s

    @property
    def outcome(self) -> str:
        """Return "faster", "slower" or "same": how `other` compares with `base`, given the spread."""
        if self.speedup >= self.factor and self.min_speedup >= _MIN_FACTOR:
            return "faster"
        if self.speedup <= 1 / self.factor and self.min_speedup <= 1 / _MIN_FACTOR:
            return "slower"
        return "same"

    def notes(self) -> list[str]:
        """Return "label: what looks noisy" for each measurement whose repeats disagree (bench's noise rule)."""
        return [f"{t.label or 'số đo'}: {sign}" for t in (self.base, self.other)
                for sign in noise_signs(t.times_s, None)]

    def __str__(self) -> str:
        s, notes = self.speedup, self.notes()
        who = f"{self.other.label or 'B'} so với {self.base.label or 'A'}"
        unsure = " (chưa chắc: số đo nhiễu, xem dòng ⚠️ ở trên)" if notes else ""
        if self.outcome == "faster":
            return f"{who}: nhanh hơn {s:.2f}×{unsure}"
        if self.outcome == "slower":
            return f"{who}: chậm hơn {1 / s:.2f}× (tỉ lệ {s:.2f}×){unsure}"
        if s >= self.factor or s <= 1 / self.factor:   # the medians differ, the fastest repeats do not
            return (f"{who}: ngang nhau (trung vị {s:.2f}× nhưng lần nhanh nhất {self.min_speedup:.2f}×: "
                    "trung vị lệch vì máy bận, chưa phân biệt được với nhiễu đo)")
        return (f"{who}: ngang nhau ({s:.2f}×; chênh dưới {self.factor:.3g}× thì chưa phân biệt được "
                f"với nhiễu đo)")


def compare_timings(base: Timing, other: Timing) -> TimingComparison:
    """Compare two ``bench.measure`` timings of the same work: faster, slower or the same, by their spread."""
    for name, value in (("base", base), ("other", other)):
        if not isinstance(value, Timing):
            raise TypeError(f"{name} phải là kết quả của bench.measure (một Timing), "
                            f"không phải {type(value).__name__}")
    spread = max(t.median_s / t.min_s if t.min_s > 0 else float("inf") for t in (base, other))
    return TimingComparison(base, other, max(_MIN_FACTOR, spread))

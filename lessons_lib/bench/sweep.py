"""Sweep matmul sizes N under a time budget and the free memory, into a `SweepResult`."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch

from ..flops import matmul_flops
from ..i18n import tr
from ._checks import _check_positive_int, _check_positive_number
from .devices import cpu_threads, resolve_device, synchronize
from .dtypes import _SHORT, resolve_dtype
from .matmul import _assert_correct, make_matmul_inputs
from .memory_fit import fits_in_memory
from .noise import SLOW_LIMIT, SPREAD_LIMIT, noise_line
from .timing import Timing, measure
from .units import format_flops, format_seconds

DEFAULT_SIZES: tuple[int, ...] = (
    16, 32, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384,
)
DEFAULT_BUDGET_S = {"cpu": 20.0, "accelerator": 30.0}
_SAFETY = 1.25  # predicted cost of the next size is multiplied by this before comparing with the budget
MODEL_LIMIT = 10.0  # a size slower than this × (fixed cost + FLOPs at the best speed measured) is off the trend


@dataclass(frozen=True)
class MatmulRecord:
    """One size of a sweep: N, its checked relative error and its ``Timing``."""

    n: int
    timing: Timing
    rel_error: float

    @property
    def seconds(self) -> float:
        """Median seconds per matmul."""
        return self.timing.median_s

    @property
    def tflops(self) -> float:
        """Achieved TFLOP/s (2·N³ / median time)."""
        return matmul_flops(self.n) / self.seconds / 1e12


_STOP_REASONS = {
    "all_sizes": ("đã đo hết các kích thước", "measured every size"),
    "budget": ("kích thước tiếp theo sẽ vượt ngân sách thời gian", "the next size would exceed the time budget"),
    "memory": ("kích thước tiếp theo không vừa bộ nhớ còn trống", "the next size does not fit in free memory"),
}


@dataclass
class SweepResult:
    """A matmul sweep: one ``MatmulRecord`` per size, and how and why it stopped."""

    device: str
    dtype: str
    threads: int
    budget_s: float
    wall_s: float
    stop_reason: str
    next_size: int | None
    records: list[MatmulRecord] = field(default_factory=list)
    device_name: str = ""
    notes: list[str] = field(default_factory=list)

    def _noise_signs(self) -> tuple[dict[int, float], dict[int, float]]:
        off = {r.n: f for r, f in ((r, _off_trend(self.records, i)) for i, r in enumerate(self.records)) if f}
        spread = {r.n: r.timing.max_s / r.timing.min_s for r in self.records
                  if r.timing.max_s > SPREAD_LIMIT * r.timing.min_s}
        return off, spread

    @property
    def noisy_sizes(self) -> list[int]:
        """The sizes N that ``noise`` names (repeats far apart, or far off the trend), increasing."""
        off, spread = self._noise_signs()
        return sorted(set(off) | set(spread))

    @property
    def noise(self) -> str | None:
        """One "⚠️ số đo nhiễu" line naming the sizes that look noisy, or None.

        A size looks noisy when its slowest repeat takes more than 2× its fastest, or when it is far off
        what the other sizes predict (``_off_trend``): slower than 3× a larger size, or slower than 10× the
        sweep's fixed cost (the fastest time measured) plus its FLOPs at the best speed measured.
        """
        off, spread = self._noise_signs()
        seen = []
        if off:
            seen.append(f"N={', '.join(map(str, off))} chậm hơn hẳn mức các kích thước khác cho phép dự kiến "
                        f"(đến {max(off.values()):,.0f}×)")
        if spread:
            seen.append(f"ở N={', '.join(map(str, spread))} lần đo chậm nhất gấp đến {max(spread.values()):.1f}× "
                        "lần nhanh nhất")
        return noise_line(seen)

    @property
    def sizes(self) -> list[int]:
        """The sizes N that were measured, increasing."""
        return [r.n for r in self.records]

    @property
    def seconds(self) -> list[float]:
        """Median seconds per matmul, one per size."""
        return [r.seconds for r in self.records]

    @property
    def tflops(self) -> list[float]:
        """Achieved TFLOP/s, one per size."""
        return [r.tflops for r in self.records]

    @property
    def is_cpu(self) -> bool:
        """Whether the sweep ran on the CPU."""
        return self.device.startswith("cpu")

    @property
    def label(self) -> str:
        """A legend label: device, dtype and threads (CPU) or GPU name."""
        if self.is_cpu:
            return f"CPU {self.dtype} · {self.threads} " + tr("luồng", "threads")
        name = f" · {self.device_name}" if self.device_name else ""
        return f"{self.device} {self.dtype}{name}"

    def time_at(self, n: int) -> float | None:
        """Return the median seconds measured at size `n`, or None if `n` was not measured."""
        for record in self.records:
            if record.n == n:
                return record.seconds
        return None

    def stop_message(self) -> str:
        """Return why the sweep stopped, in words."""
        vi, en = _STOP_REASONS[self.stop_reason]
        text = tr(vi, en)
        if self.next_size is not None and self.stop_reason != "all_sizes":
            text += f" (N={self.next_size})"
        return text

    def __str__(self) -> str:
        lines = [
            tr(f"Quét matmul {self.label}: {len(self.records)} kích thước, {self.wall_s:.1f} s / ngân sách "
               f"{self.budget_s:g} s; dừng vì {self.stop_message()}.",
               f"Matmul sweep {self.label}: {len(self.records)} sizes, {self.wall_s:.1f} s / budget "
               f"{self.budget_s:g} s; stopped because {self.stop_message()}."),
            f"{'N':>6}  {tr('thời gian (trung vị)', 'time (median)'):>20}  {tr('tốc độ', 'speed'):>13}  "
            + tr("sai số tương đối", "relative error"),
        ]
        for r in self.records:
            lines.append(f"{r.n:>6}  {format_seconds(r.seconds):>20}  {format_flops(r.tflops * 1e12):>13}  "
                         f"{r.rel_error:.1e}")
        lines.extend(self.notes)
        if self.noise:
            lines.append(self.noise)
        if self.records:
            t = self.records[-1].timing
            where = f"{self.device}, {self.threads} " + tr("luồng", "threads") if self.is_cpu else (
                f"{self.device}, " + tr("có synchronize", "synchronized"))
            lines.append(tr(
                f"Điều kiện: {where} · warm-up {t.warmup} · trung vị của {t.repeats} lần đo, mỗi lần k lời gọi "
                "liên tiếp (k tự chọn để một lần đo ≥ 2 ms).",
                f"Conditions: {where} · warm-up {t.warmup} · median of {t.repeats} repeats of k back-to-back "
                "calls each (k chosen so one repeat takes ≥ 2 ms)."))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(str(self))


def default_budget_s(device: str | torch.device) -> float:
    """Return the default sweep budget: 20 s on the CPU, 30 s on an accelerator."""
    dev = resolve_device(device)
    return DEFAULT_BUDGET_S["cpu" if dev.type == "cpu" else "accelerator"]


def _device_name(dev: torch.device) -> str:
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev.index if dev.index is not None else torch.cuda.current_device())
    if dev.type == "mps":
        return "Apple MPS"
    return ""


def matmul_sweep(
    device: str | torch.device | None = None,
    dtype: torch.dtype | str = torch.float32,
    *,
    sizes: Iterable[int] | None = None,
    budget_s: float | None = None,
    repeats: int = 3,
    warmup: int = 1,
    threads: int | None = None,
    progress: bool = False,
) -> SweepResult:
    """Time N×N matmuls for growing N until the time budget or the free memory says stop.

    Before each size the sweep predicts its cost from the last measured size (time ∝ N³, creating the
    inputs ∝ N²; but at most 2× the larger of the last time and the FLOPs at the best speed so far, so a
    size stalled by a busy machine does not end the sweep early), and stops growing N when that prediction would overrun `budget_s`, or when the
    inputs and result would not fit in the device's free memory (checked before allocating). Every
    size is checked for correctness (``matmul_error``) before it is timed, and a size that turns out
    slower than predicted gets fewer repeats (``measure``'s ``max_time_s`` = the budget left).

    Args:
        device: "cpu", "cuda", "mps", ... (None: the best device here, see ``pick_device``).
        dtype: torch.float32 / torch.float16 / torch.bfloat16 (or "fp32", "fp16", "bf16").
        sizes: Increasing sizes to try (default ``DEFAULT_SIZES``, 16 … 16384).
        budget_s: Wall-time budget of the whole sweep in seconds (default 20 on CPU, 30 on a GPU).
        repeats: Timed repeats per size (median reported).
        warmup: Untimed calls per size before timing.
        threads: CPU threads (None: all, see ``cpu_threads()``).
        progress: Print one line per size as it is measured.

    Returns:
        A ``SweepResult``; its records feed ``lessons_lib.plots`` (time, speedup, TFLOP/s).
    """
    dev = resolve_device(device)
    dt = resolve_dtype(dtype)
    size_list = _check_sizes(DEFAULT_SIZES if sizes is None else sizes)
    budget = default_budget_s(dev) if budget_s is None else budget_s
    _check_positive_number("budget_s", budget)
    _check_positive_int("repeats", repeats)
    _check_positive_int("warmup", warmup, minimum=0)
    if threads is not None:
        _check_positive_int("threads", threads)
    n_threads = cpu_threads() if threads is None else threads
    min_block_s = 0.002

    start = time.perf_counter()
    records: list[MatmulRecord] = []
    stop, next_size = "all_sizes", None
    last = None  # (n, seconds per call, seconds to create the inputs)
    best_rate = 0.0  # the best FLOP/s measured so far
    for n in size_list:
        if not fits_in_memory(n, dev, dt):
            stop, next_size = "memory", n
            break
        elapsed = time.perf_counter() - start
        if last is not None:
            ratio = n / last[0]
            # N³ from the last size, unless that size was stalled (a busy machine can add a fixed wait to
            # every call): then at most 2× (the last time, or this size's FLOPs at the best speed so far).
            call = min(last[1] * ratio**3, 2 * max(last[1], matmul_flops(n) / best_rate))
            # create inputs (∝ N²) + correctness check + warm-up calls (∝ N³) + timed repeats
            predicted = last[2] * ratio**2 + (1 + max(warmup, 1)) * call + repeats * max(call, min_block_s)
            if elapsed + _SAFETY * predicted > budget:
                stop, next_size = "budget", n
                break
        create_start = time.perf_counter()
        a, b = make_matmul_inputs(n, dev, dt)
        synchronize(dev)
        create = time.perf_counter() - create_start
        error = _assert_correct(a, b, a @ b, dt, dev)
        remaining = budget - (time.perf_counter() - start)
        timing = measure(lambda a=a, b=b: a @ b, device=dev, repeats=repeats, warmup=warmup, threads=n_threads,
                         flops=matmul_flops(n), label=f"matmul {n}×{n} {_SHORT[dt]}", min_block_s=min_block_s,
                         max_time_s=max(remaining, min_block_s), warn=False)
        del a, b
        records.append(MatmulRecord(n=n, timing=timing, rel_error=error))
        last = (n, timing.median_s, create)
        best_rate = max(best_rate, matmul_flops(n) / timing.median_s)
        if progress:
            print(f"  N={n:>6}: {format_seconds(timing.median_s)} · {format_flops(matmul_flops(n) / timing.median_s)}",
                  flush=True)
    notes = _remeasure_outliers(records, dev, dt, n_threads, repeats, warmup, min_block_s,
                                max(budget - (time.perf_counter() - start), 0.1 * budget))
    if dev.type == "cuda":
        torch.cuda.empty_cache()  # give the sweep's cached blocks back to the other cells
    return SweepResult(device=str(dev), dtype=_SHORT[dt], threads=n_threads, budget_s=float(budget),
                       wall_s=time.perf_counter() - start, stop_reason=stop, next_size=next_size,
                       records=records, device_name=_device_name(dev), notes=notes)


def _off_trend(records: list[MatmulRecord], i: int) -> float | None:
    """Return how many times slower size i is than the other sizes predict, when far off; else None.

    Three predictions, each generous: a smaller matmul should not take more than 3× a larger one; the
    largest size should not take more than 3× the one before it scaled as N³; and no size should take more
    than 10× (the fastest time in the sweep, a fixed cost per call) + (its FLOPs at the best FLOP/s measured).
    """
    record = records[i]
    factors = []
    larger = [r.seconds for r in records[i + 1:]]
    if larger and record.seconds > SLOW_LIMIT * min(larger):
        factors.append(record.seconds / min(larger))
    if not larger and i > 0:
        before = records[i - 1]
        scaled = before.seconds * (record.n / before.n) ** 3
        if record.seconds > SLOW_LIMIT * scaled:
            factors.append(record.seconds / scaled)
    fixed = min(r.timing.min_s for r in records)
    best_rate = max(matmul_flops(r.n) / r.seconds for r in records)
    model = fixed + matmul_flops(record.n) / best_rate
    if record.seconds > MODEL_LIMIT * model:
        factors.append(record.seconds / model)
    return max(factors) if factors else None


def _looks_noisy(records: list[MatmulRecord], i: int) -> bool:
    timing = records[i].timing
    return timing.max_s > SPREAD_LIMIT * timing.min_s or _off_trend(records, i) is not None


def _remeasure_outliers(records: list[MatmulRecord], dev: torch.device, dt: torch.dtype, threads: int,
                        repeats: int, warmup: int, min_block_s: float, time_left_s: float) -> list[str]:
    """Measure again, once, each size that looks noisy; keep the faster of the two medians; return notes.

    Interference from other work only ever adds time, so of two honest measurements the faster one is the
    closer to what this machine does undisturbed. The re-measurements share `time_left_s`.
    """
    again_seen, skipped = [], []
    deadline = time.perf_counter() + time_left_s
    for i, record in enumerate(records):
        if not _looks_noisy(records, i):
            continue
        left = deadline - time.perf_counter()
        if (warmup + repeats) * record.timing.min_s > left:
            skipped.append(f"N={record.n}")
            continue
        a, b = make_matmul_inputs(record.n, dev, dt)
        again = measure(lambda a=a, b=b: a @ b, device=dev, repeats=repeats, warmup=warmup, threads=threads,
                        flops=record.timing.flops, label=record.timing.label, min_block_s=min_block_s,
                        max_time_s=max(left, min_block_s), warn=False)
        del a, b
        again_seen.append(f"N={record.n} {format_seconds(record.seconds)} → {format_seconds(again.median_s)}")
        if again.median_s < record.seconds:
            records[i] = dataclasses.replace(record, timing=again)
    notes = []
    if again_seen:
        notes.append(f"Đo lại {len(again_seen)} kích thước trông nhiễu (lần đầu → lần hai: {', '.join(again_seen)}); "
                     "bảng giữ số nhanh hơn, vì việc khác chen vào chỉ làm chậm đi.")
    if skipped:
        notes.append(f"Không còn thời gian trong ngân sách để đo lại {', '.join(skipped)}.")
    return notes


def _check_sizes(sizes) -> list[int]:
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Iterable):
        raise TypeError(
            tr(f"sizes phải là danh sách số nguyên dương tăng dần, vd [64, 256, 1024], không phải {type(sizes).__name__}",
               f"sizes must be a list of increasing positive ints, e.g. [64, 256, 1024], not {type(sizes).__name__}")
        )
    values = list(sizes)
    if not values:
        raise ValueError(tr("sizes không được rỗng", "sizes must not be empty"))
    for value in values:
        _check_positive_int("N", value)
    if any(b <= a for a, b in zip(values[:-1], values[1:], strict=True)):
        raise ValueError(
            tr(f"sizes phải tăng dần nghiêm ngặt, nhận được {values}", f"sizes must be strictly increasing, got {values}")
        )
    return values

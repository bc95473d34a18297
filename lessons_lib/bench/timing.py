"""Time a function correctly (warm-up, synchronize, median of repeats) into a `Timing`."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..i18n import tr
from ._checks import _check_positive_int, _check_positive_number
from .devices import cpu_threads, resolve_device, synchronize
from .noise import noise_warning
from .units import format_flops, format_seconds


@dataclass(frozen=True)
class Timing:
    """The result of one measurement: seconds per call for each repeat, and the conditions it ran under.

    Attributes:
        times_s: Seconds per call, one value per repeat (each repeat times `number` calls in a row).
        device: The device that was synchronized, e.g. "cpu", "cuda:0", "mps".
        threads: CPU threads PyTorch was set to during the measurement.
        warmup: Untimed calls made before timing.
        number: Calls per repeat.
        flops: Floating-point operations of one call, when known (gives FLOP/s).
        label: What was timed, e.g. "matmul 1024×1024 fp32".
        expected_s: Seconds per call the caller predicted, when known (checked by `noise`).
    """

    times_s: tuple[float, ...]
    device: str
    threads: int
    warmup: int
    number: int
    flops: float | None = None
    label: str = ""
    expected_s: float | None = None

    @property
    def noise(self) -> str | None:
        """The "⚠️ số đo nhiễu" line when the repeats disagree or the median is far above `expected_s`, else None."""
        return noise_warning(self.times_s, expected_s=self.expected_s)

    @property
    def median_s(self) -> float:
        """Median seconds per call over the repeats."""
        return statistics.median(self.times_s)

    @property
    def min_s(self) -> float:
        """Fastest repeat, seconds per call."""
        return min(self.times_s)

    @property
    def max_s(self) -> float:
        """Slowest repeat, seconds per call."""
        return max(self.times_s)

    @property
    def repeats(self) -> int:
        """How many repeats were timed."""
        return len(self.times_s)

    @property
    def flops_per_s(self) -> float | None:
        """Achieved FLOP/s at the median time, or None when `flops` is unknown."""
        return None if self.flops is None else self.flops / self.median_s

    @property
    def tflops(self) -> float | None:
        """Achieved TFLOP/s at the median time, or None when `flops` is unknown."""
        rate = self.flops_per_s
        return None if rate is None else rate / 1e12

    def percent_of_peak(self, peak_tflops: float | None) -> float | None:
        """Return the achieved speed as % of a documented peak (None when either is unknown)."""
        if peak_tflops is None or self.tflops is None:
            return None
        _check_positive_number("peak_tflops", peak_tflops)
        return 100.0 * self.tflops / peak_tflops

    def conditions(self) -> str:
        """Return the measurement conditions in one phrase (device, threads, warm-up, sync, repeats)."""
        dev = torch.device(self.device)
        where = (f"{self.device}, {self.threads} " + tr("luồng", "threads")) if dev.type == "cpu" else (
            f"{self.device}, " + tr("có synchronize", "synchronized"))
        return (
            f"{where} · warm-up {self.warmup} · "
            + tr(f"trung vị của {self.repeats} lần × {self.number} lời gọi",
                 f"median of {self.repeats} repeats × {self.number} calls")
        )

    def __str__(self) -> str:
        head = f"{self.label}: " if self.label else ""
        text = (
            f"{head}{format_seconds(self.median_s)} "
            + tr("(min ", "(min ")
            + f"{format_seconds(self.min_s)} · max {format_seconds(self.max_s)}) · {self.conditions()}"
        )
        if self.flops_per_s is not None:
            text += f" · {format_flops(self.flops_per_s)}"
        return text

    def __repr__(self) -> str:
        return f"Timing({self})"

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(str(self))


def _timed_block(fn: Callable[[], object], number: int, device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    for _ in range(number):
        fn()
    synchronize(device)
    return time.perf_counter() - start


def measure(
    fn: Callable[[], object],
    *,
    device: str | torch.device,
    repeats: int = 5,
    warmup: int = 2,
    number: int | None = None,
    threads: int | None = None,
    flops: float | None = None,
    label: str = "",
    min_block_s: float = 0.002,
    max_time_s: float | None = None,
    expected_s: float | None = None,
    warn: bool = True,
) -> Timing:
    """Time `fn()` correctly on `device`: warm-up, synchronize, median of repeats, all CPU threads.

    Args:
        fn: A function without arguments doing the work, e.g. ``lambda: a @ b``.
        device: Where the work runs ("cpu", "cuda", "cuda:1", "mps"); that device is synchronized
            before and after each timed block, so queued GPU work is counted.
        repeats: Timed blocks; the median is reported.
        warmup: Untimed calls first.
        number: Calls per timed block; None picks enough calls for a block of at least `min_block_s`
            (so the clock and the synchronize cost are negligible for tiny operations).
        threads: CPU threads for PyTorch during the measurement (None: every CPU this process may use,
            see ``cpu_threads()``). The previous setting is restored afterwards.
        flops: Floating-point operations of one call, to report FLOP/s.
        label: What is being timed, shown in the result.
        min_block_s: Smallest duration of a timed block when `number` is None.
        max_time_s: Optional time limit for slow operations: the first call (a warm-up call) is timed,
            and fewer warm-up calls and repeats are made when the planned ones would not fit in the limit
            (at least that first call and one timed repeat always run).
        expected_s: Seconds per call the work should take here (e.g. from its FLOPs or bytes), to notice a
            median far above it (see ``noise_warning``).
        warn: Print the "⚠️ số đo nhiễu" line when the result looks noisy (``Timing.noise``); helpers that
            report several timings together pass False and show the line in their own result.

    Returns:
        A ``Timing`` (seconds per call for every repeat, and the conditions).

    Raises:
        TypeError / ValueError: an argument has the wrong type or value (the message says what to pass).
    """
    if not callable(fn):
        raise TypeError(
            tr(f"fn phải là một hàm không đối số, vd lambda: a @ b, không phải {type(fn).__name__}",
               f"fn must be a function without arguments, e.g. lambda: a @ b, not {type(fn).__name__}")
        )
    dev = resolve_device(device)
    _check_positive_int("repeats", repeats)
    _check_positive_int("warmup", warmup, minimum=0)
    if number is not None:
        _check_positive_int("number", number)
    if threads is not None:
        _check_positive_int("threads", threads)
    if flops is not None:
        _check_positive_number("flops", flops)
    if not isinstance(label, str):
        raise TypeError(f"label must be a str, got {type(label).__name__}")
    _check_positive_number("min_block_s", min_block_s)
    if max_time_s is not None:
        _check_positive_number("max_time_s", max_time_s)
    if expected_s is not None:
        _check_positive_number("expected_s", expected_s)
    if not isinstance(warn, bool):
        raise TypeError(f"warn phải là True hoặc False, không phải {type(warn).__name__}")

    n_threads = cpu_threads() if threads is None else threads
    previous = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        extra_warmup, warmup_done = warmup, warmup
        if max_time_s is not None:
            # The first call (untimed for the result) tells how many calls fit in the limit.
            first = _timed_block(fn, 1, dev)
            per_block = number or (1 if first >= min_block_s else math.ceil(min_block_s / max(first, 1e-9)))
            number = per_block
            calls_left = max(0, int(max_time_s / max(first, 1e-9)) - 1)
            repeats = max(1, min(repeats, calls_left // per_block))
            extra_warmup = max(0, min(warmup - 1, calls_left - repeats * per_block))
            warmup_done = 1 + extra_warmup
        once = None
        for i in range(extra_warmup):
            if number is None and i == extra_warmup - 1:
                once = _timed_block(fn, 1, dev)  # the last warm-up call also sizes the blocks
            else:
                fn()
        synchronize(dev)
        if number is None:
            # The fastest of up to three single calls sets the block size, so one hiccup cannot shrink it.
            if once is None:
                once = _timed_block(fn, 1, dev)
            if once < min_block_s:
                once = min(once, _timed_block(fn, 1, dev), _timed_block(fn, 1, dev))
            number = 1 if once >= min_block_s else min(100_000, math.ceil(min_block_s / max(once, 1e-9)))
        times = tuple(_timed_block(fn, number, dev) / number for _ in range(repeats))
    finally:
        torch.set_num_threads(previous)
    timing = Timing(times_s=times, device=str(dev), threads=n_threads, warmup=warmup_done, number=number,
                    flops=None if flops is None else float(flops), label=label,
                    expected_s=None if expected_s is None else float(expected_s))
    if warn and timing.noise:
        print(timing.noise, flush=True)
    return timing

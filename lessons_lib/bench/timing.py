"""Time a function correctly (warm-up, synchronize, median of repeats) and flag repeats that disagree."""

from __future__ import annotations

import math
import os
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from .._validate import check_int, check_number
from ..device import pick_device
from ..display import Printable
from ..platforms import detect_platform

SPREAD_LIMIT = 2.0  # slowest repeat / fastest repeat above this: the repeats disagree
SLOW_LIMIT = 3.0  # median / predicted time above this: something else slowed the work down
MIN_BLOCK_S = 0.002  # a timed block lasts this long at least: the clock's and synchronize's cost vanish
_HISTORY_MARGIN = 1.5  # expected time from history = this × (FLOPs at the best speed measured so far)
_HISTORY_SIZE = 1.25  # only earlier calls with at most this × the FLOPs count (bigger work often runs faster)
# Best speed measured in this process, per (device, threads, kind of work): [(flops of one call, FLOP/s), ...].
# Interference only ever slows work down, so the fastest repeat of an earlier, equal or smaller, call of the same
# kind is a floor for what the machine can do; a later median far above it was stalled as a whole.
_BEST_RATES: dict[tuple[str, int, str], list[tuple[float, float]]] = {}


def cpu_threads() -> int:
    """Return how many CPUs this process may run on, at most ``OMP_NUM_THREADS`` when set: "all threads" here."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS, Windows
        cpus = os.cpu_count() or 1
    asked = os.environ.get("OMP_NUM_THREADS", "")
    return min(cpus, int(asked)) if asked.isdigit() and int(asked) > 0 else cpus


def synchronize(device: str | torch.device) -> None:
    """Wait until every queued operation on `device` has finished (nothing to wait for on the CPU)."""
    dev = torch.device(device)
    backend = getattr(torch, dev.type, None)  # torch.cuda, torch.mps, torch.xpu
    if dev.type != "cpu" and hasattr(backend, "synchronize"):
        backend.synchronize(*([dev] if dev.type == "cuda" else []))


def check_run(repeats: int, warmup: int, threads: int | None = None,
              max_time_s: float | None = None) -> None:
    """Check the measurement settings the public functions share."""
    check_int("repeats", repeats, 1)
    check_int("warmup", warmup, 0)
    if threads is not None:
        check_int("threads", threads, 1)
    if max_time_s is not None:
        check_number("max_time_s", max_time_s, positive=True)


def _with_unit(value: float, units: tuple[tuple[str, float], ...]) -> str:
    """Return `value` in the first (largest) unit it reaches, else the last one, with three digits."""
    unit, scale = next(((u, s) for u, s in units if value >= s), units[-1])
    x = value / scale
    return f"{x:.0f} {unit}" if x >= 100 else f"{x:.1f} {unit}" if x >= 10 else f"{x:.2f} {unit}"


def format_seconds(seconds: float) -> str:
    """Return a duration with a readable unit: "850 ns", "12.3 µs", "4.56 ms", "1.23 s"."""
    check_number("seconds", seconds, 0)
    return _with_unit(seconds, (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)))


def format_count(value: float, digits: int = 0) -> str:
    """Return a number as the course writes it: decimal point, thousands grouped by a space ("2 185", "1 857.5")."""
    check_number("value", value)
    return f"{value:,.{digits}f}".replace(",", " ")


def format_flops(flops_per_s: float) -> str:
    """Return a speed in FLOP/s with a readable unit: "925 kFLOP/s", "139 GFLOP/s", "4.20 TFLOP/s"."""
    return _with_unit(flops_per_s, (("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6), ("kFLOP/s", 1e3),
                                    ("FLOP/s", 1.0)))


def noise_warning(times_s: Sequence[float], *, expected_s: float | None = None) -> str | None:
    """Return a "⚠️ số đo nhiễu" line when repeats are not trustworthy, else None."""
    if isinstance(times_s, (str, bytes)) or not isinstance(times_s, Sequence):
        raise TypeError("times_s phải là danh sách (list/tuple) số giây của từng lần đo, "
                        f"vd [0.012, 0.011, 0.013], không phải {type(times_s).__name__}")
    if len(times_s) == 0:
        raise ValueError("times_s không được rỗng: cần ít nhất một lần đo")
    for value in times_s:
        check_number("times_s[i]", value, positive=True)
    if expected_s is not None:
        check_number("expected_s", expected_s, positive=True)
    return noise_line(noise_signs([float(t) for t in times_s], expected_s, basis=""))


def noise_signs(times: Sequence[float], expected_s: float | None,
                basis: str = "(từ tốc độ tốt nhất đã đo trong phiên này)") -> list[str]:
    """Return what looks noisy in one measurement's repeats, as phrases; `basis` says where `expected_s` is from."""
    seen = []
    fastest, slowest = min(times), max(times)
    median = statistics.median(times)
    if len(times) > 1 and slowest > SPREAD_LIMIT * fastest:
        seen.append(f"lần chậm nhất gấp {slowest / fastest:.1f}× lần nhanh nhất ({format_seconds(slowest)} "
                    f"so với {format_seconds(fastest)}, {len(times)} lần đo)")
        if median > SPREAD_LIMIT * fastest:
            seen.append(f"cả trung vị cũng gấp {median / fastest:.1f}× lần nhanh nhất: phần lớn các lần đo bị chậm, "
                        "hãy đọc min hoặc đo lại")
    if expected_s is not None and median > SLOW_LIMIT * expected_s:
        seen.append(f"trung vị {format_seconds(median)} gấp {median / expected_s:.1f}× mức dự kiến "
                    f"{format_seconds(expected_s)}{' ' + basis if basis else ''}: máy chậm suốt lúc đo, số này "
                    "không nói được tốc độ thật")
    return seen


def noise_line(seen: Sequence[str]) -> str | None:
    """Return the "⚠️ số đo nhiễu" line for the phrases seen, with what to do; None when nothing was seen."""
    if not seen:
        return None
    advice = "chạy lại ô khi máy rảnh, hoặc tăng số lần lặp (repeats=)"
    if detect_platform() in ("colab", "kaggle"):
        advice += ("; trên CPU miễn phí của Colab/Kaggle (2 vCPU trên một máy chủ dùng chung) "
                   "nhiễu này hay gặp")
    return f"⚠️ số đo nhiễu (máy bận?): {'; '.join(seen)}. Nên {advice}."


@dataclass(frozen=True, repr=False)
class Timing(Printable):
    """One measurement: seconds per call for each repeat, and the conditions it ran under."""

    times_s: tuple[float, ...]
    device: str
    threads: int
    warmup: int
    number: int
    flops: float | None = None
    label: str = ""
    expected_s: float | None = None  # seconds per call the work should take here, from the best speed measured

    @property
    def noise(self) -> str | None:
        """The "⚠️ số đo nhiễu" line when the repeats disagree or the median is far above `expected_s`, else None."""
        return noise_line(noise_signs(self.times_s, self.expected_s))

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    @property
    def min_s(self) -> float:
        return min(self.times_s)

    @property
    def max_s(self) -> float:
        return max(self.times_s)

    @property
    def repeats(self) -> int:
        return len(self.times_s)

    @property
    def flops_per_s(self) -> float | None:
        return None if self.flops is None else self.flops / self.median_s

    def conditions(self) -> str:
        """Return the measurement conditions in one phrase (device, threads, warm-up, sync, repeats)."""
        where = f"{self.threads} luồng" if self.device.startswith("cpu") else "có synchronize"
        return (f"{self.device}, {where} · warm-up {self.warmup} · "
                f"trung vị của {self.repeats} lần × {self.number} lời gọi")

    def __str__(self) -> str:
        head = f"{self.label}: " if self.label else ""
        text = (f"{head}{format_seconds(self.median_s)} (min {format_seconds(self.min_s)} · "
                f"max {format_seconds(self.max_s)}) · {self.conditions()}")
        if self.flops_per_s is not None:
            text += f" · {format_flops(self.flops_per_s)}"
        return text


def _timed_block(fn: Callable[[], object], number: int, device: torch.device) -> float:
    synchronize(device)
    start = time.perf_counter()
    for _ in range(number):
        fn()
    synchronize(device)
    return time.perf_counter() - start


def _timed_repeats(fn: Callable[[], object], dev: torch.device, repeats: int, warmup: int, number: int | None,
                   max_time_s: float | None) -> tuple[tuple[float, ...], int, int]:
    """Warm up, size the blocks and time them; return (seconds per call of each repeat, warm-up calls, number)."""
    extra_warmup, warmup_done = warmup, warmup
    if max_time_s is not None:
        # The first call (untimed for the result) tells how many calls fit in the limit.
        first = _timed_block(fn, 1, dev)
        number = number or (1 if first >= MIN_BLOCK_S else math.ceil(MIN_BLOCK_S / max(first, 1e-9)))
        calls_left = max(0, int(max_time_s / max(first, 1e-9)) - 1)
        repeats = max(1, min(repeats, calls_left // number))
        extra_warmup = max(0, min(warmup - 1, calls_left - repeats * number))
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
        if once < MIN_BLOCK_S:
            once = min(once, _timed_block(fn, 1, dev), _timed_block(fn, 1, dev))
        number = 1 if once >= MIN_BLOCK_S else min(100_000, math.ceil(MIN_BLOCK_S / max(once, 1e-9)))
    return tuple(_timed_block(fn, number, dev) / number for _ in range(repeats)), warmup_done, number


def _kind(label: str) -> str:
    """Return the kind of work a label names: the label without its numbers ("matmul 512 fp32" → "matmul fp32")."""
    return " ".join(re.sub(r"\b\d+(?:[×x]\d+)*\b", " ", label).split())


def _expected_from_history(dev: torch.device, threads: int, label: str, flops: float) -> float | None:
    """Return a conservative time for `flops` of this kind of work from the best speed measured so far, or None."""
    rates = [rate for f, rate in _BEST_RATES.get((str(dev), threads, _kind(label)), ()) if f <= _HISTORY_SIZE * flops]
    return _HISTORY_MARGIN * flops / max(rates) if rates else None


def _remember_rate(dev: torch.device, threads: int, label: str, flops: float, fastest_s: float) -> None:
    records = _BEST_RATES.setdefault((str(dev), threads, _kind(label)), [])
    rate = flops / fastest_s
    for i, (f, r) in enumerate(records):
        if f == flops:
            records[i] = (f, max(r, rate))
            return
    records.append((flops, rate))


def measure(fn: Callable[[], object], *, device: str | torch.device, repeats: int = 5, warmup: int = 2,
            number: int | None = None, threads: int | None = None, flops: float | None = None,
            label: str = "", max_time_s: float | None = None, warn: bool = True) -> Timing:
    """Time `fn()` on `device`: warm-up, synchronize around each timed block, median of repeats."""
    if not callable(fn):
        raise TypeError(f"fn phải là một hàm không đối số, vd lambda: a @ b, không phải {type(fn).__name__}")
    dev = pick_device(device)
    check_run(repeats, warmup, threads, max_time_s)
    if number is not None:
        check_int("number", number, 1)
    if flops is not None:
        check_number("flops", flops, positive=True)
    if not isinstance(label, str):
        raise TypeError(f"label phải là str, không phải {type(label).__name__}")
    if not isinstance(warn, bool):  # False: the caller shows the noise line itself, once
        raise TypeError(f"warn phải là True hoặc False, không phải {type(warn).__name__}")
    n_threads = cpu_threads() if threads is None else threads
    previous = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        times, warmup_done, number = _timed_repeats(fn, dev, repeats, warmup, number, max_time_s)
    finally:
        torch.set_num_threads(previous)
    expected_s = None
    if flops is not None:
        expected_s = _expected_from_history(dev, n_threads, label, float(flops))
        _remember_rate(dev, n_threads, label, float(flops), min(times))
    timing = Timing(times, str(dev), n_threads, warmup_done, number, None if flops is None else float(flops), label,
                    expected_s)
    if warn and timing.noise:
        print(timing.noise, flush=True)
    return timing

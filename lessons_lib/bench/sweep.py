"""Sweep matmul sizes N under a time budget and the free memory, and read two sweeps against each other."""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import torch

from .._validate import check_int, check_number
from ..device import pick_device
from ..display import Printable
from ..flops import matmul_flops
from ..precision import format_name, to_dtype
from .matmul import assert_correct, fits_in_memory, matmul_inputs, matmul_label
from .timing import (
    MIN_BLOCK_S,
    SLOW_LIMIT,
    SPREAD_LIMIT,
    Timing,
    check_run,
    cpu_threads,
    format_count,
    format_flops,
    format_seconds,
    measure,
    noise_line,
    synchronize,
)

_SIZES = (16, 32, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384)
_WARMUP = 1  # untimed calls per size
_SAFETY = 1.25  # predicted cost of the next size is multiplied by this before comparing with the budget
_MODEL_LIMIT = 10.0  # slower than this × (fixed cost + FLOPs at the best speed measured): off the trend
_STOP_REASONS = {"all_sizes": "đã đo hết các kích thước",
                 "budget": "kích thước tiếp theo sẽ vượt ngân sách thời gian",
                 "memory": "kích thước tiếp theo không vừa bộ nhớ còn trống"}


@dataclass(frozen=True)
class MatmulRecord:
    """One size of a sweep: N, its checked relative error and its ``Timing``."""

    n: int
    timing: Timing
    rel_error: float

    @property
    def seconds(self) -> float:
        return self.timing.median_s

    @property
    def tflops(self) -> float:
        return self.timing.flops_per_s / 1e12


@dataclass(repr=False)
class SweepResult(Printable):
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

    @property
    def noisy_sizes(self) -> list[int]:
        """The sizes N that ``noise`` names, increasing."""
        return sorted(set().union(*_noise_signs(self.records)))

    @property
    def noise(self) -> str | None:
        """One "⚠️ số đo nhiễu" line naming the sizes whose repeats disagree or that are far off the trend."""
        off, spread = _noise_signs(self.records)
        seen = []
        if off:
            seen.append(f"N={', '.join(map(str, off))} chậm hơn hẳn mức các kích thước khác cho phép dự kiến "
                        f"(đến {format_count(max(off.values()))}×)")
        if spread:
            seen.append(f"ở N={', '.join(map(str, spread))} lần đo chậm nhất gấp đến {max(spread.values()):.1f}× "
                        "lần nhanh nhất")
        return noise_line(seen)

    @property
    def best(self) -> MatmulRecord | None:
        """The fastest size (highest FLOP/s) among those the noise line does not name; None before any size."""
        noisy = set(self.noisy_sizes)
        clean = [r for r in self.records if r.n not in noisy] or self.records
        return max(clean, key=lambda r: r.tflops, default=None)

    @property
    def sizes(self) -> list[int]:
        return [r.n for r in self.records]

    @property
    def seconds(self) -> list[float]:
        return [r.seconds for r in self.records]

    @property
    def tflops(self) -> list[float]:
        return [r.tflops for r in self.records]

    @property
    def is_cpu(self) -> bool:
        return self.device.startswith("cpu")

    @property
    def label(self) -> str:
        """A legend label: device, dtype and threads (CPU) or GPU name."""
        if self.is_cpu:
            return f"CPU {self.dtype} · {self.threads} luồng"
        return f"{self.device} {self.dtype}" + (f" · {self.device_name}" if self.device_name else "")

    def time_at(self, n: int) -> float | None:
        """Return the median seconds measured at size `n`, or None if `n` was not measured."""
        return next((r.seconds for r in self.records if r.n == n), None)

    def __str__(self) -> str:
        stop = _STOP_REASONS[self.stop_reason]
        if self.next_size is not None and self.stop_reason != "all_sizes":
            stop += f" (N={self.next_size})"
        lines = [f"Quét matmul {self.label}: {len(self.records)} kích thước, {self.wall_s:.1f} s / ngân sách "
                 f"{self.budget_s:g} s; dừng vì {stop}.",
                 f"{'N':>6}  {'thời gian (trung vị)':>20}  {'tốc độ':>13}  sai số tương đối"]
        lines += [f"{r.n:>6}  {format_seconds(r.seconds):>20}  {format_flops(r.tflops * 1e12):>13}  "
                  f"{r.rel_error:.1e}" for r in self.records]
        lines += self.notes + ([self.noise] if self.noise else [])
        if self.records:
            t = self.records[-1].timing
            where = f"{self.device}, {self.threads} luồng" if self.is_cpu else f"{self.device}, có synchronize"
            lines.append(f"Điều kiện: {where} · warm-up {t.warmup} · trung vị của {t.repeats} lần đo, mỗi lần k "
                         "lời gọi liên tiếp (k tự chọn để một lần đo ≥ 2 ms).")
        return "\n".join(lines)


def matmul_sweep(device: str | torch.device | None = None, dtype: torch.dtype | str = torch.float32, *,
                 budget_s: float | None = None, repeats: int = 3, threads: int | None = None) -> SweepResult:
    """Time N×N matmuls for growing N until the time budget or the free memory says stop."""
    dev, dt = pick_device(device), to_dtype(dtype)
    budget = (20.0 if dev.type == "cpu" else 30.0) if budget_s is None else budget_s
    check_number("budget_s", budget, positive=True)
    check_run(repeats, _WARMUP, threads)
    n_threads = cpu_threads() if threads is None else threads

    start = time.perf_counter()
    records, stop, next_size = _time_sizes(dev, dt, budget, repeats, n_threads)
    notes = _remeasure_outliers(records, dev, dt, n_threads, repeats,
                                max(budget - (time.perf_counter() - start), 0.1 * budget))
    name = ""
    if dev.type == "cuda":
        torch.cuda.empty_cache()  # give the sweep's cached blocks back to the other cells
        name = torch.cuda.get_device_name(dev.index if dev.index is not None else torch.cuda.current_device())
    elif dev.type == "mps":
        name = "Apple MPS"
    return SweepResult(device=str(dev), dtype=format_name(dt), threads=n_threads, budget_s=float(budget),
                       wall_s=time.perf_counter() - start, stop_reason=stop, next_size=next_size,
                       records=records, device_name=name, notes=notes)


def _time_sizes(dev: torch.device, dt: torch.dtype, budget: float, repeats: int,
                threads: int) -> tuple[list[MatmulRecord], str, int | None]:
    """Check and time each size in turn until the budget or the memory says stop; return (records, why, next N)."""
    start = time.perf_counter()
    records: list[MatmulRecord] = []
    last = None  # (n, seconds per call, seconds to create the inputs)
    best_rate = 0.0  # the best FLOP/s measured so far
    for n in _SIZES:
        if not fits_in_memory(n, dev, dt):
            return records, "memory", n
        if last is not None:
            ratio = n / last[0]
            # N³ from the last size, unless that size was stalled (a busy machine can add a fixed wait to
            # every call): then at most 2× (the last time, or this size's FLOPs at the best speed so far).
            call = min(last[1] * ratio**3, 2 * max(last[1], matmul_flops(n) / best_rate))
            # create inputs (∝ N²) + correctness check + warm-up calls (∝ N³) + timed repeats
            predicted = last[2] * ratio**2 + (1 + _WARMUP) * call + repeats * max(call, MIN_BLOCK_S)
            if time.perf_counter() - start + _SAFETY * predicted > budget:
                return records, "budget", n
        create_start = time.perf_counter()
        a, b = matmul_inputs(n, dev, dt)
        synchronize(dev)
        create = time.perf_counter() - create_start
        error = assert_correct(a, b, a @ b, dt, dev)
        timing = _time_size(a, b, dev, dt, threads, repeats, budget - (time.perf_counter() - start))
        del a, b
        records.append(MatmulRecord(n=n, timing=timing, rel_error=error))
        last = (n, timing.median_s, create)
        best_rate = max(best_rate, timing.flops_per_s)
    return records, "all_sizes", None


def _time_size(a: torch.Tensor, b: torch.Tensor, dev: torch.device, dt: torch.dtype, threads: int, repeats: int,
               time_left_s: float) -> Timing:
    """Time ``a @ b`` for one size of the sweep within `time_left_s`, quietly (the sweep shows one noise line)."""
    n = a.shape[0]
    return measure(lambda: a @ b, device=dev, repeats=repeats, warmup=_WARMUP, threads=threads, flops=matmul_flops(n),
                   label=matmul_label(n, dt), max_time_s=max(time_left_s, MIN_BLOCK_S), warn=False)


def _off_trend(records: list[MatmulRecord], i: int) -> float | None:
    """Return how many times slower size i is than the other sizes predict, when far off; else None."""
    record = records[i]
    factors = []
    larger = [r.seconds for r in records[i + 1:]]
    if larger and record.seconds > SLOW_LIMIT * min(larger):
        factors.append(record.seconds / min(larger))
    if not larger and i > 0:
        scaled = records[i - 1].seconds * (record.n / records[i - 1].n) ** 3
        if record.seconds > SLOW_LIMIT * scaled:
            factors.append(record.seconds / scaled)
    fixed = min(r.timing.min_s for r in records)
    best_rate = max(r.timing.flops_per_s for r in records)
    model = fixed + matmul_flops(record.n) / best_rate
    if record.seconds > _MODEL_LIMIT * model:
        factors.append(record.seconds / model)
    return max(factors) if factors else None


def _noise_signs(records: list[MatmulRecord]) -> tuple[dict[int, float], dict[int, float]]:
    """Return the noisy-looking sizes: {N: times slower than the trend}, {N: slowest / fastest repeat}."""
    off = {r.n: f for i, r in enumerate(records) if (f := _off_trend(records, i))}
    spread = {r.n: r.timing.max_s / r.timing.min_s for r in records if r.timing.max_s > SPREAD_LIMIT * r.timing.min_s}
    return off, spread


def _remeasure_outliers(records: list[MatmulRecord], dev: torch.device, dt: torch.dtype, threads: int,
                        repeats: int, time_left_s: float) -> list[str]:
    """Measure each noisy-looking size once more within `time_left_s`, keep the faster median; return notes."""
    again_seen, skipped = [], []
    deadline = time.perf_counter() + time_left_s
    noisy = set().union(*_noise_signs(records))
    for i, record in enumerate(records):
        if record.n not in noisy:
            continue
        left = deadline - time.perf_counter()
        if (_WARMUP + repeats) * record.timing.min_s > left:
            skipped.append(f"N={record.n}")
            continue
        again = _time_size(*matmul_inputs(record.n, dev, dt), dev, dt, threads, repeats, left)
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


def _check_sweep(name: str, sweep) -> None:
    if not isinstance(sweep, SweepResult):
        raise TypeError(f"{name} phải là kết quả của bench.matmul_sweep(...), "
                        f"không phải {type(sweep).__name__}")


def speedups(baseline: SweepResult, other: SweepResult) -> list[tuple[int, float]]:
    """Return (N, baseline time / other time) for every N both sweeps measured (>1: `other` is faster)."""
    return [(r.n, base / r.seconds) for r in other.records if (base := baseline.time_at(r.n)) is not None]


@dataclass(frozen=True)
class Crossover:
    """Where `other` becomes faster than `baseline` for good."""

    status: str
    n: float | None
    message: str


def crossover(baseline: SweepResult, other: SweepResult) -> Crossover:
    """Return the size N from which `other` beats `baseline` at every larger N measured (interpolated)."""
    _check_sweep("baseline", baseline)
    _check_sweep("other", other)
    points = speedups(baseline, other)
    if not points:
        return Crossover("no_overlap", None, "Hai lần quét không có kích thước N chung.")
    first_good = len(points)
    while first_good > 0 and points[first_good - 1][1] >= 1.0:
        first_good -= 1
    if first_good == 0:
        return Crossover("always_faster", None,
                         f"{other.label} nhanh hơn {baseline.label} ở mọi N đã đo (từ N={points[0][0]}).")
    if first_good == len(points):
        return Crossover("never_faster", None,
                         f"{other.label} chưa nhanh hơn {baseline.label} ở N lớn nhất đo chung (N={points[-1][0]}).")
    (n0, s0), (n1, s1) = points[first_good - 1], points[first_good]
    frac = 1.0 if s1 == s0 else -math.log(s0) / (math.log(s1) - math.log(s0))
    n_star = math.exp(math.log(n0) + frac * (math.log(n1) - math.log(n0)))
    return Crossover("crosses", n_star,
                     f"{other.label} nhanh hơn {baseline.label} từ khoảng N≈{n_star:.0f} trở lên (đo được: chậm hơn "
                     f"ở N={n0}, nhanh hơn ở N={n1}).")


def estimate_seconds(sweep: SweepResult, n: int) -> float:
    """Return one N×N matmul's time: measured if the sweep has N, else scaled as N³ (an estimate: say so)."""
    _check_sweep("sweep", sweep)
    check_int("n", n, 1)
    if not sweep.records:
        raise ValueError("Lần quét này chưa đo kích thước nào.")
    measured = sweep.time_at(n)
    if measured is not None:
        return measured
    base = sweep.records[-1] if n > sweep.records[-1].n else min(sweep.records, key=lambda r: abs(r.n - n))
    return base.seconds * (n / base.n) ** 3

"""Time PyTorch work correctly on CPU, CUDA and MPS, and sweep matmul sizes under a time budget.

The rules every function here follows (and the notebooks teach):

* check the result before timing it (a fast wrong answer is worth nothing);
* warm up first (thread pools, cuBLAS handles, kernel loading and autotuning happen on the first calls);
* synchronize the accelerator before reading the clock (GPU work is queued asynchronously);
* repeat and report the median, with min and max so the spread is visible;
* on the CPU use every CPU this process may run on unless told otherwise, and say how many.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch

from .flops import matmul_flops  # noqa: F401  (re-exported: bench.matmul_flops)
from .i18n import tr

# --------------------------------------------------------------------------- small helpers

_DTYPES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
}
_SHORT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
# Largest relative error (Frobenius norm, against a float64 reference) that still counts as a correct matmul.
# fp32 allows TF32 (about 1e-3), in case the learner turned it on.
_TOLERANCE = {torch.float32: 2e-3, torch.float16: 1e-2, torch.bfloat16: 5e-2}
_ACCELERATORS = ("cuda", "mps", "xpu")

DEFAULT_SIZES: tuple[int, ...] = (
    16, 32, 64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384,
)
DEFAULT_BUDGET_S = {"cpu": 20.0, "accelerator": 30.0}
_SAFETY = 1.25  # predicted cost of the next size is multiplied by this before comparing with the budget


def resolve_dtype(dtype: torch.dtype | str) -> torch.dtype:
    """Return the torch dtype for float32 / float16 / bfloat16, given as a torch dtype or a name like "fp16"."""
    if isinstance(dtype, torch.dtype):
        if dtype in _SHORT:
            return dtype
        raise ValueError(
            tr(f"dtype phải là torch.float32, torch.float16 hoặc torch.bfloat16, không phải {dtype}",
               f"dtype must be torch.float32, torch.float16 or torch.bfloat16, not {dtype}")
        )
    if isinstance(dtype, str):
        key = dtype.strip().lower().removeprefix("torch.")
        if key in _DTYPES:
            return _DTYPES[key]
        raise ValueError(
            tr(f"Không biết dtype {dtype!r}; dùng 'float32', 'float16' hoặc 'bfloat16' (hoặc 'fp32', 'fp16', 'bf16').",
               f"Unknown dtype {dtype!r}; use 'float32', 'float16' or 'bfloat16' (or 'fp32', 'fp16', 'bf16').")
        )
    raise TypeError(
        tr(f"dtype phải là torch.dtype hoặc tên dạng str như 'fp16', không phải {type(dtype).__name__}",
           f"dtype must be a torch.dtype or a name such as 'fp16', not {type(dtype).__name__}")
    )


def dtype_label(dtype: torch.dtype | str) -> str:
    """Return the short name of a dtype: "fp32", "fp16" or "bf16"."""
    return _SHORT[resolve_dtype(dtype)]


def cpu_threads() -> int:
    """Return how many CPUs this process may run on: the "all threads" count used by default here."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS, Windows
        return os.cpu_count() or 1


def resolve_device(device: str | torch.device | None) -> torch.device:
    """Return `device` as a torch.device after checking that this machine has it (None: the best one here).

    Raises:
        TypeError: `device` is not a str, torch.device or None.
        ValueError: `device` is misspelt or this machine does not have it.
    """
    from .device import pick_device

    return pick_device(device)


def synchronize(device: str | torch.device) -> None:
    """Wait until every queued operation on `device` has finished (nothing to wait for on the CPU)."""
    dev = torch.device(device) if not isinstance(device, torch.device) else device
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        mps = getattr(torch, "mps", None)
        if mps is not None and hasattr(mps, "synchronize"):
            mps.synchronize()
    elif dev.type == "xpu":
        xpu = getattr(torch, "xpu", None)
        if xpu is not None and hasattr(xpu, "synchronize"):
            xpu.synchronize(dev)


def format_seconds(seconds: float) -> str:
    """Return a duration with a readable unit: "850 ns", "12.3 µs", "4.56 ms", "1.23 s"."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"seconds must be a number, got {type(seconds).__name__}")
    if seconds < 0 or math.isnan(seconds):
        raise ValueError(f"seconds must be >= 0, got {seconds}")
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{_three_digits(seconds / scale)} {unit}"
    return f"{_three_digits(seconds / 1e-9)} ns"


def format_flops(flops_per_s: float) -> str:
    """Return a speed in FLOP/s with a readable unit: "925 kFLOP/s", "139 GFLOP/s", "4.20 TFLOP/s"."""
    if isinstance(flops_per_s, bool) or not isinstance(flops_per_s, (int, float)):
        raise TypeError(f"flops_per_s must be a number, got {type(flops_per_s).__name__}")
    if flops_per_s < 0:
        raise ValueError(f"flops_per_s must be >= 0, got {flops_per_s}")
    for unit, scale in (("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6), ("kFLOP/s", 1e3)):
        if flops_per_s >= scale:
            return f"{_three_digits(flops_per_s / scale)} {unit}"
    return f"{_three_digits(flops_per_s)} FLOP/s"


def _three_digits(x: float) -> str:
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def _check_positive_int(name: str, value, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            tr(f"{name} phải là số nguyên (int), không phải {type(value).__name__}",
               f"{name} must be an int, not {type(value).__name__}")
        )
    if value < minimum:
        raise ValueError(
            tr(f"{name} phải ≥ {minimum}, nhận được {value}", f"{name} must be >= {minimum}, got {value}")
        )


def _check_positive_number(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            tr(f"{name} phải là một số (giây), không phải {type(value).__name__}",
               f"{name} must be a number (seconds), not {type(value).__name__}")
        )
    if not value > 0 or math.isinf(value):
        raise ValueError(
            tr(f"{name} phải là số dương hữu hạn, nhận được {value}",
               f"{name} must be a positive finite number, got {value}")
        )


# --------------------------------------------------------------------------- timing


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
    """

    times_s: tuple[float, ...]
    device: str
    threads: int
    warmup: int
    number: int
    flops: float | None = None
    label: str = ""

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
    return Timing(times_s=times, device=str(dev), threads=n_threads, warmup=warmup_done, number=number,
                  flops=None if flops is None else float(flops), label=label)


# --------------------------------------------------------------------------- matmul


def make_matmul_inputs(n: int, device: str | torch.device, dtype: torch.dtype | str = torch.float32,
                       seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Return two random N×N matrices created directly on `device` (no host copy), reproducibly seeded.

    The global random state is left untouched (a private generator is used).
    """
    _check_positive_int("n", n)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype)
    try:
        gen = torch.Generator(device=dev).manual_seed(seed)
        a = torch.randn(n, n, device=dev, dtype=dt, generator=gen)
        b = torch.randn(n, n, device=dev, dtype=dt, generator=gen)
    except (RuntimeError, TypeError):  # a backend without device generators or without randn in `dt`
        gen = torch.Generator().manual_seed(seed)
        a = torch.randn(n, n, generator=gen).to(device=dev, dtype=dt)
        b = torch.randn(n, n, generator=gen).to(device=dev, dtype=dt)
    return a, b


def matmul_error(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, samples: int = 8) -> float:
    """Return the relative error of ``c ≈ a @ b`` on a random block of rows × columns, against float64.

    Only `samples` rows and columns are recomputed in float64 on the CPU, so the check costs
    O(samples·N) however large N is. The reference uses the same (already rounded) inputs, so the
    error measures the matmul itself.
    """
    for name, t in (("a", a), ("b", b), ("c", c)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"{name} must be a 2-D matrix, got shape {tuple(t.shape)}")
    if a.shape[1] != b.shape[0] or c.shape != (a.shape[0], b.shape[1]):
        raise ValueError(f"shapes do not fit c = a @ b: a {tuple(a.shape)}, b {tuple(b.shape)}, c {tuple(c.shape)}")
    _check_positive_int("samples", samples)
    gen = torch.Generator().manual_seed(1234)
    rows = torch.randperm(a.shape[0], generator=gen)[:samples]
    cols = torch.randperm(b.shape[1], generator=gen)[:samples]
    ref = a[rows.to(a.device)].double().cpu() @ b[:, cols.to(b.device)].double().cpu()
    got = c[rows.to(c.device)][:, cols.to(c.device)].double().cpu()
    return float((got - ref).norm() / ref.norm().clamp_min(1e-300))


def matmul_tolerance(dtype: torch.dtype | str) -> float:
    """Return the largest relative error ``matmul_error`` accepts for `dtype` (fp32 allows TF32)."""
    return _TOLERANCE[resolve_dtype(dtype)]


def time_matmul(n: int, device: str | torch.device = "cpu", dtype: torch.dtype | str = torch.float32, *,
                repeats: int = 5, warmup: int = 2, threads: int | None = None,
                max_time_s: float | None = None) -> Timing:
    """Check, then time an N×N @ N×N matmul on `device` in `dtype`; return its ``Timing`` (with FLOP/s).

    Raises:
        RuntimeError: the result is wrong (relative error above ``matmul_tolerance(dtype)``).
    """
    dev = resolve_device(device)
    dt = resolve_dtype(dtype)
    a, b = make_matmul_inputs(n, dev, dt)
    _assert_correct(a, b, a @ b, dt, dev)
    return measure(lambda: a @ b, device=dev, repeats=repeats, warmup=warmup, threads=threads,
                   flops=matmul_flops(n), label=f"matmul {n}×{n} {_SHORT[dt]}", max_time_s=max_time_s)


def _assert_correct(a, b, c, dt, dev) -> float:
    error = matmul_error(a, b, c)
    if not error <= _TOLERANCE[dt]:
        raise RuntimeError(
            tr(f"Kết quả matmul trên {dev} sai (sai số tương đối {error:.2e} > {_TOLERANCE[dt]:.0e}): không đo tốc độ "
               "của một kết quả sai.",
               f"The matmul result on {dev} is wrong (relative error {error:.2e} > {_TOLERANCE[dt]:.0e}): "
               "not timing a wrong result.")
        )
    return error


# --------------------------------------------------------------------------- memory


def memory_available(device: str | torch.device) -> int | None:
    """Return the bytes that new tensors on `device` may still use, or None when it cannot be told.

    CUDA: free device memory plus what PyTorch's cache holds unused. CPU: the OS's available memory.
    MPS: the recommended working set minus what the driver holds (when this PyTorch reports it),
    else the OS's available memory (Apple GPUs share it).
    """
    dev = resolve_device(device)
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        free, _total = torch.cuda.mem_get_info(index)
        cached = torch.cuda.memory_reserved(index) - torch.cuda.memory_allocated(index)
        return int(free + cached)
    if dev.type == "mps":
        mps = getattr(torch, "mps", None)
        recommended = getattr(mps, "recommended_max_memory", None)
        driver = getattr(mps, "driver_allocated_memory", None)
        if callable(recommended) and callable(driver):
            return max(0, int(recommended()) - int(driver()))
    return _host_memory_available()


def _host_memory_available() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def matmul_bytes(n: int, dtype: torch.dtype | str = torch.float32) -> int:
    """Return the bytes an N×N matmul holds at once: inputs a and b and the result c."""
    _check_positive_int("n", n)
    return 3 * n * n * torch.empty((), dtype=resolve_dtype(dtype)).element_size()


def fits_in_memory(n: int, device: str | torch.device, dtype: torch.dtype | str = torch.float32) -> bool:
    """Return True when an N×N matmul's tensors fit in `device`'s free memory with a safety margin.

    Accelerators keep 10 % and 256 MiB spare (library workspaces); the CPU uses at most half of the
    available RAM. When free memory cannot be read, True is returned.
    """
    need = matmul_bytes(n, dtype)
    dev = resolve_device(device)
    free = memory_available(dev)
    if free is None:
        return True
    if dev.type == "cpu":
        return need <= 0.5 * free
    return need <= 0.9 * free - 256 * 2**20


# --------------------------------------------------------------------------- sweep


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
    inputs ∝ N²), and stops growing N when that prediction would overrun `budget_s`, or when the
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
    for n in size_list:
        if not fits_in_memory(n, dev, dt):
            stop, next_size = "memory", n
            break
        elapsed = time.perf_counter() - start
        if last is not None:
            ratio = n / last[0]
            call = last[1] * ratio**3
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
                         max_time_s=max(remaining, min_block_s))
        del a, b
        records.append(MatmulRecord(n=n, timing=timing, rel_error=error))
        last = (n, timing.median_s, create)
        if progress:
            print(f"  N={n:>6}: {format_seconds(timing.median_s)} · {format_flops(matmul_flops(n) / timing.median_s)}",
                  flush=True)
    if dev.type == "cuda":
        torch.cuda.empty_cache()  # give the sweep's cached blocks back to the other cells
    return SweepResult(device=str(dev), dtype=_SHORT[dt], threads=n_threads, budget_s=float(budget),
                       wall_s=time.perf_counter() - start, stop_reason=stop, next_size=next_size,
                       records=records, device_name=_device_name(dev))


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


# --------------------------------------------------------------------------- comparing sweeps


def _check_sweep(name: str, sweep) -> None:
    if not isinstance(sweep, SweepResult):
        raise TypeError(
            tr(f"{name} phải là kết quả của bench.matmul_sweep(...), không phải {type(sweep).__name__}",
               f"{name} must be the result of bench.matmul_sweep(...), not {type(sweep).__name__}")
        )


def speedup(baseline: SweepResult, other: SweepResult) -> list[tuple[int, float]]:
    """Return (N, baseline time / other time) for every N both sweeps measured (>1: `other` is faster)."""
    _check_sweep("baseline", baseline)
    _check_sweep("other", other)
    out = []
    for record in other.records:
        base = baseline.time_at(record.n)
        if base is not None:
            out.append((record.n, base / record.seconds))
    return out


@dataclass(frozen=True)
class Crossover:
    """Where `other` becomes faster than `baseline` (and stays faster for every larger N measured).

    ``status`` is "crosses" (``n`` is the interpolated crossover size), "always_faster",
    "never_faster" or "no_overlap" (no common sizes); ``n`` is None unless status is "crosses".
    """

    status: str
    n: float | None
    message: str


def crossover(baseline: SweepResult, other: SweepResult) -> Crossover:
    """Return the size N from which `other` beats `baseline` for every larger measured N.

    Between the last size where `other` is slower and the next one, N is interpolated on log-log axes
    where the speedup equals 1.
    """
    points = speedup(baseline, other)
    if not points:
        return Crossover("no_overlap", None, tr("Hai lần quét không có kích thước N chung.",
                                                "The two sweeps have no size N in common."))
    first_good = len(points)
    while first_good > 0 and points[first_good - 1][1] >= 1.0:
        first_good -= 1
    if first_good == 0:
        return Crossover("always_faster", None, tr(
            f"{other.label} nhanh hơn {baseline.label} ở mọi N đã đo (từ N={points[0][0]}).",
            f"{other.label} is faster than {baseline.label} at every measured N (from N={points[0][0]})."))
    if first_good == len(points):
        return Crossover("never_faster", None, tr(
            f"{other.label} chưa nhanh hơn {baseline.label} ở N lớn nhất đo chung (N={points[-1][0]}).",
            f"{other.label} is not faster than {baseline.label} at the largest common N (N={points[-1][0]})."))
    (n0, s0), (n1, s1) = points[first_good - 1], points[first_good]
    if s1 == s0:
        n_star = float(n1)
    else:
        frac = (0.0 - math.log(s0)) / (math.log(s1) - math.log(s0))
        n_star = math.exp(math.log(n0) + frac * (math.log(n1) - math.log(n0)))
    return Crossover("crosses", n_star, tr(
        f"{other.label} nhanh hơn {baseline.label} từ khoảng N≈{n_star:.0f} trở lên (đo được: chậm hơn ở N={n0}, "
        f"nhanh hơn ở N={n1}).",
        f"{other.label} beats {baseline.label} from about N≈{n_star:.0f} (measured: slower at N={n0}, "
        f"faster at N={n1})."))


def estimate_seconds(sweep: SweepResult, n: int) -> float:
    """Return the time of one N×N matmul: measured if the sweep has N, else scaled as N³ from the largest size.

    This is an *estimate* outside the measured sizes; say so wherever it is shown.
    """
    _check_sweep("sweep", sweep)
    _check_positive_int("n", n)
    if not sweep.records:
        raise ValueError(tr("Lần quét này chưa đo kích thước nào.", "This sweep measured no size."))
    measured = sweep.time_at(n)
    if measured is not None:
        return measured
    base = sweep.records[-1] if n > sweep.records[-1].n else min(sweep.records, key=lambda r: abs(r.n - n))
    return base.seconds * (n / base.n) ** 3


# --------------------------------------------------------------------------- one comparison


@dataclass(frozen=True)
class Comparison:
    """One matmul size timed two ways (CPU vs accelerator, or 1 CPU thread vs all), results checked first."""

    n: int
    dtype: str
    baseline: Timing | None
    other: Timing | None
    errors: tuple[float, float] | None
    include_copy: bool
    skipped: str = ""

    @property
    def speedup(self) -> float | None:
        """Baseline time / other time (>1: `other` is faster), None when skipped."""
        if self.baseline is None or self.other is None:
            return None
        return self.baseline.median_s / self.other.median_s

    def verdict(self) -> str:
        """Return one sentence built from the measured numbers."""
        if self.skipped:
            return self.skipped
        s = self.speedup
        faster = tr(f"nhanh hơn {s:.1f}×", f"faster by {s:.1f}×") if s >= 1 else tr(
            f"CHẬM hơn {1 / s:.1f}×", f"SLOWER by {1 / s:.1f}×")
        who = _who(self.other)
        base = _who(self.baseline)
        copy = tr(" (tính cả copy CPU→GPU→CPU)", " (copies CPU→GPU→CPU included)") if self.include_copy else ""
        return tr(f"N={self.n} {self.dtype}: {who}{copy} {faster} so với {base}.",
                  f"N={self.n} {self.dtype}: {who}{copy} is {faster} than {base}.")

    def __str__(self) -> str:
        if self.skipped:
            return self.skipped
        check = tr("✅ kết quả đúng (sai số tương đối ", "✅ results correct (relative error ") + (
            f"{self.errors[0]:.1e} / {self.errors[1]:.1e})")
        return "\n".join([check, f"  {self.baseline}", f"  {self.other}", "→ " + self.verdict()])

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(str(self))


def _who(timing: Timing) -> str:
    if timing.device.startswith("cpu"):
        return f"CPU {timing.threads} " + tr("luồng", "thread(s)")
    return timing.device


def _probe_call_s(n: int, dev: torch.device, dt: torch.dtype, threads: int, limit_s: float) -> float:
    """Estimate one N×N matmul's time from smaller ones (scaled as N³), doubling the probe size from 128.

    Small matmuls can run on faster code paths (the data fits in cache), so N³ scaling from a tiny size
    can underestimate badly; probing stops only when the estimate is far below the limit, over it, or
    the probe reached N/2. Each probe is the median of 3 calls, so one disturbed call cannot skip a size.
    """
    size = min(n, 128)
    while True:
        a, b = make_matmul_inputs(size, dev, dt)
        t = measure(lambda a=a, b=b: a @ b, device=dev, repeats=3, warmup=1, number=1, threads=threads)
        estimate = t.median_s * (n / size) ** 3
        if estimate > limit_s or 4 * estimate < limit_s or 2 * size > n // 2 or size == n:
            return estimate
        size *= 2


def compare_matmul(
    n: int,
    dtype: torch.dtype | str = torch.float32,
    device: str | torch.device | None = None,
    *,
    include_copy: bool = False,
    repeats: int = 3,
    warmup: int = 1,
    threads: int | None = None,
    max_call_s: float = 5.0,
    max_time_s: float | None = None,
) -> Comparison:
    """Check, then time one N×N matmul on the CPU (all threads) and on `device`.

    On a machine without an accelerator (`device` is the CPU), the comparison is 1 CPU thread vs
    all CPU threads instead, so it still teaches something. With ``include_copy=True`` the
    accelerator's time includes copying a and b to it and the result back (pageable memory).

    A size whose single matmul is estimated (from smaller probes) to take more than `max_call_s` on
    either side is not run; the result then says so (``skipped``) instead of freezing the notebook.
    `max_time_s` caps each side's measurement (see ``measure``): slow sides get fewer repeats.
    """
    _check_positive_int("n", n)
    dt = resolve_dtype(dtype)
    dev = resolve_device(device)
    if not isinstance(include_copy, bool):
        raise TypeError(f"include_copy must be True or False, got {type(include_copy).__name__}")
    _check_positive_number("max_call_s", max_call_s)
    if max_time_s is not None:
        _check_positive_number("max_time_s", max_time_s)
    all_threads = cpu_threads() if threads is None else threads
    _check_positive_int("threads", all_threads)
    cpu = torch.device("cpu")
    if dev.type == "cpu":
        plan = [(cpu, 1), (cpu, all_threads)]
    else:
        plan = [(cpu, all_threads), (dev, all_threads)]
    for where, th in plan:
        estimate = _probe_call_s(n, where, dt, th, max_call_s)
        if estimate > max_call_s:
            return Comparison(n, _SHORT[dt], None, None, None, include_copy, skipped=tr(
                f"⏭️ Không chạy N={n} {_SHORT[dt]} trên {where} ({th} luồng): ước lượng một phép nhân mất "
                f"~{format_seconds(estimate)} > giới hạn {max_call_s:g} s. Chọn N nhỏ hơn (hoặc fp32 trên CPU).",
                f"⏭️ Not running N={n} {_SHORT[dt]} on {where} ({th} threads): one matmul is estimated at "
                f"~{format_seconds(estimate)} > the {max_call_s:g} s limit. Pick a smaller N (or fp32 on the CPU)."))
    a_cpu, b_cpu = make_matmul_inputs(n, cpu, dt)
    timings, errors = [], []
    for where, th in plan:
        a, b = (a_cpu, b_cpu) if where.type == "cpu" else (a_cpu.to(where), b_cpu.to(where))
        errors.append(_assert_correct(a, b, a @ b, dt, where))
        if include_copy and where.type != "cpu":
            fn = lambda where=where: (a_cpu.to(where) @ b_cpu.to(where)).cpu()  # noqa: E731
            label = f"matmul {n}×{n} {_SHORT[dt]} + copy"
        else:
            fn = lambda a=a, b=b: a @ b  # noqa: E731
            label = f"matmul {n}×{n} {_SHORT[dt]}"
        timings.append(measure(fn, device=where, repeats=repeats, warmup=warmup, threads=th,
                               flops=matmul_flops(n), label=label, max_time_s=max_time_s))
    return Comparison(n, _SHORT[dt], timings[0], timings[1], (errors[0], errors[1]), include_copy)


# --------------------------------------------------------------------------- copies


@dataclass(frozen=True)
class CopyCost:
    """What running one matmul on an accelerator costs when the data starts and ends on the CPU."""

    n: int
    dtype: str
    device: str
    pinned: bool
    to_device: Timing
    compute: Timing
    to_host: Timing
    cpu: Timing

    @property
    def total_s(self) -> float:
        """Copy in + compute + copy out, median seconds."""
        return self.to_device.median_s + self.compute.median_s + self.to_host.median_s

    def verdict(self) -> str:
        """Return one sentence comparing the round trip with computing on the CPU, from the measured numbers."""
        copy = self.to_device.median_s + self.to_host.median_s
        share = 100 * copy / self.total_s
        better = self.total_s < self.cpu.median_s
        return tr(
            f"N={self.n}: copy {format_seconds(copy)} + tính {format_seconds(self.compute.median_s)} trên "
            f"{self.device} = {format_seconds(self.total_s)} (copy chiếm {share:.0f}%) so với CPU "
            f"{format_seconds(self.cpu.median_s)} → " + ("đáng chuyển sang GPU." if better else
                                                          "KHÔNG đáng: copy ăn hết phần lợi."),
            f"N={self.n}: copy {format_seconds(copy)} + compute {format_seconds(self.compute.median_s)} on "
            f"{self.device} = {format_seconds(self.total_s)} (copies are {share:.0f}%) vs CPU "
            f"{format_seconds(self.cpu.median_s)} → " + ("worth moving to the GPU." if better else
                                                          "NOT worth it: the copies eat the gain."),
        )

    def __str__(self) -> str:
        return "\n".join([f"  {self.to_device}", f"  {self.compute}", f"  {self.to_host}", f"  {self.cpu}",
                          "→ " + self.verdict()])

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(str(self))


def copy_vs_compute(n: int, device: str | torch.device | None = None, dtype: torch.dtype | str = torch.float32, *,
                    pinned: bool = False, repeats: int = 3, warmup: int = 1,
                    threads: int | None = None) -> CopyCost:
    """Time copying a and b to `device`, the matmul there, copying c back, and the same matmul on the CPU.

    Every copy is a real copy (``copy=True``), so on the CPU it times a memory copy within RAM. With
    ``pinned=True`` the host tensors are page-locked first (faster host→GPU copies on CUDA).
    """
    _check_positive_int("n", n)
    dev = resolve_device(device)
    dt = resolve_dtype(dtype)
    if not isinstance(pinned, bool):
        raise TypeError(f"pinned must be True or False, got {type(pinned).__name__}")
    a_cpu, b_cpu = make_matmul_inputs(n, "cpu", dt)
    if pinned and dev.type == "cuda":
        a_cpu, b_cpu = a_cpu.pin_memory(), b_cpu.pin_memory()
    a, b = a_cpu.to(dev, copy=True), b_cpu.to(dev, copy=True)
    c = a @ b
    _assert_correct(a, b, c, dt, dev)
    kw = {"repeats": repeats, "warmup": warmup, "threads": threads}
    size = f"{n}×{n} {_SHORT[dt]}"
    to_device = measure(lambda: (a_cpu.to(dev, copy=True, non_blocking=pinned),
                                 b_cpu.to(dev, copy=True, non_blocking=pinned)), device=dev,
                        label=f"copy a, b → {dev}" + (" (pinned)" if pinned else ""), **kw)
    compute = measure(lambda: a @ b, device=dev, flops=matmul_flops(n), label=f"matmul {size} on {dev}", **kw)
    to_host = measure(lambda: c.to("cpu", copy=True), device=dev, label="copy c → cpu", **kw)
    cpu = measure(lambda: a_cpu @ b_cpu, device="cpu", flops=matmul_flops(n), label=f"matmul {size} on cpu", **kw)
    return CopyCost(n, _SHORT[dt], str(dev), pinned, to_device, compute, to_host, cpu)


__all__ = [
    "DEFAULT_SIZES", "Comparison", "CopyCost", "Crossover", "MatmulRecord", "SweepResult", "Timing",
    "compare_matmul", "copy_vs_compute", "cpu_threads", "crossover", "default_budget_s", "dtype_label",
    "estimate_seconds", "fits_in_memory", "format_flops", "format_seconds", "make_matmul_inputs",
    "matmul_bytes", "matmul_error", "matmul_flops", "matmul_sweep", "matmul_tolerance", "measure",
    "memory_available", "resolve_device", "resolve_dtype", "speedup", "synchronize", "time_matmul",
]

"""Checked matmuls: inputs, the float64 check, timing one size, and one size timed two ways."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .._validate import check_int, check_number
from ..device import pick_device
from ..display import Printable
from ..flops import matmul_flops
from ..platforms import detect_platform
from ..precision import format_name, to_dtype
from .timing import Timing, check_run, cpu_threads, format_seconds, measure, noise_line, noise_signs

# Largest relative error (Frobenius norm, against float64) that still counts as a correct matmul.
# fp32 allows TF32 (about 1e-3), in case the learner turned it on.
TOLERANCE = {torch.float32: 2e-3, torch.float16: 1e-2, torch.bfloat16: 5e-2}
_CLOSE = 1.2  # within this factor either way, 1 thread and several count as "about the same"


def matmul_inputs(n: int, dev: torch.device, dt: torch.dtype) -> tuple[torch.Tensor, ...]:
    """Return a and b, N×N, from their own seeded generator (the global RNG is left alone)."""
    try:
        gen = torch.Generator(device=dev).manual_seed(0)
        return tuple(torch.randn(n, n, device=dev, dtype=dt, generator=gen) for _ in range(2))
    except (RuntimeError, TypeError):  # a backend without device generators or without randn in `dt`
        gen = torch.Generator().manual_seed(0)
        return tuple(torch.randn(n, n, generator=gen).to(device=dev, dtype=dt) for _ in range(2))


def matmul_error(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> float:
    """Return the relative error of ``c ≈ a @ b`` on 8 random rows × columns, against float64."""
    gen = torch.Generator().manual_seed(1234)
    rows = torch.randperm(a.shape[0], generator=gen)[:8]
    cols = torch.randperm(b.shape[1], generator=gen)[:8]
    ref = a[rows.to(a.device)].double().cpu() @ b[:, cols.to(b.device)].double().cpu()
    got = c[rows.to(c.device)][:, cols.to(c.device)].double().cpu()
    return float((got - ref).norm() / ref.norm().clamp_min(1e-300))


def assert_correct(a, b, c, dt: torch.dtype, dev) -> float:
    error = matmul_error(a, b, c)
    if not error <= TOLERANCE[dt]:
        raise RuntimeError(f"Kết quả matmul trên {dev} sai (sai số tương đối {error:.2e} > "
                           f"{TOLERANCE[dt]:.0e}): không đo tốc độ của một kết quả sai.")
    return error


def matmul_label(n: int, dt: torch.dtype) -> str:
    return f"matmul {n}×{n} {format_name(dt)}"


def time_matmul(n: int, device: str | torch.device = "cpu", *, repeats: int = 5, warmup: int = 2,
                threads: int | None = None, max_time_s: float | None = None) -> Timing:
    """Check, then time an N×N fp32 matmul on `device`; raise RuntimeError if the result is wrong."""
    check_int("n", n, 1)
    dev = pick_device(device)
    check_run(repeats, warmup, threads, max_time_s)
    a, b = matmul_inputs(n, dev, torch.float32)
    assert_correct(a, b, a @ b, torch.float32, dev)
    return measure(lambda: a @ b, device=dev, repeats=repeats, warmup=warmup, threads=threads, flops=matmul_flops(n),
                   label=matmul_label(n, torch.float32), max_time_s=max_time_s)


def matmul_bytes(n: int) -> int:
    """Return the bytes an N×N fp32 matmul holds at once: inputs a and b and the result c."""
    check_int("n", n, 1)
    return 3 * n * n * 4


def _free_bytes(dev: torch.device) -> int | None:
    """Return the bytes new tensors on `dev` may still use (CUDA: free + cached; else the OS's), or None."""
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        free, _total = torch.cuda.mem_get_info(index)
        return int(free + torch.cuda.memory_reserved(index) - torch.cuda.memory_allocated(index))
    mps = getattr(torch, "mps", None)
    if dev.type == "mps" and callable(getattr(mps, "recommended_max_memory", None)):
        return max(0, int(mps.recommended_max_memory()) - int(mps.driver_allocated_memory()))
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    except (OSError, StopIteration):  # not Linux (macOS, Windows): the sweep's memory check is off
        return None


def fits_in_memory(n: int, dev: torch.device, dt: torch.dtype) -> bool:
    """Whether an N×N matmul fits: half the free RAM on the CPU, 90 % less 256 MiB on an accelerator."""
    free = _free_bytes(dev)
    if free is None:
        return True
    need = 3 * n * n * dt.itemsize
    return need <= (0.5 * free if dev.type == "cpu" else 0.9 * free - 256 * 2**20)


def _probe_call_s(n: int, dev: torch.device, dt: torch.dtype, threads: int, limit_s: float) -> float:
    """Estimate one N×N matmul's time from smaller ones (scaled as N³), doubling the probe size from 128."""
    # Tiny probes mislead both ways (CPU cache: too low; GPU launch cost: too high), so grow while unsure.
    size = min(n, 128)
    while True:
        a, b = matmul_inputs(size, dev, dt)
        t = measure(lambda a=a, b=b: a @ b, device=dev, repeats=3, warmup=1, number=1, threads=threads,
                    warn=False).min_s
        estimate = t * (n / size) ** 3
        if size == n or 2 * size > n // 2 or 4 * estimate < limit_s:
            return estimate
        if estimate > limit_s and (t >= 1e-3 or 4 * 8 * t > limit_s):
            return estimate  # a probe big enough to trust, or probing further would itself be slow
        size *= 2


def _physical_cores() -> int | None:
    """Return the physical CPU cores psutil reports, or None without psutil (or when unknown)."""
    try:
        import psutil
    except ImportError:  # an optional dependency (tests/test_python310.py allows only imports guarded like this)
        return None
    try:
        cores = psutil.cpu_count(logical=False)
    except Exception:  # noqa: BLE001  (a different error on each system)
        return None
    return cores if isinstance(cores, int) and cores > 0 else None


def _threads_reason(threads: int) -> str:
    """Return why `threads` CPU threads may be no faster (or slower) than 1, naming the cores when known."""
    cores = _physical_cores()
    if cores is not None and cores < threads:
        why = (f"máy này chỉ có {cores} lõi vật lý cho {threads} luồng (psutil), nên các luồng chia nhau cùng bộ "
               "tính của một lõi (Hyper-Threading)")
    else:
        why = ("máy có ít lõi vật lý (lệnh !lscpu cho biết ở hai dòng Core(s) per socket và Thread(s) per core), "
               "nên các luồng chia nhau cùng bộ tính")
    text = (f"Lý do hay gặp: {why}; hoặc máy đang bận việc khác, và mỗi phép nhân phải chờ luồng chậm nhất. "
            "Chạy lại ô khi máy rảnh để xem kết quả có lặp lại không.")
    if detect_platform() in ("colab", "kaggle"):
        text += (" Trên CPU miễn phí của Colab/Kaggle (2 vCPU trên một máy chủ dùng chung, có thể chỉ là hai luồng của "
                 "một lõi) điều này hay gặp.")
    return text


def threads_verdict(one_thread_s: float, many_threads_s: float, threads: int) -> str:
    """Return a "→ …" sentence on 1 CPU thread against `threads`, with the reasons when more is not faster."""
    check_number("one_thread_s", one_thread_s, positive=True)
    check_number("many_threads_s", many_threads_s, positive=True)
    check_int("threads", threads, 1)
    if threads == 1:
        return "→ Chỉ có 1 CPU khả dụng nên \"mọi luồng\" cũng là 1 luồng: không có gì để so ở máy này."
    ratio = one_thread_s / many_threads_s
    if ratio >= _CLOSE:
        return (f"→ {threads} luồng nhanh hơn 1 luồng {ratio:.1f}× (thời gian 1 luồng / {threads} luồng = {ratio:.2f}): "
                "nhân ma trận chia được cho nhiều lõi.")
    if ratio > 1 / _CLOSE:
        head = (f"→ {threads} luồng và 1 luồng gần như bằng nhau (thời gian 1 luồng / {threads} luồng = {ratio:.2f}): "
                "ở đây thêm luồng không giúp gì.")
    else:
        head = (f"→ 1 luồng NHANH hơn {threads} luồng {1 / ratio:.1f}× (thời gian 1 luồng / {threads} luồng = "
                f"{ratio:.2f}), ngược với điều thường thấy.")
    return f"{head} {_threads_reason(threads)}"


@dataclass(frozen=True, repr=False)
class Comparison(Printable):
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

    @property
    def noise(self) -> str | None:
        """The "⚠️ số đo nhiễu" line when either side's repeats disagree or its median is far above expected."""
        return noise_line([f"{_who(t)}: {sign}" for t in (self.baseline, self.other) if t is not None
                           for sign in noise_signs(t.times_s, t.expected_s)])

    def verdict(self) -> str:
        """Return one sentence built from the measured numbers."""
        if self.skipped:
            return self.skipped
        copy = " (tính cả thời gian chép CPU→GPU→CPU)" if self.include_copy else ""
        s = self.speedup
        speed = f"nhanh hơn {s:.1f}×" if s >= 1 else f"CHẬM hơn {1 / s:.1f}×"
        text = f"N={self.n} {self.dtype}: {_who(self.other)}{copy} {speed} so với {_who(self.baseline)}."
        if self.other.device.startswith("cpu") and self.other.threads > 1 and s < _CLOSE:  # 1 thread vs all
            text += " " + _threads_reason(self.other.threads)
        return text

    def __str__(self) -> str:
        if self.skipped:
            return self.skipped
        lines = [f"✅ kết quả đúng (sai số tương đối {self.errors[0]:.1e} / {self.errors[1]:.1e})",
                 f"  {self.baseline}", f"  {self.other}", "→ " + self.verdict()]
        return "\n".join(lines + ([self.noise] if self.noise else []))


def _who(timing: Timing) -> str:
    return f"CPU {timing.threads} luồng" if timing.device.startswith("cpu") else timing.device


def compare_matmul(n: int, dtype: torch.dtype | str = torch.float32,
                   device: str | torch.device | None = None, *, include_copy: bool = False, max_call_s: float = 5.0,
                   max_time_s: float | None = None) -> Comparison:
    """Check, then time one N×N matmul on the CPU (all threads) and on `device`."""
    check_int("n", n, 1)
    dt, dev = to_dtype(dtype), pick_device(device)
    if not isinstance(include_copy, bool):
        raise TypeError(f"include_copy phải là True hoặc False, không phải {type(include_copy).__name__}")
    check_number("max_call_s", max_call_s, positive=True)
    check_run(1, 1, None, max_time_s)
    all_threads = cpu_threads()
    cpu, name = torch.device("cpu"), format_name(dt)
    plan = [(cpu, 1), (cpu, all_threads)] if dev.type == "cpu" else [(cpu, all_threads), (dev, all_threads)]
    for where, th in plan:
        estimate = _probe_call_s(n, where, dt, th, max_call_s)
        if estimate > max_call_s:
            other = " (hoặc fp32 trên CPU)" if dt != torch.float32 and where.type == "cpu" else ""
            return Comparison(n, name, None, None, None, include_copy, skipped=(
                f"⏭️ Không chạy N={n} {name} trên {where} ({th} luồng): ước lượng một phép nhân mất "
                f"~{format_seconds(estimate)} > giới hạn {max_call_s:g} s. Chọn N nhỏ hơn{other}. Ước lượng được "
                "tính từ một phép nhân nhỏ hơn vừa đo; máy đang bận thì nó có thể cao hơn thật, khi đó đo lại sau."))
    a_cpu, b_cpu = matmul_inputs(n, cpu, dt)
    timings, errors = [], []
    for where, th in plan:
        a, b = (a_cpu, b_cpu) if where.type == "cpu" else (a_cpu.to(where), b_cpu.to(where))
        errors.append(assert_correct(a, b, a @ b, dt, where))
        if include_copy and where.type != "cpu":
            fn = lambda where=where: (a_cpu.to(where) @ b_cpu.to(where)).cpu()  # noqa: E731
            label = matmul_label(n, dt) + " + copy"
        else:
            fn, label = (lambda a=a, b=b: a @ b), matmul_label(n, dt)
        timings.append(measure(fn, device=where, repeats=3, warmup=1, threads=th, flops=matmul_flops(n),
                               label=label, max_time_s=max_time_s, warn=False))
    return Comparison(n, name, timings[0], timings[1], (errors[0], errors[1]), include_copy)


@dataclass(frozen=True, repr=False)
class CopyCost(Printable):
    """What one matmul on an accelerator costs when the data starts and ends on the CPU."""

    n: int
    device: str
    to_device: Timing
    compute: Timing
    to_host: Timing
    cpu: Timing

    @property
    def total_s(self) -> float:
        return self.to_device.median_s + self.compute.median_s + self.to_host.median_s

    def verdict(self) -> str:
        """Return one sentence comparing the round trip with computing on the CPU."""
        copy = self.to_device.median_s + self.to_host.median_s
        better = "đáng chuyển sang GPU." if self.total_s < self.cpu.median_s else (
            "KHÔNG đáng: thời gian chép ăn hết phần lợi.")
        return (f"N={self.n}: chép {format_seconds(copy)} + tính {format_seconds(self.compute.median_s)} trên "
                f"{self.device} = {format_seconds(self.total_s)} (chép chiếm {100 * copy / self.total_s:.0f}%) so với "
                f"CPU {format_seconds(self.cpu.median_s)} → {better}")

    def __str__(self) -> str:
        parts = (self.to_device, self.compute, self.to_host, self.cpu)
        return "\n".join([f"  {t}" for t in parts] + ["→ " + self.verdict()])


def copy_vs_compute(n: int, device: str | torch.device | None = None, *, pinned: bool = False) -> CopyCost:
    """Time copying fp32 a and b to `device`, the matmul there, copying c back, and the matmul on the CPU."""
    check_int("n", n, 1)
    dev = pick_device(device)
    if not isinstance(pinned, bool):
        raise TypeError(f"pinned phải là True hoặc False, không phải {type(pinned).__name__}")
    a_cpu, b_cpu = matmul_inputs(n, torch.device("cpu"), torch.float32)
    if pinned and dev.type == "cuda":
        a_cpu, b_cpu = a_cpu.pin_memory(), b_cpu.pin_memory()
    a, b = a_cpu.to(dev, copy=True), b_cpu.to(dev, copy=True)
    c = a @ b
    assert_correct(a, b, c, torch.float32, dev)
    kw = {"repeats": 3, "warmup": 1}
    size = f"{n}×{n} fp32"
    to_device = measure(lambda: (a_cpu.to(dev, copy=True, non_blocking=pinned),
                                 b_cpu.to(dev, copy=True, non_blocking=pinned)), device=dev,
                        label=f"copy a, b → {dev}" + (" (pinned)" if pinned else ""), **kw)
    compute = measure(lambda: a @ b, device=dev, flops=matmul_flops(n), label=f"matmul {size} on {dev}", **kw)
    to_host = measure(lambda: c.to("cpu", copy=True), device=dev, label="copy c → cpu", **kw)
    cpu = measure(lambda: a_cpu @ b_cpu, device="cpu", flops=matmul_flops(n), label=f"matmul {size} on cpu", **kw)
    return CopyCost(n, str(dev), to_device, compute, to_host, cpu)

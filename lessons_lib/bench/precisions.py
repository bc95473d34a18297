"""Time one matmul size in fp32 and in a 16-bit dtype on an accelerator, next to the CPU in fp32, each bounded in time.

This is what the speed widget shows on a GPU: the lesson's point there is how much faster fp16 (tensor
cores) is than fp32 on the same GPU, and how both compare with the CPU. Every side is checked against
float64 before it is timed, and every side is bounded: a side whose single matmul is estimated (from
smaller probes) to take longer than its limit is not run, and the result says so instead of freezing the
notebook; an error on one side (e.g. a dtype the GPU cannot run) is reported on that side only.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from .. import gpu_specs
from ..errors import short_message
from ..flops import matmul_flops
from ..i18n import tr
from ._checks import _check_positive_int, _check_positive_number
from .compare import _probe_call_s
from .devices import cpu_threads, resolve_device
from .dtypes import _SHORT, resolve_dtype
from .matmul import _assert_correct, make_matmul_inputs
from .memory_fit import fits_in_memory
from .noise import _signs, noise_line
from .timing import Timing, measure
from .units import format_flops, format_seconds

#: NVIDIA's guidance for tensor cores: fp16/bf16 matrix dimensions that are multiples of 8 elements (16 bytes).
TENSOR_CORE_MULTIPLE = 8
TENSOR_CORE_SOURCE = ("NVIDIA Matrix Multiplication Background User's Guide (Tensor Core Requirements); "
                      "PyTorch Performance Tuning Guide")
#: bf16 tensor cores start with compute capability 8.0; Turing's (7.5, the T4) run fp16, int8 and int4 only.
BF16_SOURCE = "NVIDIA Turing và Ampere architecture whitepapers; torch.cuda.is_bf16_supported"


def bf16_emulated(device: str | torch.device) -> bool:
    """Return True when `device` is an NVIDIA GPU without bf16 tensor cores (compute capability < 8.0, e.g. a T4).

    There PyTorch still runs bf16 (``torch.cuda.is_bf16_supported()`` is True: it can make bf16 tensors),
    but not on tensor cores; ``is_bf16_supported(including_emulation=False)`` (newer torch) says False.
    False for the CPU, MPS, ROCm and machines without a usable CUDA GPU.
    """
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device phải là str hoặc torch.device, vd \"cuda\", không phải {type(device).__name__}")
    dev = torch.device(device)
    if dev.type != "cuda" or torch.version.hip or not torch.cuda.is_available():
        return False
    with torch.cuda.device(dev):
        if "including_emulation" in inspect.signature(torch.cuda.is_bf16_supported).parameters:
            return not torch.cuda.is_bf16_supported(including_emulation=False)
        return torch.cuda.get_device_capability(dev)[0] < 8


@dataclass(frozen=True)
class Side:
    """One side of a comparison: where and in which dtype, and its checked timing or why it was not run.

    Attributes:
        device: "cpu", "cuda:0", "mps", ...
        dtype: "fp32", "fp16" or "bf16".
        threads: CPU threads PyTorch used (meaningful on the CPU).
        timing: The measurement, or None when the side was not run.
        rel_error: Relative error against float64, checked before timing (None when not run).
        skipped: Why the side was not run, as a sentence ("" when it was measured).
        peak_tflops: The documented peak for this device and dtype, when known.
    """

    device: str
    dtype: str
    threads: int
    timing: Timing | None = None
    rel_error: float | None = None
    skipped: str = ""
    peak_tflops: float | None = None

    @property
    def measured(self) -> bool:
        """Whether this side was measured."""
        return self.timing is not None

    @property
    def is_cpu(self) -> bool:
        """Whether this side ran (or would have run) on the CPU."""
        return self.device.startswith("cpu")

    @property
    def name(self) -> str:
        """A short label, e.g. "cuda:0 fp16" or "CPU fp32 (2 luồng)"."""
        if self.is_cpu:
            return f"CPU {self.dtype} ({self.threads} " + tr("luồng", "threads") + ")"
        return f"{self.device} {self.dtype}"

    @property
    def seconds(self) -> float | None:
        """Median seconds per matmul, or None when not measured."""
        return None if self.timing is None else self.timing.median_s

    @property
    def percent_of_peak(self) -> float | None:
        """Achieved speed as % of the documented peak, when both are known."""
        return None if self.timing is None else self.timing.percent_of_peak(self.peak_tflops)

    def line(self) -> str:
        """Return this side as one line of text."""
        if not self.measured:
            return f"{self.name}: {self.skipped}"
        t = self.timing
        text = (f"{self.name}: {format_seconds(t.median_s)} (min {format_seconds(t.min_s)} · max "
                f"{format_seconds(t.max_s)}; " + tr(f"trung vị {t.repeats} lần, warm-up {t.warmup}",
                                                    f"median of {t.repeats}, warm-up {t.warmup}")
                + f") · {format_flops(t.flops_per_s)}")
        share = self.percent_of_peak
        if share is not None:
            text += tr(f" = {share:.0f}% đỉnh công bố {self.peak_tflops:g} TFLOP/s",
                       f" = {share:.0f}% of the documented {self.peak_tflops:g} TFLOP/s peak")
        return text


def _speed_words(ratio: float) -> str:
    if ratio >= 1:
        return tr(f"nhanh hơn {ratio:.1f}×", f"faster by {ratio:.1f}×")
    return tr(f"CHẬM hơn {1 / ratio:.1f}×", f"SLOWER by {1 / ratio:.1f}×")


@dataclass(frozen=True)
class DtypeComparison:
    """One N×N matmul timed on an accelerator in fp32 and in a 16-bit dtype, and on the CPU in fp32.

    Attributes:
        n: The matrix size.
        sides: The device's fp32 side, its 16-bit side, then the CPU's fp32 side (when compared).
        device_name: The accelerator's name (e.g. "Tesla T4"), when known.
        spec: The documented figures of that GPU (``gpu_specs``), or None.
    """

    n: int
    sides: tuple[Side, ...]
    device_name: str = ""
    spec: gpu_specs.GpuSpec | None = None
    bf16_emulated: bool = False

    @property
    def noise(self) -> str | None:
        """The "⚠️ số đo nhiễu" line when a measured side's repeats disagree, else None."""
        seen = [f"{side.name}: {sign}" for side in self.sides if side.measured
                for sign in _signs(list(side.timing.times_s), side.timing.expected_s)]
        return noise_line(seen)

    @property
    def fp32(self) -> Side:
        """The device's fp32 side."""
        return self.sides[0]

    @property
    def low(self) -> Side:
        """The device's 16-bit side."""
        return self.sides[1]

    @property
    def cpu(self) -> Side | None:
        """The CPU's fp32 side, when the device is not the CPU and the CPU was compared."""
        return self.sides[2] if len(self.sides) > 2 else None

    def sentences(self) -> list[str]:
        """Return the comparisons the measurements support, one sentence each (built from the numbers)."""
        fp32, low, cpu = self.fp32, self.low, self.cpu
        where = "CPU" if fp32.is_cpu else fp32.device
        out = []
        if fp32.measured and low.measured:
            why = tr(" (tensor core)", " (tensor cores)") if self.spec is not None and self.spec.tensor_cores else ""
            out.append(tr(f"Trên cùng {where}, {low.dtype}{why} {_speed_words(fp32.seconds / low.seconds)} "
                          "so với fp32.",
                          f"On the same {where}, {low.dtype}{why} is {_speed_words(fp32.seconds / low.seconds)} "
                          "than fp32."))
        if cpu is not None and fp32.measured and cpu.measured:
            out.append(tr(f"{where} fp32 {_speed_words(cpu.seconds / fp32.seconds)} so với {cpu.name}.",
                          f"{where} fp32 is {_speed_words(cpu.seconds / fp32.seconds)} than {cpu.name}."))
        return out

    def notes(self) -> list[str]:
        """Return remarks on the conditions (a size tensor cores handle less well)."""
        out = []
        if self.low.device.startswith("cuda") and self.n % TENSOR_CORE_MULTIPLE:
            out.append(tr(f"ℹ️ N={self.n} không chia hết cho {TENSOR_CORE_MULTIPLE}: tensor core vẫn được dùng nhưng "
                          f"kém hiệu quả hơn; chọn chiều là bội của {TENSOR_CORE_MULTIPLE} ({TENSOR_CORE_SOURCE}).",
                          f"ℹ️ N={self.n} is not a multiple of {TENSOR_CORE_MULTIPLE}: tensor cores are still used but "
                          f"less efficiently; pick dimensions that are multiples of {TENSOR_CORE_MULTIPLE} "
                          f"({TENSOR_CORE_SOURCE})."))
        if self.low.dtype == "bf16" and self.bf16_emulated:
            out.append("ℹ️ GPU này không có tensor core cho bf16 (chỉ có từ compute capability 8.0, Ampere): PyTorch "
                       "vẫn nhân bf16 được nhưng giả lập, không bằng tensor core, nên bf16 ở đây không nói gì về tốc "
                       f"độ bf16 trên A100/H100/L4. Muốn thấy tensor core, chọn fp16 ({BF16_SOURCE}).")
        return out

    def verdict(self) -> str:
        """Return the comparison sentences as one paragraph (or why nothing could be compared)."""
        said = self.sentences()
        if said:
            return " ".join(said)
        return tr(f"N={self.n}: không đủ phía được đo để so sánh.", f"N={self.n}: too few sides measured to compare.")

    def __str__(self) -> str:
        head = tr(f"N={self.n} ({matmul_flops(self.n) / 1e9:.3g} GFLOP mỗi phép nhân) · mỗi phía được kiểm tra với "
                  "float64 trước khi đo",
                  f"N={self.n} ({matmul_flops(self.n) / 1e9:.3g} GFLOP per matmul) · each side checked against "
                  "float64 before timing")
        if self.device_name:
            head += f" · {self.device_name}"
        lines = [head] + [f"  {side.line()}" for side in self.sides]
        lines += [f"→ {s}" for s in self.sentences()] or [f"→ {self.verdict()}"]
        if any(s.measured and not s.is_cpu for s in self.sides):
            source = self.spec.source if self.spec else tr("không có (GPU này không có trong bảng gpu_specs)",
                                                           "none (this GPU is not in the gpu_specs table)")
            lines.append(tr(f"GPU được synchronize trước và sau mỗi lần đo. Số đỉnh: {source}.",
                            f"The GPU is synchronized before and after each timing. Peak figures: {source}."))
        if self.noise:
            lines.append(self.noise)
        lines += self.notes()
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(str(self))


def _skip_text(n: int, dtype: str, where: torch.device, threads: int, estimate: float, limit: float) -> str:
    who = f"CPU ({threads} " + tr("luồng", "threads") + ")" if where.type == "cpu" else str(where)
    return tr(f"⏭️ không đo N={n} {dtype} trên {who}: ước lượng ~{format_seconds(estimate)} mỗi phép nhân, quá giới "
              f"hạn {limit:g} s của widget.",
              f"⏭️ not measuring N={n} {dtype} on {who}: one matmul is estimated at ~{format_seconds(estimate)}, over "
              f"the widget's {limit:g} s limit.")


def run_side(n: int, device: torch.device, dtype: torch.dtype, *, threads: int, max_call_s: float,
             max_time_s: float, repeats: int = 5, warmup: int = 2, peak_tflops: float | None = None) -> Side:
    """Check, then time one N×N matmul on `device` in `dtype` within limits; return the ``Side``.

    Args:
        n: Matrix size.
        device: Where to run.
        dtype: torch.float32 / float16 / bfloat16.
        threads: CPU threads during the measurement.
        max_call_s: Skip the side when one matmul is estimated (from smaller probes) to take longer.
        max_time_s: Time limit of the measurement itself (fewer repeats for slow sizes).
        repeats: Timed repeats wanted (median reported).
        warmup: Untimed calls wanted before timing.
        peak_tflops: The documented peak, kept with the result for "% of peak".

    Returns:
        A measured ``Side``, or one whose ``skipped`` says why not (estimated too slow, does not fit in
        memory, or the error this device raised for this dtype).
    """
    label = _SHORT[dtype]
    base = {"device": str(device), "dtype": label, "threads": threads, "peak_tflops": peak_tflops}
    if not fits_in_memory(n, device, dtype):
        return Side(**base, skipped=tr(f"⏭️ không đo N={n} {label}: ma trận không vừa bộ nhớ còn trống.",
                                       f"⏭️ not measuring N={n} {label}: the matrices do not fit in free memory."))
    try:
        estimate = _probe_call_s(n, device, dtype, threads, max_call_s)
        if estimate > max_call_s:
            return Side(**base, skipped=_skip_text(n, label, device, threads, estimate, max_call_s))
        a, b = make_matmul_inputs(n, device, dtype)
        error = _assert_correct(a, b, a @ b, dtype, device)
        timing = measure(lambda: a @ b, device=device, repeats=repeats, warmup=warmup, threads=threads,
                         flops=matmul_flops(n), label=f"matmul {n}×{n} {label}", max_time_s=max_time_s, warn=False)
    except (RuntimeError, TypeError, NotImplementedError) as exc:  # a dtype this device cannot run, OOM, wrong result
        return Side(**base, skipped=f"❌ {short_message(exc, max_lines=2)}")
    return Side(**base, timing=timing, rel_error=error)


def compare_dtypes(
    n: int,
    device: str | torch.device | None = None,
    low: torch.dtype | str = "fp16",
    *,
    cpu: bool = True,
    max_call_s: float = 2.0,
    max_time_s: float = 3.0,
    cpu_max_call_s: float = 1.0,
    cpu_max_time_s: float = 2.0,
    repeats: int = 5,
    warmup: int = 2,
    threads: int | None = None,
) -> DtypeComparison:
    """Check, then time an N×N matmul on `device` in fp32 and in `low`, and on the CPU in fp32, each bounded.

    Args:
        n: Matrix size.
        device: The accelerator ("cuda", "mps", ...; None: the best device here). The CPU works too
            (then the CPU side is not repeated).
        low: The 16-bit dtype compared with fp32: "fp16" or "bf16".
        cpu: Also time the CPU in fp32 (all threads).
        max_call_s: On the accelerator, skip a side whose single matmul is estimated to take longer.
        max_time_s: Time limit of each accelerator measurement.
        cpu_max_call_s: The same limit for the CPU side (a slow CPU side is skipped, and says so).
        cpu_max_time_s: Time limit of the CPU measurement.
        repeats: Timed repeats per side (fewer when the time limit needs it).
        warmup: Untimed calls per side before timing.
        threads: CPU threads (None: all, see ``cpu_threads()``).

    Returns:
        A ``DtypeComparison``; ``str()`` of it is what the speed widget shows.

    Raises:
        TypeError / ValueError: an argument has the wrong type or value (the message says what to pass).
    """
    _check_positive_int("n", n)
    dev = resolve_device(device)
    low_dt = resolve_dtype(low)
    if low_dt == torch.float32:
        raise ValueError(tr("low là dtype 16 bit để so với fp32: 'fp16' hoặc 'bf16'",
                            "low is the 16-bit dtype compared with fp32: 'fp16' or 'bf16'"))
    if not isinstance(cpu, bool):
        raise TypeError(f"cpu must be True or False, got {type(cpu).__name__}")
    for name, value in (("max_call_s", max_call_s), ("max_time_s", max_time_s), ("cpu_max_call_s", cpu_max_call_s),
                        ("cpu_max_time_s", cpu_max_time_s)):
        _check_positive_number(name, value)
    _check_positive_int("repeats", repeats)
    _check_positive_int("warmup", warmup, minimum=0)
    n_threads = cpu_threads() if threads is None else threads
    _check_positive_int("threads", n_threads)

    spec = gpu_specs.spec_for_device(dev) if dev.type == "cuda" else None
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else ""
    sides = []
    for dt in (torch.float32, low_dt):
        limits = (cpu_max_call_s, cpu_max_time_s) if dev.type == "cpu" else (max_call_s, max_time_s)
        sides.append(run_side(n, dev, dt, threads=n_threads, max_call_s=limits[0], max_time_s=limits[1],
                              repeats=repeats, warmup=warmup, peak_tflops=spec.peak_tflops(dt) if spec else None))
    if cpu and dev.type != "cpu":
        sides.append(run_side(n, torch.device("cpu"), torch.float32, threads=n_threads, max_call_s=cpu_max_call_s,
                              max_time_s=cpu_max_time_s, repeats=repeats, warmup=warmup))
    if dev.type == "cuda":
        torch.cuda.empty_cache()  # give the measurement's cached blocks back to the other cells
    return DtypeComparison(n=n, sides=tuple(sides), device_name=name, spec=spec,
                           bf16_emulated=low_dt == torch.bfloat16 and bf16_emulated(dev))

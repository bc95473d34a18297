"""What the speed widget shows on a GPU: one matmul size in fp32 and fp16/bf16 there, next to the CPU in fp32.

Every side is checked against float64 before it is timed and bounded in time: a side whose single matmul
is estimated to take longer than its limit is not run, and an error on one side (a dtype the GPU cannot
run) is reported on that side only.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch

from .. import gpu_specs
from ..errors import short_message
from ..flops import matmul_flops
from ..precision import format_name
from .matmul import _assert_correct, _fits, _inputs, _label, _probe_call_s, _speed_words
from .timing import Timing, _format_flops, _measure, _noise_line, _Printable, _signs, format_seconds

_TENSOR_CORE_MULTIPLE = 8  # NVIDIA: fp16/bf16 matrix dimensions should be multiples of 8 elements (16 bytes)
_TENSOR_CORE_SOURCE = ("NVIDIA Matrix Multiplication Background User's Guide (Tensor Core Requirements); "
                       "PyTorch Performance Tuning Guide")
_BF16_SOURCE = "NVIDIA Turing và Ampere architecture whitepapers; torch.cuda.is_bf16_supported"
_MAX_CALL_S, _MAX_TIME_S = 2.0, 3.0  # an accelerator's side: longest estimated matmul, time limit
CPU_MAX_CALL_S, CPU_MAX_TIME_S = 1.0, 2.0  # the same for the CPU's side, also in the speed widget's CPU mode


def bf16_emulated(device: torch.device) -> bool:
    """Return True on an NVIDIA GPU without bf16 tensor cores (compute capability < 8.0, e.g. a T4).

    PyTorch still runs bf16 there, but not on tensor cores; False for the CPU, MPS, ROCm and no CUDA GPU.
    """
    dev = torch.device(device)
    if dev.type != "cuda" or torch.version.hip or not torch.cuda.is_available():
        return False
    with torch.cuda.device(dev):
        if "including_emulation" in inspect.signature(torch.cuda.is_bf16_supported).parameters:
            return not torch.cuda.is_bf16_supported(including_emulation=False)
        return torch.cuda.get_device_capability(dev)[0] < 8


@dataclass(frozen=True)
class Side:
    """One side of a comparison: where, which dtype, and its checked timing or why it was not run."""

    device: str
    dtype: str
    threads: int
    timing: Timing | None = None
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
        return f"CPU {self.dtype} ({self.threads} luồng)" if self.is_cpu else f"{self.device} {self.dtype}"

    @property
    def seconds(self) -> float | None:
        """Median seconds per matmul, or None when not measured."""
        return None if self.timing is None else self.timing.median_s

    @property
    def percent_of_peak(self) -> float | None:
        """Achieved speed as % of the documented peak, when both are known."""
        if self.timing is None or self.peak_tflops is None:
            return None
        return 100.0 * self.timing.flops_per_s / 1e12 / self.peak_tflops

    def line(self) -> str:
        """Return this side as one line of text."""
        if not self.measured:
            return f"{self.name}: {self.skipped}"
        t = self.timing
        text = (f"{self.name}: {format_seconds(t.median_s)} (min {format_seconds(t.min_s)} · max "
                f"{format_seconds(t.max_s)}; trung vị {t.repeats} lần, warm-up {t.warmup}) · "
                f"{_format_flops(t.flops_per_s)}")
        if self.percent_of_peak is not None:
            text += f" = {self.percent_of_peak:.0f}% đỉnh công bố {self.peak_tflops:g} TFLOP/s"
        return text


@dataclass(frozen=True, repr=False)
class DtypeComparison(_Printable):
    """One N×N matmul on an accelerator in fp32 and a 16-bit dtype (`sides` 0, 1), and on the CPU (side 2)."""

    n: int
    sides: tuple[Side, ...]
    device_name: str = ""
    spec: gpu_specs.GpuSpec | None = None
    bf16_emulated: bool = False

    @property
    def noise(self) -> str | None:
        """The "⚠️ số đo nhiễu" line when a measured side's repeats disagree, else None."""
        return _noise_line([f"{side.name}: {sign}" for side in self.sides if side.measured
                            for sign in _signs(side.timing.times_s, None)])

    def sentences(self) -> list[str]:
        """Return the comparisons the measurements support, one sentence each."""
        fp32, low, cpu = (*self.sides, None)[:3]  # no CPU side when the device is the CPU
        where = "CPU" if fp32.is_cpu else fp32.device
        out = []
        if fp32.measured and low.measured:
            why = " (tensor core)" if self.spec is not None and self.spec.tensor_cores else ""
            speed = _speed_words(fp32.seconds / low.seconds)
            out.append(f"Trên cùng {where}, {low.dtype}{why} {speed} so với fp32.")
        if cpu is not None and fp32.measured and cpu.measured:
            out.append(f"{where} fp32 {_speed_words(cpu.seconds / fp32.seconds)} so với {cpu.name}.")
        return out

    def notes(self) -> list[str]:
        """Return remarks on the conditions (a size tensor cores handle less well, emulated bf16)."""
        out, low = [], self.sides[1]
        if low.device.startswith("cuda") and self.n % _TENSOR_CORE_MULTIPLE:
            out.append(f"ℹ️ N={self.n} không chia hết cho {_TENSOR_CORE_MULTIPLE}: tensor core vẫn được dùng nhưng "
                       f"kém hiệu quả hơn; chọn chiều là bội của {_TENSOR_CORE_MULTIPLE} ({_TENSOR_CORE_SOURCE}).")
        if low.dtype == "bf16" and self.bf16_emulated:
            out.append("ℹ️ GPU này không có tensor core cho bf16 (chỉ có từ compute capability 8.0, Ampere): PyTorch "
                       "vẫn nhân bf16 được nhưng giả lập, không bằng tensor core, nên bf16 ở đây không nói gì về tốc "
                       f"độ bf16 trên A100/H100/L4. Muốn thấy tensor core, chọn fp16 ({_BF16_SOURCE}).")
        return out

    def __str__(self) -> str:
        head = (f"N={self.n} ({matmul_flops(self.n) / 1e9:.3g} GFLOP mỗi phép nhân) · mỗi phía được kiểm tra với "
                "float64 trước khi đo" + (f" · {self.device_name}" if self.device_name else ""))
        lines = [head] + [f"  {side.line()}" for side in self.sides]
        lines += [f"→ {s}" for s in self.sentences()] or [f"→ N={self.n}: không đủ phía được đo để so sánh."]
        if any(s.measured and not s.is_cpu for s in self.sides):
            source = self.spec.source if self.spec else "không có (GPU này không có trong bảng gpu_specs)"
            lines.append(f"GPU được synchronize trước và sau mỗi lần đo. Số đỉnh: {source}.")
        return "\n".join(lines + ([self.noise] if self.noise else []) + self.notes())


def run_side(n: int, device: torch.device, dtype: torch.dtype, *, threads: int, max_call_s: float,
             max_time_s: float, peak_tflops: float | None = None) -> Side:
    """Check, then time one N×N matmul within `max_call_s` per call and `max_time_s` in all; return the side.

    A side estimated too slow, one that does not fit in memory, or one whose dtype the device cannot run
    comes back with ``skipped`` saying why.
    """
    name = format_name(dtype)
    base = {"device": str(device), "dtype": name, "threads": threads, "peak_tflops": peak_tflops}
    if not _fits(n, device, dtype):
        return Side(**base, skipped=f"⏭️ không đo N={n} {name}: ma trận không vừa bộ nhớ còn trống.")
    try:
        estimate = _probe_call_s(n, device, dtype, threads, max_call_s)
        if estimate > max_call_s:
            who = f"CPU ({threads} luồng)" if device.type == "cpu" else str(device)
            return Side(**base, skipped=f"⏭️ không đo N={n} {name} trên {who}: ước lượng "
                                        f"~{format_seconds(estimate)} mỗi phép nhân, quá giới hạn {max_call_s:g} s "
                                        "của widget.")
        a, b = _inputs(n, device, dtype)
        _assert_correct(a, b, a @ b, dtype, device)
        timing = _measure(lambda: a @ b, device, repeats=5, warmup=2, threads=threads,
                          flops=matmul_flops(n), label=_label(n, dtype), max_time_s=max_time_s)
    except (RuntimeError, TypeError, NotImplementedError) as exc:  # a dtype it cannot run, OOM, wrong result
        return Side(**base, skipped=f"❌ {short_message(exc, max_lines=2)}")
    return Side(**base, timing=timing)


def compare_dtypes(n: int, device: torch.device, low: torch.dtype, *, threads: int) -> DtypeComparison:
    """Check, then time an N×N matmul on `device` in fp32 and in `low`, and on the CPU in fp32, each bounded.

    The accelerator's sides get 2 s per estimated matmul and 3 s in all, the CPU's (also when `device` is
    the CPU) 1 s and 2 s; ``str()`` of the result is what the speed widget shows.
    """
    spec = gpu_specs.spec_for_device(device) if device.type == "cuda" else None
    limits = (CPU_MAX_CALL_S, CPU_MAX_TIME_S) if device.type == "cpu" else (_MAX_CALL_S, _MAX_TIME_S)
    sides = [run_side(n, device, dt, threads=threads, max_call_s=limits[0], max_time_s=limits[1],
                      peak_tflops=spec.peak_tflops(dt) if spec else None)
             for dt in (torch.float32, low)]
    if device.type != "cpu":
        sides.append(run_side(n, torch.device("cpu"), torch.float32, threads=threads,
                              max_call_s=CPU_MAX_CALL_S, max_time_s=CPU_MAX_TIME_S))
    name = ""
    if device.type == "cuda":
        torch.cuda.empty_cache()  # give the measurement's cached blocks back to the other cells
        name = torch.cuda.get_device_name(device)
    return DtypeComparison(n=n, sides=tuple(sides), device_name=name, spec=spec,
                           bf16_emulated=low == torch.bfloat16 and bf16_emulated(device))

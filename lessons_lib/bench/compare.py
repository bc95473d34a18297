"""Check, then time one matmul size two ways (CPU vs accelerator, or 1 thread vs all)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..flops import matmul_flops
from ..i18n import tr
from ._checks import _check_positive_int, _check_positive_number
from .devices import cpu_threads, resolve_device
from .dtypes import _SHORT, resolve_dtype
from .matmul import _assert_correct, make_matmul_inputs
from .noise import _signs, noise_line
from .threads import CLOSE, threads_reason
from .timing import Timing, measure
from .units import format_seconds


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

    @property
    def threads_only(self) -> bool:
        """Whether both sides ran on the CPU (1 thread vs all: the comparison on a machine without a GPU)."""
        return (self.baseline is not None and self.other is not None and self.baseline.device.startswith("cpu")
                and self.other.device.startswith("cpu"))

    @property
    def more_threads_not_faster(self) -> bool:
        """Whether a 1-thread vs all-threads comparison found all threads no faster (within 1.2×) or slower."""
        return self.threads_only and self.other.threads > 1 and self.speedup < CLOSE

    @property
    def noise(self) -> str | None:
        """The "⚠️ số đo nhiễu" line when either side's repeats disagree, else None."""
        seen = [f"{_who(t)}: {sign}" for t in (self.baseline, self.other) if t is not None
                for sign in _signs(list(t.times_s), t.expected_s)]
        return noise_line(seen)

    def verdict(self) -> str:
        """Return one sentence built from the measured numbers."""
        if self.skipped:
            return self.skipped
        s = self.speedup
        faster = tr(f"nhanh hơn {s:.1f}×", f"faster by {s:.1f}×") if s >= 1 else tr(
            f"CHẬM hơn {1 / s:.1f}×", f"SLOWER by {1 / s:.1f}×")
        who = _who(self.other)
        base = _who(self.baseline)
        copy = tr(" (tính cả thời gian chép CPU→GPU→CPU)", " (copies CPU→GPU→CPU included)") if self.include_copy else ""
        text = tr(f"N={self.n} {self.dtype}: {who}{copy} {faster} so với {base}.",
                  f"N={self.n} {self.dtype}: {who}{copy} is {faster} than {base}.")
        if self.more_threads_not_faster:
            text += " " + threads_reason(self.other.threads)
        return text

    def __str__(self) -> str:
        if self.skipped:
            return self.skipped
        check = tr("✅ kết quả đúng (sai số tương đối ", "✅ results correct (relative error ") + (
            f"{self.errors[0]:.1e} / {self.errors[1]:.1e})")
        lines = [check, f"  {self.baseline}", f"  {self.other}", "→ " + self.verdict()]
        if self.noise:
            lines.append(self.noise)
        return "\n".join(lines)

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

    Scaling from a tiny size misleads both ways: on a CPU small matmuls run on faster paths (the data fits
    in cache), so the estimate comes out too low; on a GPU a small matmul is dominated by the fixed launch
    cost, so the estimate comes out far too high (a T4 would "need" seconds for N=8192). So the probe grows
    while the estimate is near the limit, and also while it is over the limit but the probe itself took
    under a millisecond (launch-bound, not to be trusted) and the next probe is still cheap. It stops at
    N/2 at the latest. Each probe is the fastest of 3 calls: work from other programs only adds time, so
    one disturbed call (or two, on a busy machine) cannot skip a size.
    """
    size = min(n, 128)
    while True:
        a, b = make_matmul_inputs(size, dev, dt)
        t = measure(lambda a=a, b=b: a @ b, device=dev, repeats=3, warmup=1, number=1, threads=threads,
                    warn=False).min_s
        estimate = t * (n / size) ** 3
        if size == n or 2 * size > n // 2 or 4 * estimate < limit_s:
            return estimate
        if estimate > limit_s and (t >= 1e-3 or 4 * 8 * t > limit_s):
            return estimate  # a probe big enough to trust, or probing further would itself be slow
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
            other = " (hoặc fp32 trên CPU)" if dt != torch.float32 and where.type == "cpu" else ""
            return Comparison(n, _SHORT[dt], None, None, None, include_copy, skipped=(
                f"⏭️ Không chạy N={n} {_SHORT[dt]} trên {where} ({th} luồng): ước lượng một phép nhân mất "
                f"~{format_seconds(estimate)} > giới hạn {max_call_s:g} s. Chọn N nhỏ hơn{other}. Ước lượng được "
                "tính từ một phép nhân nhỏ hơn vừa đo; máy đang bận thì nó có thể cao hơn thật, khi đó đo lại sau."))
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
                               flops=matmul_flops(n), label=label, max_time_s=max_time_s, warn=False))
    return Comparison(n, _SHORT[dt], timings[0], timings[1], (errors[0], errors[1]), include_copy)

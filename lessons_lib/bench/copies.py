"""Time copying matmul data to an accelerator and back against computing on the CPU."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..flops import matmul_flops
from ..i18n import tr
from ._checks import _check_positive_int
from .devices import resolve_device
from .dtypes import _SHORT, resolve_dtype
from .matmul import _assert_correct, make_matmul_inputs
from .timing import Timing, measure
from .units import format_seconds


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
            f"N={self.n}: chép {format_seconds(copy)} + tính {format_seconds(self.compute.median_s)} trên "
            f"{self.device} = {format_seconds(self.total_s)} (chép chiếm {share:.0f}%) so với CPU "
            f"{format_seconds(self.cpu.median_s)} → " + ("đáng chuyển sang GPU." if better else
                                                          "KHÔNG đáng: thời gian chép ăn hết phần lợi."),
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

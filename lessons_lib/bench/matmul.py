"""Create matmul inputs, check a matmul result against float64, then time a checked matmul."""

from __future__ import annotations

import torch

from ..flops import matmul_flops
from ..i18n import tr
from ._checks import _check_positive_int
from .devices import resolve_device
from .dtypes import _SHORT, resolve_dtype
from .timing import Timing, measure

# Largest relative error (Frobenius norm, against a float64 reference) that still counts as a correct matmul.
# fp32 allows TF32 (about 1e-3), in case the learner turned it on.
_TOLERANCE = {torch.float32: 2e-3, torch.float16: 1e-2, torch.bfloat16: 5e-2}


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

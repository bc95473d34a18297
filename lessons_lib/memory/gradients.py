"""Copy the parameters' gradients and compare two such copies."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from ..i18n import tr
from ._checks import _check_module, _check_number


def gradient_snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Return a copy of every parameter's ``.grad`` by name (parameters without a gradient are left out)."""
    _check_module(model)
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


@dataclass(frozen=True)
class GradientComparison:
    """The result of `compare_gradients`."""

    match: bool
    max_abs_diff: float
    names: tuple[str, ...]

    def __str__(self) -> str:
        verdict = tr("khớp", "match") if self.match else tr("KHÔNG khớp", "do NOT match")
        return tr(f"{len(self.names)} gradient {verdict} (sai khác tuyệt đối lớn nhất {self.max_abs_diff:.2e})",
                  f"{len(self.names)} gradients {verdict} (largest absolute difference {self.max_abs_diff:.2e})")


def compare_gradients(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor],
                      rtol: float = 1e-5, atol: float = 1e-6) -> GradientComparison:
    """Compare two `gradient_snapshot` results with ``torch.allclose``; both must name the same parameters."""
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, Mapping) or not all(isinstance(t, torch.Tensor) for t in value.values()):
            raise TypeError(tr(f"{name} phải là dict tên → tensor (từ gradient_snapshot), không phải "
                               f"{type(value).__name__}",
                               f"{name} must be a dict name -> tensor (from gradient_snapshot), not "
                               f"{type(value).__name__}"))
    if set(a) != set(b):
        raise ValueError(tr(f"Hai snapshot có tên tham số khác nhau: {sorted(set(a) ^ set(b))}",
                            f"The snapshots name different parameters: {sorted(set(a) ^ set(b))}"))
    _check_number("rtol", rtol, 0)
    _check_number("atol", atol, 0)
    match, worst = True, 0.0
    for name in a:
        x, y = a[name], b[name]
        if x.shape != y.shape:
            raise ValueError(tr(f"Gradient {name!r} khác shape: {tuple(x.shape)} và {tuple(y.shape)}",
                                f"Gradient {name!r} has different shapes: {tuple(x.shape)} and {tuple(y.shape)}"))
        y = y.to(x.device)
        match &= bool(torch.allclose(x, y, rtol=rtol, atol=atol))
        if x.numel():
            worst = max(worst, float((x - y).abs().max()))
    return GradientComparison(match, worst, tuple(a))

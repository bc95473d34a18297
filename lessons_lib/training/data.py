"""Build a seeded synthetic classification task and a small seeded MLP (no downloads)."""

from __future__ import annotations

import math

import torch
from torch import nn

from ..device import pick_device
from ._checks import _check_float_dtype, _check_int


def _factory_device(device) -> torch.device:
    return torch.device("cpu") if device is None else pick_device(device)


def make_classification_data(
    n_samples: int = 1024,
    n_features: int = 32,
    n_classes: int = 4,
    *,
    seed: int = 0,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return a seeded synthetic classification task ``(x, y)``: Gaussian inputs, labels from a random teacher net.

    The same seed gives the same numbers on every machine (they are drawn on the CPU, then moved).

    Args:
        n_samples: Number of rows.
        n_features: Input width.
        n_classes: Number of labels (at least 2).
        seed: Random seed; the global RNG is not touched.
        device: Where to put the tensors (None: CPU).
        dtype: Float dtype of ``x`` (``y`` is int64).

    Returns:
        ``x`` of shape (n_samples, n_features) and ``y`` of shape (n_samples,) with values in [0, n_classes).
    """
    _check_int("n_samples", n_samples)
    _check_int("n_features", n_features)
    _check_int("n_classes", n_classes, minimum=2)
    _check_int("seed", seed, minimum=0)
    _check_float_dtype(dtype)
    device = _factory_device(device)
    gen = torch.Generator().manual_seed(seed)
    hidden = 32
    x = torch.randn(n_samples, n_features, generator=gen)
    w1 = torch.randn(n_features, hidden, generator=gen) / math.sqrt(n_features)
    w2 = torch.randn(hidden, n_classes, generator=gen) / math.sqrt(hidden)
    y = (torch.tanh(2.0 * (x @ w1)) @ w2).argmax(dim=1)
    return x.to(device=device, dtype=dtype), y.to(device)


def make_mlp(
    in_features: int = 32,
    out_features: int = 4,
    hidden: int = 64,
    depth: int = 2,
    *,
    seed: int = 0,
    device: str | torch.device | None = None,
    dtype: torch.dtype = torch.float32,
) -> nn.Sequential:
    """Return a seeded MLP: ``depth`` hidden layers of width ``hidden`` (Linear + ReLU), then a Linear head.

    The same seed gives the same weights on every device (built on the CPU, then moved); the global RNG
    is left as it was.

    Args:
        in_features: Input width.
        out_features: Output width (number of classes).
        hidden: Width of the hidden layers.
        depth: Number of hidden layers (at least 1).
        seed: Random seed of the initialisation.
        device: Where to put the parameters (None: CPU).
        dtype: Float dtype of the parameters (keep float32 for AMP).

    Returns:
        An ``nn.Sequential``.
    """
    for name, value in (("in_features", in_features), ("out_features", out_features), ("hidden", hidden),
                        ("depth", depth)):
        _check_int(name, value)
    _check_int("seed", seed, minimum=0)
    _check_float_dtype(dtype)
    device = _factory_device(device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers: list[nn.Module] = [nn.Linear(in_features, hidden), nn.ReLU()]
        for _ in range(depth - 1):
            layers += [nn.Linear(hidden, hidden), nn.ReLU()]
        layers.append(nn.Linear(hidden, out_features))
        model = nn.Sequential(*layers)
    return model.to(device=device, dtype=dtype)

"""Build a seeded synthetic classification task and a small seeded MLP (no downloads)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .._validate import check_int
from ..device import pick_device


def _checked_device(seed, device) -> torch.device:
    """Check `seed`, then return the torch.device `device` names (None: the CPU)."""
    check_int("seed", seed, 0)
    return torch.device("cpu") if device is None else pick_device(device)


def make_classification_data(n_samples: int = 1024, n_features: int = 32, n_classes: int = 4, *, seed: int = 0,
                             device: str | torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Return a seeded task ``(x, y)`` drawn on the CPU (labels from a random teacher net), moved to `device`."""
    check_int("n_samples", n_samples, 1)
    check_int("n_features", n_features, 1)
    check_int("n_classes", n_classes, 2)
    device = _checked_device(seed, device)
    gen = torch.Generator().manual_seed(seed)
    hidden = 32
    x = torch.randn(n_samples, n_features, generator=gen)
    w1 = torch.randn(n_features, hidden, generator=gen) / math.sqrt(n_features)
    w2 = torch.randn(hidden, n_classes, generator=gen) / math.sqrt(hidden)
    y = (torch.tanh(2.0 * (x @ w1)) @ w2).argmax(dim=1)
    return x.to(device), y.to(device)


def make_mlp(in_features: int = 32, out_features: int = 4, hidden: int = 64, depth: int = 2, *, seed: int = 0,
             device: str | torch.device | None = None) -> nn.Sequential:
    """Return a seeded MLP: `depth` hidden layers of width `hidden` (Linear + ReLU), then a Linear head."""
    for name, value in (("in_features", in_features), ("out_features", out_features), ("hidden", hidden),
                        ("depth", depth)):
        check_int(name, value, 1)
    device = _checked_device(seed, device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers: list[nn.Module] = [nn.Linear(in_features, hidden), nn.ReLU()]
        for _ in range(depth - 1):
            layers += [nn.Linear(hidden, hidden), nn.ReLU()]
        layers.append(nn.Linear(hidden, out_features))
    return nn.Sequential(*layers).to(device)

"""Tiny seeded models and data, AMP planning, and an AMP-aware training step that runs on CPU, CUDA and MPS."""

from __future__ import annotations

from .amp import amp_speed_verdict, autocast_dtypes, plan_amp, recommend_amp
from .data import make_classification_data, make_mlp
from .trainer import profile_train_step, train

__all__ = [
    "amp_speed_verdict", "autocast_dtypes", "make_classification_data", "make_mlp", "plan_amp",
    "profile_train_step", "recommend_amp", "train",
]

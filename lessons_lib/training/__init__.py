"""Tiny models, synthetic data and an AMP-aware training step that runs on CPU, CUDA and MPS.

The public pieces, in the order a notebook uses them:

- ``make_classification_data`` and ``make_mlp``: a seeded synthetic task and a small MLP (no downloads).
- ``recommend_amp`` and ``plan_amp``: which low-precision format to use on a device, and a checked
  ``AmpPlan`` (autocast dtype, GradScaler on/off) that refuses combinations that cannot work or make no sense.
- ``AmpTrainer`` (one step: autocast forward, scaled backward, optional clipping) and ``train`` (a loop).
- ``profile_train_step``: median step time and peak GPU memory of one configuration; ``amp_speed_verdict``
  compares two of them and says when the measurement is too noisy to read.
- ``autocast_dtypes``: which dtype each common op returns inside autocast on a device.

Where each piece lives: ``data`` (synthetic task, MLP), ``amp`` (modes, support probes, ``recommend_amp``,
``plan_amp``, ``AmpPlan``), ``trainer`` (``AmpTrainer``, ``train``), ``profile`` (``profile_train_step``),
``autocast_ops`` (``autocast_dtypes``); argument checks are in ``_checks``.
"""

from __future__ import annotations

from .amp import (
    AMP_MODES,
    AmpPlan,
    amp_speed_verdict,
    autocast_supported,
    grad_scaler_supported,
    parse_amp,
    plan_amp,
    recommend_amp,
)
from .autocast_ops import autocast_dtypes
from .data import make_classification_data, make_mlp
from .profile import StepProfile, profile_train_step
from .trainer import AmpTrainer, StepResult, TrainResult, train

__all__ = [
    "AMP_MODES",
    "AmpPlan",
    "AmpTrainer",
    "StepProfile",
    "StepResult",
    "TrainResult",
    "amp_speed_verdict",
    "autocast_dtypes",
    "autocast_supported",
    "grad_scaler_supported",
    "make_classification_data",
    "make_mlp",
    "parse_amp",
    "plan_amp",
    "profile_train_step",
    "recommend_amp",
    "train",
]

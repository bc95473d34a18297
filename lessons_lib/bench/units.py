"""Format durations and FLOP/s with a readable unit."""

from __future__ import annotations

import math


def format_seconds(seconds: float) -> str:
    """Return a duration with a readable unit: "850 ns", "12.3 µs", "4.56 ms", "1.23 s"."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(f"seconds must be a number, got {type(seconds).__name__}")
    if seconds < 0 or math.isnan(seconds):
        raise ValueError(f"seconds must be >= 0, got {seconds}")
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{_three_digits(seconds / scale)} {unit}"
    return f"{_three_digits(seconds / 1e-9)} ns"


def format_flops(flops_per_s: float) -> str:
    """Return a speed in FLOP/s with a readable unit: "925 kFLOP/s", "139 GFLOP/s", "4.20 TFLOP/s"."""
    if isinstance(flops_per_s, bool) or not isinstance(flops_per_s, (int, float)):
        raise TypeError(f"flops_per_s must be a number, got {type(flops_per_s).__name__}")
    if flops_per_s < 0:
        raise ValueError(f"flops_per_s must be >= 0, got {flops_per_s}")
    for unit, scale in (("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6), ("kFLOP/s", 1e3)):
        if flops_per_s >= scale:
            return f"{_three_digits(flops_per_s / scale)} {unit}"
    return f"{_three_digits(flops_per_s)} FLOP/s"


def _three_digits(x: float) -> str:
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"

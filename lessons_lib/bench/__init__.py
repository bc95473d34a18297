"""Time PyTorch work correctly on CPU, CUDA and MPS, and sweep matmul sizes under a time budget."""

from ..flops import matmul_flops
from .matmul import compare_matmul, copy_vs_compute, matmul_bytes, matmul_error, threads_verdict, time_matmul
from .sweep import crossover, estimate_seconds, matmul_sweep
from .timing import Timing, cpu_threads, format_count, format_seconds, measure, noise_warning, synchronize

__all__ = [
    "Timing", "compare_matmul", "copy_vs_compute", "cpu_threads", "crossover", "estimate_seconds",
    "format_count", "format_seconds", "matmul_bytes", "matmul_error", "matmul_flops", "matmul_sweep", "measure",
    "noise_warning", "synchronize", "threads_verdict", "time_matmul",
]

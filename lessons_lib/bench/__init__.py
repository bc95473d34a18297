"""Time PyTorch work correctly on CPU, CUDA and MPS, and sweep matmul sizes under a time budget.

The rules every function here follows (and the notebooks teach):

* check the result before timing it (a fast wrong answer is worth nothing);
* warm up first (thread pools, cuBLAS handles, kernel loading and autotuning happen on the first calls);
* synchronize the accelerator before reading the clock (GPU work is queued asynchronously);
* repeat and report the median, with min and max so the spread is visible;
* on the CPU use every CPU this process may run on unless told otherwise, and say how many.

Where things live (everything is importable from ``lessons_lib.bench``):

- `resolve_dtype`, `dtype_label`: float32 / float16 / bfloat16 by name (``dtypes``).
- `resolve_device`, `cpu_threads`, `synchronize`: the device and its clock (``devices``).
- `format_seconds`, `format_flops`: readable units (``units``).
- `measure` and its result `Timing`: warm-up, synchronize, median of repeats (``timing``); it prints
  `noise_warning`'s "⚠️ số đo nhiễu" line when the repeats disagree (``noise``).
- `make_matmul_inputs`, `matmul_error`, `matmul_tolerance`, `time_matmul`: checked matmuls (``matmul``).
- `memory_available`, `matmul_bytes`, `fits_in_memory`: will a size fit (``memory_fit``).
- `matmul_sweep`, `SweepResult`, `MatmulRecord`, `default_budget_s`, `DEFAULT_SIZES`: sweeps (``sweep``).
- `speedup`, `crossover`, `Crossover`, `estimate_seconds`: reading two sweeps (``analysis``).
- `compare_matmul`, `Comparison`: one size timed two ways (``compare``).
- `copy_vs_compute`, `CopyCost`: copies vs compute on an accelerator (``copies``).
- `compare_dtypes`, `DtypeComparison`: fp32 vs fp16/bf16 on an accelerator, next to the CPU, each side bounded
  in time (``precisions``; what the speed widget shows on a GPU); `bf16_emulated`: a GPU without bf16 tensor cores.
- `threads_verdict`, `threads_reason`, `physical_cores`: 1 CPU thread against several, and why more can be slower
  (``threads``).
- `matmul_flops`: re-exported from ``lessons_lib.flops``.

Tests that replace a helper must patch the module that looks it up (e.g. ``bench.sweep.make_matmul_inputs``).
"""

from __future__ import annotations

from ..flops import matmul_flops
from ._checks import _check_positive_number  # noqa: F401  (used as bench._check_positive_number)
from .analysis import Crossover, crossover, estimate_seconds, speedup
from .compare import Comparison, compare_matmul
from .copies import CopyCost, copy_vs_compute
from .devices import cpu_threads, resolve_device, synchronize
from .dtypes import dtype_label, resolve_dtype
from .matmul import make_matmul_inputs, matmul_error, matmul_tolerance, time_matmul
from .memory_fit import fits_in_memory, matmul_bytes, memory_available
from .noise import noise_warning
from .precisions import DtypeComparison, bf16_emulated, compare_dtypes
from .sweep import (  # noqa: F401  (DEFAULT_BUDGET_S, _check_sizes: used as bench.X)
    DEFAULT_BUDGET_S,
    DEFAULT_SIZES,
    MatmulRecord,
    SweepResult,
    _check_sizes,
    default_budget_s,
    matmul_sweep,
)
from .threads import physical_cores, threads_reason, threads_verdict
from .timing import Timing, measure
from .units import format_flops, format_seconds

__all__ = [
    "DEFAULT_SIZES", "Comparison", "CopyCost", "Crossover", "DtypeComparison", "MatmulRecord", "SweepResult", "Timing",
    "bf16_emulated", "compare_dtypes", "compare_matmul", "copy_vs_compute", "cpu_threads", "crossover",
    "default_budget_s", "dtype_label", "estimate_seconds", "fits_in_memory", "format_flops", "format_seconds",
    "make_matmul_inputs", "matmul_bytes", "matmul_error", "matmul_flops", "matmul_sweep", "matmul_tolerance", "measure",
    "memory_available", "noise_warning", "physical_cores", "resolve_device", "resolve_dtype", "speedup", "synchronize",
    "threads_reason", "threads_verdict", "time_matmul",
]

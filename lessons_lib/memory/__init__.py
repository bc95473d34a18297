"""Where training memory goes, measured: state sizes, saved activations, GPU allocator stats, OOM and its fixes.

Everything here is measured from real tensors on any device (CPU, CUDA, MPS, even ``meta``), except the
GPU allocator stats and the OOM demo, which need CUDA and say so instead of failing:

- `format_bytes`: 1536 -> "1.50 KiB" (``_bytes``).
- `training_state_sizes`: exact bytes of parameters, gradients and optimizer state (after a real step)
  (``sizes``).
- `SavedTensorMeter`: a context manager that counts the bytes autograd saves for backward (activations),
  with a ``timeline`` of the bytes held after each change (``meter``); `gradient_snapshot` and `compare_gradients` check two ways of training agree (``gradients``).
- `gpu_memory_stats`: allocated / reserved / peak of the CUDA caching allocator, or "not available"
  (``cuda``). (Named "stats", not "snapshot": PyTorch's own memory snapshot is
  ``torch.cuda.memory._dump_snapshot``, a different tool.)
- `cuda_memory_cap` and `oom_demo`: a capped, guarded CUDA out-of-memory demo that always restores the cap
  (``cuda``).
- `is_oom_error`, `OOM_ERRORS`, `MemoryBudgetExceeded`: what counts as out of memory (``oom``).
- `parse_oom_message`: read a CUDA OOM message field by field (``oom_message``).
- `find_max_batch_size`: halve the batch on OOM (on CPU: against a memory budget, see `MemoryBudgetExceeded`)
  (``batch_size``).
- `oom_safe_train_step` and `train_with_oom_retry`: the OOM-safe train step, with a retry loop that
  lowers the micro-batch and accumulates gradients so the effective batch stays the same (``oom_retry``).
- `blas_workspace_estimate`: the cuBLAS/cuBLASLt workspaces the running torch version keeps allocated
  (``workspace``).
- `sharded_training_memory`: per-GPU bytes of mixed-precision Adam training under DDP and ZeRO-1/2/3
  (``sizes``).

Every CUDA call goes through ``lessons_lib.memory.cuda._cuda``; tests replace that attribute with a fake.
"""

from __future__ import annotations

from ._bytes import format_bytes, parse_bytes
from .batch_size import BatchSizeSearch, find_max_batch_size
from .cuda import (
    GpuMemoryStats,
    OomDemoResult,
    cuda_memory_cap,
    gpu_memory_stats,
    oom_demo,
    release_cached_memory,
)
from .gradients import GradientComparison, compare_gradients, gradient_snapshot
from .meter import SavedTensorMeter, saved_activation_bytes
from .oom import OOM_ERRORS, MemoryBudgetExceeded, TorchOutOfMemoryError, is_oom_error
from .oom_message import OomMessage, parse_oom_message
from .oom_retry import RetryLog, oom_safe_train_step, train_with_oom_retry
from .sizes import (
    ShardedMemory,
    StateSizes,
    optimizer_state_bytes,
    sharded_training_memory,
    trainable_bytes,
    training_state_sizes,
)
from .workspace import WorkspaceEstimate, blas_workspace_estimate

__all__ = [
    "OOM_ERRORS",
    "BatchSizeSearch",
    "GpuMemoryStats",
    "GradientComparison",
    "MemoryBudgetExceeded",
    "OomDemoResult",
    "OomMessage",
    "RetryLog",
    "SavedTensorMeter",
    "ShardedMemory",
    "StateSizes",
    "TorchOutOfMemoryError",
    "WorkspaceEstimate",
    "blas_workspace_estimate",
    "compare_gradients",
    "cuda_memory_cap",
    "find_max_batch_size",
    "format_bytes",
    "gpu_memory_stats",
    "gradient_snapshot",
    "is_oom_error",
    "oom_demo",
    "oom_safe_train_step",
    "optimizer_state_bytes",
    "parse_bytes",
    "parse_oom_message",
    "release_cached_memory",
    "saved_activation_bytes",
    "sharded_training_memory",
    "train_with_oom_retry",
    "trainable_bytes",
    "training_state_sizes",
]

"""Where training memory goes, measured from real tensors on any device; the CUDA parts say when there is no GPU."""

from __future__ import annotations

from .cuda import cuda_memory_cap, gpu_memory_stats, oom_demo
from .meter import SavedTensorMeter, compare_gradients, gradient_snapshot, saved_activation_bytes
from .oom import OOM_ERRORS, MemoryBudgetExceeded, is_oom_error, parse_oom_message
from .oom_retry import find_max_batch_size, oom_safe_train_step, train_with_oom_retry
from .sizes import format_bytes, sharded_training_memory, training_state_sizes

__all__ = [
    "OOM_ERRORS", "MemoryBudgetExceeded", "SavedTensorMeter", "compare_gradients", "cuda_memory_cap",
    "find_max_batch_size", "format_bytes", "gpu_memory_stats", "gradient_snapshot", "is_oom_error",
    "oom_demo", "oom_safe_train_step", "parse_oom_message", "saved_activation_bytes",
    "sharded_training_memory", "train_with_oom_retry", "training_state_sizes",
]

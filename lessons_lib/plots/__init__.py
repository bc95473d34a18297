"""Plots of the course: speed curves, memory breakdowns, confusion matrices."""

from .classification import plot_confusion_matrix
from .ddp import plot_ddp_differences, plot_ddp_shards
from .diagrams import cuda_stack
from .memory import plot_activation_timeline, plot_memory_breakdown
from .speed import plot_speedup, plot_tflops, plot_time_vs_n
from .trace import plot_trace
from .training import plot_bar_comparison, plot_loss_curves

__all__ = [
    "cuda_stack", "plot_activation_timeline", "plot_bar_comparison", "plot_confusion_matrix",
    "plot_ddp_differences", "plot_ddp_shards", "plot_loss_curves", "plot_memory_breakdown", "plot_speedup",
    "plot_tflops", "plot_time_vs_n", "plot_trace",
]

"""Plots of the course: speed curves, memory breakdowns, number formats, confusion matrices.

Every function takes ``ax=None`` (a new figure when None), labels its units and returns the axes.
"""

from .classification import plot_confusion_matrix  # noqa: E402,F401
from .ddp import plot_ddp_differences, plot_ddp_shards  # noqa: E402,F401
from .diagrams import cuda_stack  # noqa: E402,F401
from .formats import plot_number_formats  # noqa: E402,F401
from .memory import plot_activation_timeline, plot_memory_breakdown  # noqa: E402,F401
from .speed import plot_speedup, plot_tflops, plot_time_vs_n  # noqa: E402,F401
from .trace import plot_trace  # noqa: E402,F401
from .training import plot_bar_comparison, plot_loss_curves  # noqa: E402,F401

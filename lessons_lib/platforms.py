"""Tell where the course runs (Colab, Kaggle, local) and how to get a GPU there; needs no torch."""

from __future__ import annotations

import os
import sys

from .i18n import tr


def detect_platform() -> str:
    """Return where this code runs: "colab", "kaggle" or "local"."""
    if "google.colab" in sys.modules or os.environ.get("COLAB_RELEASE_TAG"):
        return "colab"
    if os.environ.get("KAGGLE_KERNEL_RUN_TYPE") or os.path.isdir("/kaggle/working"):
        return "kaggle"
    return "local"


def how_to_get_gpu(min_gpus: int = 1) -> str:
    """Return a one-line hint on how to get a CUDA GPU (or several) on Colab, Kaggle or locally."""
    if not isinstance(min_gpus, int) or isinstance(min_gpus, bool):
        raise TypeError(f"min_gpus must be an int, got {type(min_gpus).__name__}")
    if min_gpus < 1:
        raise ValueError(f"min_gpus must be at least 1, got {min_gpus}")
    if min_gpus >= 2:
        return tr(
            "Kaggle: Settings → Accelerator → GPU T4 ×2 (miễn phí); Colab chỉ cho 1 GPU.",
            "Kaggle: Settings → Accelerator → GPU T4 ×2 (free); Colab gives only 1 GPU.",
        )
    return tr(
        "Colab: Runtime → Change runtime type → T4 GPU; Kaggle: Settings → Accelerator → GPU T4 ×2.",
        "Colab: Runtime → Change runtime type → T4 GPU; Kaggle: Settings → Accelerator → GPU T4 ×2.",
    )

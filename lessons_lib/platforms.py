"""Tell where the course runs (Colab, Kaggle, local) and how to get a GPU there; needs no torch."""

from __future__ import annotations

import os
import sys

_KAGGLE = "Kaggle: Settings → Accelerator → GPU T4 ×2"
_COLAB = "Colab: Runtime → Change runtime type → T4 GPU"


def detect_platform() -> str:
    """Return where this code runs: "colab", "kaggle" or "local"."""
    if "google.colab" in sys.modules or os.environ.get("COLAB_RELEASE_TAG"):
        return "colab"
    if os.environ.get("KAGGLE_KERNEL_RUN_TYPE") or os.path.isdir("/kaggle/working"):
        return "kaggle"
    return "local"


def how_to_get_gpu(min_gpus: int = 1, platform: str | None = None) -> str:
    """Return a one-line hint on getting `min_gpus` CUDA GPUs on `platform` (default: this one)."""
    platform = platform or detect_platform()
    if platform == "colab" and min_gpus == 1:
        return f"{_COLAB}, rồi chạy lại notebook từ đầu (runtime mới)."
    if platform == "kaggle":
        return f"{_KAGGLE}, rồi chạy lại notebook từ đầu (phiên mới)."
    if min_gpus >= 2:
        return f"{_KAGGLE} (miễn phí); Colab chỉ cho 1 GPU."
    return f"{_COLAB}; {_KAGGLE}."

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


PLATFORMS = ("colab", "kaggle", "local")


def how_to_get_gpu(min_gpus: int = 1, platform: str | None = None) -> str:
    """Return a one-line hint on how to get a CUDA GPU (or several) where the course runs.

    Args:
        min_gpus: How many GPUs are needed (Colab gives 1; Kaggle's T4 ×2 gives 2).
        platform: "colab", "kaggle" or "local" (default: detect_platform()). On Colab or Kaggle the hint names
            that platform's menu only; elsewhere both free options.

    Returns:
        The hint, in the current language.
    """
    if not isinstance(min_gpus, int) or isinstance(min_gpus, bool):
        raise TypeError(f"min_gpus must be an int, got {type(min_gpus).__name__}")
    if min_gpus < 1:
        raise ValueError(f"min_gpus must be at least 1, got {min_gpus}")
    if platform is None:
        platform = detect_platform()
    if platform not in PLATFORMS:
        raise ValueError(f"platform must be one of {PLATFORMS} or None (detect it), got {platform!r}")
    kaggle = tr("Kaggle: Settings → Accelerator → GPU T4 ×2", "Kaggle: Settings → Accelerator → GPU T4 ×2")
    if platform == "colab" and min_gpus == 1:
        return tr("Colab: Runtime → Change runtime type → T4 GPU, rồi chạy lại notebook từ đầu (runtime mới).",
                  "Colab: Runtime → Change runtime type → T4 GPU, then run the notebook again from the top "
                  "(a new runtime).")
    if platform == "kaggle":
        return tr(f"{kaggle}, rồi chạy lại notebook từ đầu (phiên mới).",
                  f"{kaggle}, then run the notebook again from the top (a new session).")
    if min_gpus >= 2:
        return tr(f"{kaggle} (miễn phí); Colab chỉ cho 1 GPU.", f"{kaggle} (free); Colab gives only 1 GPU.")
    return tr(f"Colab: Runtime → Change runtime type → T4 GPU; {kaggle}.",
              f"Colab: Runtime → Change runtime type → T4 GPU; {kaggle}.")

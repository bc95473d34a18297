"""Explanatory diagrams drawn with matplotlib (no measured data)."""

from __future__ import annotations

from ._axes import PALETTE, add_facts, get_ax

_CUDA_STACK = (
    ("Python: c = a @ b", "code của bạn"),
    ("PyTorch ATen dispatcher", "chọn kernel theo device + dtype"),
    ("kernel: cuBLAS cho a @ b", "conv: cuDNN; +, ReLU, sum: kernel riêng của ATen"),
    ("CUDA runtime", "cấp phát bộ nhớ, xếp kernel vào stream"),
    ("NVIDIA driver", "nói chuyện với phần cứng"),
    ("GPU: các SM chạy kernel", "hàng nghìn luồng song song"),
)
_COLORS = PALETTE[:6]


def cuda_stack(ax=None):
    """Draw the software stack from `a @ b` in Python down to the GPU's SMs; return the axes."""
    from matplotlib.colors import to_rgb
    from matplotlib.patches import FancyBboxPatch

    n = len(_CUDA_STACK)
    ax = get_ax(ax, figsize=(7.0, 0.75 * n + 0.5))
    for i, ((name, note), color) in enumerate(zip(_CUDA_STACK, _COLORS, strict=True)):
        y = n - 1 - i
        ink = "black" if sum(w * c for w, c in zip((0.3, 0.59, 0.11), to_rgb(color), strict=True)) > 0.45 else "white"
        ax.add_patch(FancyBboxPatch((0.05, y + 0.12), 0.9, 0.76, boxstyle="round,pad=0.02",
                                    facecolor=color, alpha=0.85, edgecolor="none"))
        ax.text(0.08, y + 0.5, name, va="center", ha="left", color=ink, fontsize=11, fontweight="bold")
        ax.text(0.92, y + 0.5, note, va="center", ha="right", color=ink, fontsize=9)
        if i < n - 1:
            ax.annotate("", xy=(0.5, y - 0.1), xytext=(0.5, y + 0.12), arrowprops={"arrowstyle": "-|>", "color": "#333333"})
    ax.set_xlim(0, 1)
    ax.set_ylim(0, n)
    ax.axis("off")
    add_facts(ax, "Các tầng từ trên xuống: " + " → ".join(f"{name} ({note})" for name, note in _CUDA_STACK))
    ax.set_title("Từ a @ b trong Python xuống GPU NVIDIA (AMD: ROCm, Apple: MPS, Intel: XPU)", fontsize=10)
    return ax

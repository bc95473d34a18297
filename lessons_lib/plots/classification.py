"""Classification plots: a confusion matrix with its counts written in the cells."""

from __future__ import annotations

from collections.abc import Sequence

from ._axes import get_ax


def _as_rows(cm) -> list[list[int]]:
    """Return `cm` (a square tensor, array or nested list of counts) as a list of rows of ints."""
    rows = cm.tolist() if hasattr(cm, "tolist") else cm
    shape_error = TypeError("cm phải là ma trận vuông số nguyên ≥ 0 (tensor, mảng NumPy hoặc list các hàng), vd "
                            "torch.bincount(y * 10 + pred, minlength=100).reshape(10, 10)")
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence) or not rows:
        raise shape_error
    out = []
    for row in rows:
        if isinstance(row, (str, bytes)) or not isinstance(row, Sequence) or len(row) != len(rows):
            raise shape_error
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v) for v in row):
            raise shape_error
        out.append([int(v) for v in row])
    return out


def plot_confusion_matrix(cm, ax=None):
    """Draw a confusion matrix (rows: true class, columns: predicted) with every count written in; return the axes."""
    rows = _as_rows(cm)
    n = len(rows)
    ax = get_ax(ax, figsize=(5.2, 4.6))
    image = ax.imshow(rows, cmap="Blues")
    ax.grid(False)  # the course style draws a grid; over an image it only hides the cells
    largest = max(max(row) for row in rows)
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            if value:
                ax.text(j, i, str(value), ha="center", va="center", fontsize=8,
                        color="white" if value > largest / 2 else "black")
    ax.set_xticks(range(n), [str(i) for i in range(n)])
    ax.set_yticks(range(n), [str(i) for i in range(n)])
    ax.set_xlabel("lớp mô hình đoán")
    ax.set_ylabel("lớp thật")
    total = sum(sum(row) for row in rows)
    correct = sum(rows[i][i] for i in range(n))
    if total:
        ax.set_title(f"Ma trận nhầm lẫn: đúng {correct}/{total} ({correct / total:.1%})\n"
                     "ngoài đường chéo là nhầm", fontsize=10)
    ax.figure.colorbar(image, ax=ax, label="số mẫu")
    return ax

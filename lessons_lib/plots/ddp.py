"""Plot a DDP demo run: which samples each rank trained on, and how far gradients and weights differ."""

from __future__ import annotations

from ..i18n import tr
from ._axes import get_ax

_FLOOR = 1e-12  # where an exact zero is drawn on the log axis


def _comparison(run):
    from ..ddp import DDPComparison, DDPRun

    if isinstance(run, DDPRun):
        return run.comparison
    if isinstance(run, DDPComparison):
        return run
    raise TypeError(tr(f"run phải là DDPRun (kết quả của launch() hoặc run_ddp_demo()) hoặc DDPComparison, "
                       f"không phải {type(run).__name__}",
                       f"run must be a DDPRun (from launch() or run_ddp_demo()) or a DDPComparison, not {type(run).__name__}"))


def _nothing_to_draw(ax, message: str):
    """Write `message` in the middle of empty axes (a failed or not yet compared run) and return the axes."""
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True, transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def plot_ddp_shards(run, ax=None):
    """Draw one row per rank: the samples of its shard, coloured by the step that used them.

    Args:
        run: The ``DDPRun`` returned by ``launch()`` or ``run_ddp_demo()``.
        ax: Axes to draw on (a new figure when None).

    Returns:
        The axes.
    """
    from ..ddp import DDPRun

    if not isinstance(run, DDPRun):
        raise TypeError(tr(f"run phải là DDPRun (kết quả của launch() hoặc run_ddp_demo()), không phải {type(run).__name__}",
                           f"run must be a DDPRun (from launch() or run_ddp_demo()), not {type(run).__name__}"))
    import matplotlib.pyplot as plt

    ax = get_ax(ax, figsize=(8.0, 1.2 + 0.6 * max(run.world_size, 1)))
    if not run.ranks:
        return _nothing_to_draw(ax, tr("Lượt chạy DDP không thành công: không có dữ liệu để vẽ.",
                                       "The DDP run failed: nothing to draw."))
    colors = plt.get_cmap("tab10")
    steps = min(len(r["steps"]) for r in run.ranks)
    for r in run.ranks:
        used = {i for s in r["steps"] for i in s["batch"]}
        rest = [i for i in r["shard"] if i not in used]
        ax.scatter(rest, [r["rank"]] * len(rest), marker="s", s=30, color="lightgrey",
                   label=tr("trong shard, chưa dùng", "in the shard, not used yet") if r["rank"] == 0 else None)
        for s in r["steps"]:
            ax.scatter(s["batch"], [r["rank"]] * len(s["batch"]), marker="s", s=30, color=colors(s["step"] % 10),
                       label=tr(f"bước {s['step']}", f"step {s['step']}") if r["rank"] == 0 else None)
    n = run.ranks[0].get("n_samples", 1 + max(i for r in run.ranks for i in r["shard"]))
    ax.set_xlim(-1, n)
    ax.set_ylim(run.world_size - 0.5, -0.5)
    ax.set_yticks(range(run.world_size))
    ax.set_yticklabels([f"rank {r}" for r in range(run.world_size)])
    ax.set_xlabel(tr(f"chỉ số mẫu trong tập dữ liệu ({n} mẫu)", f"sample index in the data set ({n} samples)"))
    ax.set_title(tr(f"DistributedSampler: mỗi rank một phần dữ liệu riêng ({steps} bước)",
                    f"DistributedSampler: each rank gets its own shard ({steps} steps)"))
    ax.grid(False)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return ax


def plot_ddp_differences(run, ax=None):
    """Draw the max absolute differences of a run on a log axis; exact zeros are marked as such.

    Args:
        run: A ``DDPRun`` or its ``DDPComparison``.
        ax: Axes to draw on (a new figure when None).

    Returns:
        The axes.
    """
    comparison = _comparison(run)
    if comparison is None:
        ax = get_ax(ax, figsize=(8.0, 2.0))
        return _nothing_to_draw(ax, tr("Chưa có phép so sánh: lượt chạy không thành công, hoặc chưa gọi "
                                       "run.compare_with_single_process(...).",
                                       "No comparison yet: the run failed, or run.compare_with_single_process(...) "
                                       "was not called."))
    rows = comparison.rows()
    ax = get_ax(ax, figsize=(8.0, 0.45 * len(rows) + 1.2))
    labels = [label for label, _ in rows]
    values = [max(value, _FLOOR) for _, value in rows]
    colors = ["#55A868" if value == 0 else ("#4C72B0" if value <= comparison.atol else "#DD8452") for _, value in rows]
    ys = range(len(rows))
    ax.barh(list(ys), values, color=colors, left=_FLOOR / 10)
    for y, (_, value) in zip(ys, rows, strict=True):
        text = tr("0 (bằng nhau từng bit)", "0 (bit-identical)") if value == 0 else f"{value:.1e}"
        ax.text(max(value, _FLOOR) * 1.5, y, text, va="center", fontsize="small")
    ax.axvline(comparison.atol, color="black", linestyle="--", linewidth=1)
    ax.text(comparison.atol, len(rows) - 0.4, f" atol = {comparison.atol:g}", fontsize="small")
    ax.set_xscale("log")
    ax.set_xlim(_FLOOR / 10, 100)
    ax.set_yticks(list(ys))
    ax.set_yticklabels(labels, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel(tr("chênh lệch tuyệt đối lớn nhất (thang log)", "max absolute difference (log scale)"))
    ax.set_title(tr("DDP: cái gì giống hệt, cái gì chỉ gần bằng, cái gì khác", "DDP: what is identical, close, different"))
    return ax

"""Plot a DDP run: which samples each rank trained on, and how far gradients and weights differ."""

from __future__ import annotations

from ._axes import MARKERS, PALETTE, add_facts, get_ax

_FLOOR = 1e-12  # where an exact zero is drawn on the log axis


def _check_run(run) -> None:
    from ..ddp import DDPRun

    if not isinstance(run, DDPRun):
        raise TypeError(f"run phải là DDPRun (kết quả của launch()), không phải {type(run).__name__}")


def _nothing_to_draw(ax, message: str):
    """Write `message` in the middle of empty axes (a failed or not yet compared run) and return the axes."""
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True, transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


def plot_ddp_shards(run, ax=None):
    """Draw one row per rank of a ``launch()`` run: the samples of its shard, coloured by the step that used them."""
    _check_run(run)
    ax = get_ax(ax, figsize=(8.0, 1.2 + 0.6 * max(run.world_size, 1)))
    if not run.ranks:
        return _nothing_to_draw(ax, "Lượt chạy DDP không thành công: không có dữ liệu để vẽ.")
    for r in run.ranks:
        used = {i for s in r["steps"] for i in s["batch"]}
        rest = [i for i in r["shard"] if i not in used]
        ax.scatter(rest, [r["rank"]] * len(rest), marker="s", s=30, color="lightgrey",
                   label="trong shard, chưa dùng" if r["rank"] == 0 else None)
        for s in r["steps"]:
            ax.scatter(s["batch"], [r["rank"]] * len(s["batch"]), s=30, color=PALETTE[s["step"] % len(PALETTE)],
                       marker=MARKERS[s["step"] % len(MARKERS)],
                       label=f"bước {s['step']}" if r["rank"] == 0 else None)
    n = run.ranks[0].get("n_samples", 1 + max(i for r in run.ranks for i in r["shard"]))
    ax.set_xlim(-1, n)
    ax.set_ylim(run.world_size - 0.5, -0.5)
    ax.set_yticks(range(run.world_size))
    ax.set_yticklabels([f"rank {r}" for r in range(run.world_size)])
    ax.set_xlabel(f"chỉ số mẫu trong tập dữ liệu ({n} mẫu)")
    steps = min(len(r["steps"]) for r in run.ranks)
    ax.set_title(f"DistributedSampler: mỗi rank một phần dữ liệu riêng ({steps} bước)")
    ax.grid(False)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return ax


def plot_ddp_differences(run, ax=None):
    """Draw the max absolute differences of a compared run on a log axis; exact zeros are marked as such."""
    _check_run(run)
    comparison = run.comparison
    if comparison is None:
        return _nothing_to_draw(get_ax(ax, figsize=(8.0, 2.0)),
                                "Chưa có phép so sánh: lượt chạy không thành công, hoặc chưa gọi "
                                "run.compare_with_single_process(...).")
    rows = comparison.rows()
    ax = get_ax(ax, figsize=(8.0, 0.45 * len(rows) + 1.2))
    ys = list(range(len(rows)))
    colors = [PALETTE[2] if v == 0 else (PALETTE[0] if v <= comparison.atol else PALETTE[3]) for _, v in rows]
    ax.barh(ys, [max(v, _FLOOR) for _, v in rows], color=colors, left=_FLOOR / 10)
    for y, (_, value) in zip(ys, rows, strict=True):
        text = "0 (bằng nhau từng bit)" if value == 0 else f"{value:.1e}"
        ax.text(max(value, _FLOOR) * 1.5, y, text, va="center", fontsize="small")
    ax.axvline(comparison.atol, color="black", linestyle="--", linewidth=1)
    ax.text(comparison.atol, len(rows) - 0.4, f" atol = {comparison.atol:g}", fontsize="small")
    ax.set_xscale("log")
    ax.set_xlim(_FLOOR / 10, 100)
    ax.set_yticks(ys)
    ax.set_yticklabels([label for label, _ in rows], fontsize="small")
    ax.invert_yaxis()
    ax.set_xlabel("chênh lệch tuyệt đối lớn nhất (thang log)")
    add_facts(ax, "; ".join(f"{label}: {value:.1e}" for label, value in rows) + f" (atol = {comparison.atol:g}).")
    ax.set_title("DDP: cái gì giống hệt, cái gì chỉ gần bằng, cái gì khác")
    return ax

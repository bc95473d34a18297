"""Speed plots: matmul time vs N, speedup vs N with the crossover marked, achieved TFLOP/s vs the peak."""

from __future__ import annotations

from collections.abc import Sequence

from ..bench.sweep import SweepResult, crossover, speedups
from ..gpu_specs import GpuSpec
from ._axes import add_facts, get_ax, series_style


def _log_axes(ax, plain_y: bool = True) -> None:
    """Put N on a log2 x axis labelled 16, 32, …, and make y a log axis."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: f"{x:g}"))
    ax.set_xlabel("N (ma trận N×N)")
    ax.set_yscale("log")
    if plain_y:
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _pos: f"{y:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())


def _as_sweeps(sweeps, name: str = "sweeps") -> list[SweepResult]:
    if isinstance(sweeps, SweepResult):
        sweeps = [sweeps]
    if isinstance(sweeps, (str, bytes)) or not isinstance(sweeps, Sequence):
        raise TypeError(f"{name} phải là một kết quả bench.matmul_sweep(...) hoặc danh sách các kết quả đó, "
                        f"không phải {type(sweeps).__name__}")
    out = list(sweeps)
    if not out:
        raise ValueError(f"{name} không được rỗng")
    for sweep in out:
        if not isinstance(sweep, SweepResult):
            raise TypeError(f"mỗi phần tử của {name} phải là kết quả bench.matmul_sweep(...), "
                            f"không phải {type(sweep).__name__}")
        if not sweep.records:
            raise ValueError(f"lần quét {sweep.label} không có kích thước nào để vẽ (ngân sách quá nhỏ?)")
    return out


def _mark_noisy(ax, sweeps: list[SweepResult], values) -> None:
    """Ring the points of the sizes each sweep flags as noisy, with one legend entry."""
    labelled = False
    for sweep in sweeps:
        noisy = set(sweep.noisy_sizes)
        points = [(n, v) for n, v in zip(sweep.sizes, values(sweep), strict=True) if n in noisy]
        if points:
            ax.scatter([n for n, _ in points], [v for _, v in points], s=170, facecolors="none", edgecolors="black",
                       linewidths=1.5, zorder=3, label=None if labelled else "số đo nhiễu (xem dòng ⚠️)")
            labelled = True


def plot_time_vs_n(sweeps, ax=None):
    """Plot median seconds per matmul against N on log-log axes, one line per sweep."""
    sweeps = _as_sweeps(sweeps)
    ax = get_ax(ax)
    for i, sweep in enumerate(sweeps):
        ax.plot(sweep.sizes, sweep.seconds, label=sweep.label, **series_style(i))
        add_facts(ax, f"{sweep.label}: N={sweep.sizes[-1]} mất {sweep.seconds[-1]:.3g} s.")
    _mark_noisy(ax, sweeps, lambda sweep: sweep.seconds)
    ref = sweeps[0]
    n_ref, t_ref = ref.sizes[-1], ref.seconds[-1]
    ax.plot(ref.sizes, [t_ref * (n / n_ref) ** 3 for n in ref.sizes], linestyle="--", color="gray", alpha=0.6,
            label="∝ N³ (tham chiếu)")
    _log_axes(ax, plain_y=False)
    ax.set_ylabel("thời gian mỗi phép nhân (s, trung vị)")
    ax.set_title("Thời gian matmul theo N")
    ax.legend()
    return ax


def plot_speedup(baseline: SweepResult, others, ax=None):
    """Plot speedup = baseline time / other time against N, with y = 1 and each crossover marked."""
    if not isinstance(baseline, SweepResult):
        raise TypeError(f"baseline phải là MỘT kết quả bench.matmul_sweep(...) (thường là CPU), "
                        f"không phải {type(baseline).__name__}")
    _as_sweeps(baseline, "baseline")
    others = _as_sweeps(others, "others")
    ax = get_ax(ax)
    ax.axhline(1.0, color="black", linewidth=1, label="hoà (speedup = 1)")
    for index, other in enumerate(others):
        points = speedups(baseline, other)
        if not points:
            continue
        (line,) = ax.plot([n for n, _ in points], [s for _, s in points], label=other.label,
                          **series_style(index))
        cross = crossover(baseline, other)
        where = f", hoà ở N≈{cross.n:.0f}" if cross.n is not None else ""
        add_facts(ax, f"{other.label}: nhanh gấp {points[-1][1]:.3g} lần ở N={points[-1][0]}{where}.")
        if cross.n is not None:
            ax.axvline(cross.n, color=line.get_color(), linestyle=":", linewidth=1.5)
            ax.annotate(f"giao cắt N≈{cross.n:.0f}", xy=(cross.n, 1.0),
                        xytext=(6, 10 + 14 * index), textcoords="offset points", color=line.get_color())
    _log_axes(ax)
    ax.set_ylabel("speedup (lần) = t(baseline) / t")
    ax.set_title(f"Nhanh hơn {baseline.label} bao nhiêu lần")
    ax.legend()
    return ax


def plot_tflops(sweeps, spec: GpuSpec | None = None, ax=None):
    """Plot achieved TFLOP/s (2·N³ / median time) against N, with the documented peak when known."""
    sweeps = _as_sweeps(sweeps)
    if spec is not None and not isinstance(spec, GpuSpec):
        raise TypeError(f"spec phải là GpuSpec (gpu_specs.spec_for_device()) hoặc None, "
                        f"không phải {type(spec).__name__}")
    ax = get_ax(ax)
    any_gpu = False
    for i, sweep in enumerate(sweeps):
        (line,) = ax.plot(sweep.sizes, sweep.tflops, label=sweep.label, **series_style(i))
        add_facts(ax, f"{sweep.label}: cao nhất {max(sweep.tflops):.3g} TFLOP/s.")
        if sweep.is_cpu:
            continue
        any_gpu = True
        peak = spec.peak_tflops(sweep.dtype) if spec is not None else None
        if peak is not None:
            reached = 100 * max(sweep.tflops) / peak
            ax.axhline(peak, color=line.get_color(), linestyle="--", alpha=0.8,
                       label=f"đỉnh {sweep.dtype} {spec.model} (công bố): {peak:g} TFLOP/s — đạt {reached:.0f}%")
    _mark_noisy(ax, sweeps, lambda sweep: sweep.tflops)
    if any_gpu and spec is None:
        ax.text(0.02, 0.96, "Không có đường đỉnh: GPU này chưa có trong bảng số liệu công bố.",
                transform=ax.transAxes, va="top", fontsize=9, color="dimgray")
    _log_axes(ax)
    ax.set_ylabel("TFLOP/s đạt được (2·N³ / thời gian)")
    ax.set_title("Tốc độ tính đạt được")
    ax.legend(fontsize=8)
    return ax

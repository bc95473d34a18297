"""Tests of lessons_lib.plots.speed: time vs N, speedup with the crossover, TFLOP/s with the peak line."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
from test_bench import make_sweep

from lessons_lib import bench, gpu_specs, plots
from lessons_lib.bench import sweep as bench_sweep

CPU = make_sweep([1e-5, 1e-4, 1e-3, 1e-2])
GPU32 = make_sweep([1e-4, 2e-4, 5e-4, 1e-3], device="cuda:0", name="Tesla T4")
GPU16 = make_sweep([1e-4, 1e-4, 1.5e-4, 2.5e-4], device="cuda:0", dtype="fp16", name="Tesla T4")


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_time_vs_n_is_log_log_with_units_and_a_cubic_guide():
    ax = plots.plot_time_vs_n([CPU, GPU32])
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert "N" in ax.get_xlabel() and "(s" in ax.get_ylabel()
    labels = [line.get_label() for line in ax.get_lines()]
    assert CPU.label in labels and GPU32.label in labels and any("N³" in label for label in labels)
    cpu_line = ax.get_lines()[0]
    assert list(cpu_line.get_xdata()) == CPU.sizes and list(cpu_line.get_ydata()) == CPU.seconds


def test_time_vs_n_draws_on_a_given_axes_and_accepts_one_sweep():
    _, ax = plt.subplots()
    assert plots.plot_time_vs_n(CPU, ax=ax) is ax
    assert len(ax.get_lines()) == 2  # the sweep and the ∝ N³ guide


def test_speedup_marks_the_crossover():
    ax = plots.plot_speedup(CPU, [GPU32])
    assert ax.get_xscale() == "log" and "speedup" in ax.get_ylabel()
    expected = (128 * 256) ** 0.5
    vertical = [line for line in ax.get_lines() if len(set(line.get_xdata())) == 1]
    assert any(abs(line.get_xdata()[0] - expected) < 1e-6 for line in vertical)
    assert any("181" in text.get_text() for text in ax.texts)
    curve = next(line for line in ax.get_lines() if line.get_label() == GPU32.label)
    assert list(curve.get_ydata()) == pytest.approx([0.1, 0.5, 2.0, 10.0])


def test_speedup_without_crossover_draws_no_marker():
    ax = plots.plot_speedup(CPU, make_sweep([1e-6] * 4, device="cuda:0"))  # always faster
    assert not ax.texts


def test_tflops_draws_the_documented_peak_of_each_dtype():
    ax = plots.plot_tflops([CPU, GPU32, GPU16], spec=gpu_specs.T4)
    assert ax.get_yscale() == "log" and "TFLOP/s" in ax.get_ylabel()
    peaks = {line.get_ydata()[0] for line in ax.get_lines() if len(set(line.get_ydata())) == 1}
    assert {gpu_specs.T4.peak_tflops("fp32"), gpu_specs.T4.peak_tflops("fp16")} <= peaks
    labels = " ".join(line.get_label() for line in ax.get_lines())
    assert "T4" in labels and f"{gpu_specs.T4.peak_tflops('fp16'):g}" in labels
    curve = next(line for line in ax.get_lines() if line.get_label() == GPU16.label)
    assert list(curve.get_ydata()) == pytest.approx(GPU16.tflops)


def test_tflops_without_a_spec_says_there_is_no_peak_line():
    ax = plots.plot_tflops([GPU32], spec=None)
    assert any("đỉnh" in t.get_text() for t in ax.texts)
    assert all(len(set(line.get_ydata())) > 1 for line in ax.get_lines())


def test_tflops_cpu_only_has_no_peak_and_no_note():
    ax = plots.plot_tflops(CPU)
    assert not ax.texts and len(ax.get_lines()) == 1


def test_tflops_skips_a_peak_the_vendor_does_not_publish():
    ax = plots.plot_tflops([GPU16], spec=gpu_specs.RTX_3060)  # no documented FP16 figure
    assert len(ax.get_lines()) == 1


def test_plots_on_a_real_sweep(monkeypatch):
    monkeypatch.setattr(bench_sweep, "_SIZES", (8, 16, 32))  # small sizes: quick to measure
    sweep = bench.matmul_sweep("cpu", budget_s=5)
    fig, axes = plt.subplots(1, 3)
    plots.plot_time_vs_n(sweep, ax=axes[0])
    plots.plot_speedup(sweep, sweep, ax=axes[1])
    plots.plot_tflops(sweep, ax=axes[2])
    assert len(axes[0].get_lines()) == 2


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda: plots.plot_time_vs_n([]), ValueError, "rỗng"),
        (lambda: plots.plot_time_vs_n("cpu"), TypeError, "matmul_sweep"),
        (lambda: plots.plot_time_vs_n([1.0]), TypeError, "matmul_sweep"),
        (lambda: plots.plot_time_vs_n(make_sweep([], sizes=())), ValueError, "ngân sách"),
        (lambda: plots.plot_speedup([CPU, CPU], GPU32), TypeError, "MỘT"),
        (lambda: plots.plot_speedup(CPU, None), TypeError, "others"),
        (lambda: plots.plot_tflops(GPU32, spec="T4"), TypeError, "GpuSpec"),
        (lambda: plots.plot_tflops(CPU, ax="axes"), TypeError, "Axes"),
    ],
)
def test_plots_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_noisy_sizes_are_ringed_once_in_the_legend():
    noisy = make_sweep([2e-2, 1e-4, 1e-3, 1e-2])  # N=64 slower than every larger size
    assert noisy.noisy_sizes == [64] and CPU.noisy_sizes == []
    for plot, values in ((plots.plot_time_vs_n, noisy.seconds), (plots.plot_tflops, noisy.tflops)):
        ax = plot([noisy, CPU])
        rings = ax.collections
        assert len(rings) == 1 and [tuple(p) for p in rings[0].get_offsets()] == [(64, values[0])]
        assert rings[0].get_label() == "số đo nhiễu (xem dòng ⚠️)"
        plt.close("all")
    assert len(plots.plot_time_vs_n(CPU).collections) == 0

import math

import pytest

from lessons_lib.plots import plot_bar_comparison, plot_loss_curves, plot_number_formats

# --------------------------------------------------------------------------- number formats


def test_number_formats_draws_each_format_on_a_log_axis():
    ax = plot_number_formats(marks={"70000": 7e4, "1e-8": 1e-8})
    assert ax.get_xscale() == "log"
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert [label.split(":")[0] for label in labels] == ["bf16", "fp16", "fp32"]  # top to bottom: fp32 first
    assert "5 bit mũ, 10 bit định trị" in labels[1]
    assert len(ax.collections) == 2 * 3  # subnormal + normal segment per format
    segments = ax.collections[3].get_segments()[0]  # fp16's normal range
    assert segments[1][0] == 65504.0
    texts = [t.get_text() for t in ax.texts]
    assert "70000" in texts and "1e-8" in texts and "max 6.55e+04" in texts
    assert len(ax.lines) == 2 + 2  # the two marks, and one ✕ on fp16's row for each (both are outside it)
    assert "70000: ngoài dải fp16 (tràn → inf)" in texts and "1e-8: ngoài dải fp16 (→ 0)" in texts
    assert not any("bf16" in t and "ngoài" in t for t in texts)   # bf16 and fp32 hold both values


def test_number_formats_marks_only_values_outside_a_range():
    ax = plot_number_formats(marks={"65000": 6.5e4, "1e-5": 1e-5})
    assert len(ax.lines) == 2 and not any("ngoài" in t.get_text() for t in ax.texts)


def test_number_formats_uses_given_axes():
    import matplotlib.pyplot as plt

    _, ax = plt.subplots()
    assert plot_number_formats(ax=ax) is ax
    assert len(ax.get_yticklabels()) == 3


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"marks": [7e4]}, TypeError, "marks"),
        ({"marks": {"zero": 0.0}}, ValueError, "zero"),
        ({"marks": {"inf": math.inf}}, ValueError, "inf"),
        ({"ax": "left"}, TypeError, "Axes"),
    ],
)
def test_number_formats_rejects_bad_input(kwargs, error, match):
    with pytest.raises(error, match=match):
        plot_number_formats(**kwargs)


# --------------------------------------------------------------------------- loss curves


def test_loss_curves_one_line_per_run():
    ax = plot_loss_curves({"fp32": [1.0, 0.5, 0.25], "bf16": [1.0, 0.6, 0.3]}, title="t")
    assert len(ax.lines) == 2
    assert list(ax.lines[0].get_xdata()) == [1, 2, 3]
    assert list(ax.lines[1].get_ydata()) == [1.0, 0.6, 0.3]
    assert ax.get_yscale() == "log" and ax.get_title() == "t"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["fp32", "bf16"]
    assert [line.get_linestyle() for line in ax.lines] == ["-", "--"]  # overlapping curves stay visible
    assert ax.get_ylabel() == "loss (thang log)"


def test_loss_curves_custom_ylabel():
    ax = plot_loss_curves({"gap": [0.0, 0.1]}, logy=False, ylabel="|Δloss|")
    assert ax.get_ylabel() == "|Δloss|"
    with pytest.raises(TypeError, match="ylabel"):
        plot_loss_curves({"gap": [1.0]}, ylabel=3)


def test_loss_curves_linear_scale_accepts_zero():
    ax = plot_loss_curves({"run": [0.0, 1.0]}, logy=False)
    assert ax.get_yscale() == "linear"


@pytest.mark.parametrize(
    ("curves", "error", "match"),
    [
        ({}, TypeError, "curves"),
        ([1.0, 2.0], TypeError, "curves"),
        ({"a": []}, TypeError, "'a'"),
        ({"a": "1.0"}, TypeError, "'a'"),
        ({"a": [1.0, 0.0]}, ValueError, "logy=False"),
        ({"a": [1.0, math.nan]}, ValueError, "logy=False"),
    ],
)
def test_loss_curves_reject_bad_input(curves, error, match):
    with pytest.raises(error, match=match):
        plot_loss_curves(curves)


# --------------------------------------------------------------------------- bars


def test_bar_comparison_labels_each_bar_with_its_value_and_unit():
    ax = plot_bar_comparison({"fp32": 12.5, "fp16": 4.25}, unit="ms", title="step")
    heights = [p.get_height() for p in ax.patches]
    assert heights == [12.5, 4.25]
    assert [t.get_text() for t in ax.texts] == ["12.5 ms", "4.25 ms"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["fp32", "fp16"]
    assert ax.get_ylabel() == "ms" and ax.get_title() == "step"


def test_bar_comparison_custom_format_and_axes():
    import matplotlib.pyplot as plt

    _, ax = plt.subplots()
    assert plot_bar_comparison({"a": 1234.4}, unit="MiB", ax=ax, fmt="{:.0f}") is ax
    labels = [t.get_text() for t in plot_bar_comparison({"loader": 1857.46, "step": 12.5}, unit="mẫu/s").texts]
    assert "1 857 mẫu/s" in labels and "12.5 mẫu/s" in labels and not any("e+" in t for t in labels)  # 09 c58
    assert ax.texts[0].get_text() == "1234 MiB"


@pytest.mark.parametrize(
    ("values", "unit", "error", "match"),
    [
        ({}, "ms", TypeError, "values"),
        ({"a": 1.0}, 5, TypeError, "unit"),
        ({"a": -1.0}, "ms", ValueError, "'a'"),
        ({"a": math.inf}, "ms", ValueError, "'a'"),
        ({"a": "1"}, "ms", ValueError, "'a'"),
    ],
)
def test_bar_comparison_rejects_bad_input(values, unit, error, match):
    with pytest.raises(error, match=match):
        plot_bar_comparison(values, unit=unit)

import math

import pytest

from lessons_lib.plots import plot_bar_comparison, plot_loss_curves

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

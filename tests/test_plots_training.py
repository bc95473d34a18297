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


# (callable, arguments, error, what the message must name): one row per argument check a lesson can reach
BAD_ARGUMENTS = {
    "curves empty": (plot_loss_curves, {"curves": {}}, TypeError, "curves"),
    "curves list": (plot_loss_curves, {"curves": [1.0, 2.0]}, TypeError, "curves"),
    "curve empty": (plot_loss_curves, {"curves": {"a": []}}, TypeError, "'a'"),
    "curve text": (plot_loss_curves, {"curves": {"a": "1.0"}}, TypeError, "'a'"),
    "curve zero on log": (plot_loss_curves, {"curves": {"a": [1.0, 0.0]}}, ValueError, "thang log"),
    "curve nan": (plot_loss_curves, {"curves": {"a": [1.0, math.nan]}}, ValueError, "thang log"),
    "bars empty": (plot_bar_comparison, {"values": {}, "unit": "ms"}, TypeError, "values"),
    "bars unit": (plot_bar_comparison, {"values": {"a": 1.0}, "unit": 5}, TypeError, "unit"),
    "bar negative": (plot_bar_comparison, {"values": {"a": -1.0}, "unit": "ms"}, ValueError, "'a'"),
    "bar inf": (plot_bar_comparison, {"values": {"a": math.inf}, "unit": "ms"}, ValueError, "'a'"),
    "bar text": (plot_bar_comparison, {"values": {"a": "1"}, "unit": "ms"}, TypeError, "'a'"),
}


@pytest.mark.parametrize(("call", "kwargs", "error", "names"), BAD_ARGUMENTS.values(), ids=BAD_ARGUMENTS)
def test_bad_arguments_raise_and_say_what_to_pass(call, kwargs, error, names):
    with pytest.raises(error, match=names):
        call(**kwargs)

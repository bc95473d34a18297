"""Tests of lessons_lib.plots.memory: plot_memory_breakdown and plot_activation_timeline."""

from __future__ import annotations

import pytest

from lessons_lib.memory import SavedTensorMeter
from lessons_lib.plots import plot_activation_timeline, plot_memory_breakdown

ROWS = {
    "SGD": {"params": 4 * 2**20, "grads": 4 * 2**20, "optimizer": 0, "activations": 2 * 2**20},
    "Adam": {"params": 4 * 2**20, "grads": 4 * 2**20, "optimizer": 8 * 2**20, "activations": 2 * 2**20},
}


def _stack_tops(ax):
    return [patch.get_y() + patch.get_height() for patch in ax.patches]


def test_stacks_each_part_in_mib():
    ax = plot_memory_breakdown(ROWS)
    assert ax.get_ylabel() == "bộ nhớ (MiB)"
    # 4 parts × 2 bars, minus the optimizer part of SGD drawn with height 0: still a patch
    assert len(ax.patches) == 8
    assert max(_stack_tops(ax)) == pytest.approx(18.0)  # Adam: 4 + 4 + 8 + 2 MiB
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0] == "tham số" and "trạng thái optimizer" in legend
    assert [t.get_text() for t in ax.get_xticklabels()] == ["SGD", "Adam"]


def test_measured_peak_is_drawn_beside():
    ax = plot_memory_breakdown(ROWS, measured={"Adam": 20 * 2**20}, unit="KiB")
    hatched = [p for p in ax.patches if p.get_hatch()]
    assert len(hatched) == 2 and max(p.get_height() for p in hatched) == pytest.approx(20 * 1024)
    assert ax.get_ylabel() == "bộ nhớ (KiB)"


def test_skips_empty_parts_and_gives_extra_ones_their_own_colours():
    ax = plot_memory_breakdown({"a": {"params": 100, "workspace": 50, "batch": 25}}, title="x")
    assert len(ax.patches) == 3 and ax.get_title() == "x" and ax.get_ylabel() == "bộ nhớ (B)"
    assert len({tuple(p.get_facecolor()) for p in ax.patches}) == 3


# --------------------------------------------------------------------------- plot_activation_timeline


def test_timeline_from_a_meter_with_a_mark():
    import torch

    w = torch.randn(256, 1024, requires_grad=True)
    with SavedTensorMeter() as meter:
        loss = w.exp().sum()
        forward_end = len(meter.timeline)
    loss.backward()
    ax = plot_activation_timeline(meter, marks={"backward": forward_end}, title="t")
    (line,) = [ln for ln in ax.lines if ln.get_linestyle() == "-"]
    assert list(line.get_ydata()) == [0.0, 1.0, 0.0]  # exp saves its 1 MiB output, backward lets it go
    assert ax.get_ylabel() == "bộ nhớ (MiB)" and ax.get_title() == "t"
    assert any(t.get_text() == "backward" for t in ax.texts)


def test_timeline_from_a_list_picks_its_unit_from_the_peak():
    ax = plot_activation_timeline([0, 2048, 1024, 0])
    assert list(ax.lines[0].get_ydata()) == [0.0, 2.0, 1.0, 0.0] and ax.get_ylabel() == "bộ nhớ (KiB)"


# (callable, arguments, error, what the message must name): one row per argument check a lesson can reach
BAD_ARGUMENTS = {
    "rows empty": (plot_memory_breakdown, {"rows": {}}, TypeError, "rows"),
    "rows list": (plot_memory_breakdown, {"rows": [1, 2]}, TypeError, "rows"),
    "row not a dict": (plot_memory_breakdown, {"rows": {"a": 5}}, TypeError, "nhãn"),
    "negative bytes": (plot_memory_breakdown, {"rows": {"a": {"params": -1}}}, TypeError, "byte"),
    "bytes as text": (plot_memory_breakdown, {"rows": {"a": {"params": "1 MiB"}}}, TypeError, "byte"),
    "measured label": (plot_memory_breakdown, {"rows": ROWS, "measured": {"Nope": 1}}, ValueError, "Nope"),
    "unit": (plot_memory_breakdown, {"rows": ROWS, "unit": "MB"}, ValueError, "unit"),
    "breakdown ax": (plot_memory_breakdown, {"rows": ROWS, "ax": "left"}, TypeError, "Axes"),
    "timeline empty": (plot_activation_timeline, {"timeline": []}, TypeError, "timeline"),
    "timeline text": (plot_activation_timeline, {"timeline": "0 1 2"}, TypeError, "timeline"),
    "timeline number": (plot_activation_timeline, {"timeline": 5}, TypeError, "timeline"),
    "timeline bytes": (plot_activation_timeline, {"timeline": [0, -1]}, TypeError, "byte"),
    "mark outside": (plot_activation_timeline, {"timeline": [0, 1], "marks": {"x": 9}}, ValueError, "timeline"),
    "mark type": (plot_activation_timeline, {"timeline": [0, 1], "marks": {"x": "1"}}, TypeError, "marks"),
    "timeline ax": (plot_activation_timeline, {"timeline": [0, 1], "ax": "left"}, TypeError, "Axes"),
}


@pytest.mark.parametrize(("call", "kwargs", "error", "names"), BAD_ARGUMENTS.values(), ids=BAD_ARGUMENTS)
def test_bad_arguments_raise_and_say_what_to_pass(call, kwargs, error, names):
    with pytest.raises(error, match=names):
        call(**kwargs)

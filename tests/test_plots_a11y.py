"""Plots for every reader: a colour-blind-safe palette (Okabe–Ito), series told apart by marker and line style
too, and a text alternative (title, axis labels, measured numbers) that the site puts in the image's alt."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt
from test_plots_speed import CPU, GPU32

from lessons_lib.plots import plot_bar_comparison, plot_memory_breakdown, plot_time_vs_n
from lessons_lib.plots._axes import PALETTE, describe_figure, series_style

OKABE_ITO = {"#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"}
PLOTS = Path(__file__).resolve().parents[1] / "lessons_lib" / "plots"


def test_the_palette_is_okabe_ito_and_the_plots_use_no_other_colour():
    assert set(PALETTE) == OKABE_ITO and len(PALETTE) == 8
    for source in PLOTS.glob("*.py"):
        text = source.read_text(encoding="utf-8")
        assert "tab10" not in text and "get_cmap" not in text, source.name
        colours = {c.upper() for c in re.findall(r"#[0-9A-Fa-f]{6}\b", text)}
        other = {c for c in colours - OKABE_ITO if len({c[1:3], c[3:5], c[5:7]}) > 1}  # greys carry no series
        assert not other, f"{source.name} uses colours outside the palette: {other}"


def test_compared_series_differ_in_colour_marker_and_line_style():
    styles = [series_style(i) for i in range(4)]
    for key in ("color", "marker", "linestyle"):
        assert len({s[key] for s in styles}) == 4, key


def test_speed_lines_are_styled_and_described_with_their_numbers():
    ax = plot_time_vs_n([CPU, GPU32])
    lines = ax.get_lines()[:2]
    assert [line.get_color() for line in lines] == list(PALETTE[:2])
    assert lines[0].get_marker() != lines[1].get_marker() and lines[0].get_linestyle() != lines[1].get_linestyle()
    alt = describe_figure(ax.figure)
    assert alt.startswith("Biểu đồ: Thời gian matmul theo N.") and "Trục ngang: N (ma trận N×N)" in alt
    assert f"{CPU.label}: N=512 mất 0.01 s." in alt
    plt.close("all")


def test_bar_and_memory_plots_state_their_numbers_in_the_text_alternative():
    alt = describe_figure(plot_bar_comparison({"fp32": 12.5, "amp": 7.1}, "ms", title="Thời gian mỗi bước").figure)
    assert alt == "Biểu đồ: Thời gian mỗi bước. Trục dọc: ms. fp32: 12.5 ms; amp: 7.1 ms."
    ax = plot_memory_breakdown({"b=8": {"params": 2**20, "grads": 2**20}}, measured={"b=8": 3 * 2**20})
    assert "b=8: tổng 2 MiB, đo được 3 MiB" in describe_figure(ax.figure)


def test_a_figure_with_nothing_to_say_gets_no_alt():
    fig = plt.figure()
    assert describe_figure(fig) == ""
    plt.close(fig)


def test_the_site_finds_each_png_outputs_alt_by_the_hash_myst_nb_names_the_image_file_with():
    import base64
    import hashlib

    from tools.lessons_site import plot_alts

    png = base64.b64encode(b"\x89PNG fake").decode()
    output = {"data": {"image/png": png}, "metadata": {"image/png": {"alt": "Biểu đồ: T."}}}
    notebook = {"cells": [{"outputs": [output, {"data": {"image/png": png[:8]}, "metadata": {}}]}, {}]}
    assert plot_alts(notebook) == {hashlib.sha256(b"\x89PNG fake").hexdigest(): "Biểu đồ: T."}

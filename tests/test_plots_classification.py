"""Tests of lessons_lib.plots.classification.plot_confusion_matrix."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lessons_lib.plots import plot_confusion_matrix

CM = [[5, 1, 0], [0, 4, 2], [0, 0, 6]]


def test_draws_counts_axes_labels_and_accuracy_title():
    ax = plot_confusion_matrix(CM)
    texts = sorted(t.get_text() for t in ax.texts)
    assert texts == sorted(["5", "1", "4", "2", "6"])  # zeros are left blank
    assert ax.get_xlabel() == "lớp mô hình đoán" and ax.get_ylabel() == "lớp thật"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2"]
    assert "đúng 15/18" in ax.get_title() and "83.3%" in ax.get_title()


@pytest.mark.parametrize("cm", [torch.tensor(CM), np.array(CM), torch.tensor(CM, dtype=torch.float32)])
def test_accepts_tensors_and_arrays(cm):
    ax = plot_confusion_matrix(cm)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["0", "1", "2"] and "đúng 15/18" in ax.get_title()


def test_all_zero_matrix_has_no_title():
    assert plot_confusion_matrix([[0, 0], [0, 0]]).get_title() == ""


@pytest.mark.parametrize(("cm", "kwargs"), [
    ([[1, 2], [3]], {}),
    ([[1, 2]], {}),
    ([], {}),
    ("cm", {}),
    ([[1, -1], [0, 1]], {}),
    ([[1, 0.5], [0, 1]], {}),
    ([[1, True], [0, 1]], {}),
    (CM, {"ax": "not axes"}),
])
def test_bad_input_says_what_to_pass(cm, kwargs):
    with pytest.raises(TypeError, match="cm phải là ma trận vuông|ax phải là"):
        plot_confusion_matrix(cm, **kwargs)

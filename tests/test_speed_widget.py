"""Tests of lessons_lib.speed_widget: the N / dtype control reruns one comparison and shows it."""

from __future__ import annotations

import pytest

from lessons_lib import bench, speed_widget
from lessons_lib.speed_widget import CONTROL_CLASS, RESULT_CLASS, SpeedControl, speed_control

SIZES = [16, 32, 64]


@pytest.fixture
def control():
    return speed_control("cpu", sizes=SIZES, n=16)


def parts(ctrl):
    box = ctrl.widget()
    slider, dtype, button = box.children[0].children
    return box, slider, dtype, button, box.children[1]


def test_runs_once_at_creation(control):
    assert len(control.history) == 1 and control.last.n == 16 and control.last.dtype == "fp32"
    assert "N=16 fp32" in control.text() and "N=16 fp32" in repr(control)


def test_default_size_is_the_seed_size_500():
    ctrl = SpeedControl("cpu", run_now=False)
    assert ctrl.n == 500 and 5000 in ctrl.sizes and ctrl.last is None
    assert "chưa đo" in ctrl.text() or "not measured" in ctrl.text()


def test_widget_has_stable_css_classes(control):
    box, _slider, _dtype, _button, result = parts(control)
    assert RESULT_CLASS in result._dom_classes and CONTROL_CLASS in box._dom_classes
    assert "N=16 fp32" in result.value
    assert control.widget() is box  # built once


def test_moving_the_slider_reruns_and_updates_the_result(control):
    _box, slider, _dtype, _button, result = parts(control)
    slider.value = 64
    assert len(control.history) == 2 and control.last.n == 64
    assert "N=64 fp32" in result.value and "N=16" not in result.value


def test_changing_the_dtype_reruns(control):
    _box, _slider, dtype, _button, result = parts(control)
    dtype.value = "bf16"
    assert control.last.dtype == "bf16" and "N=16 bf16" in result.value


def test_button_measures_again(control):
    _box, _slider, _dtype, button, _result = parts(control)
    button.click()
    assert len(control.history) == 2 and control.history[-1].n == 16


def test_run_with_arguments_moves_the_widgets_without_a_second_run(control):
    _box, slider, dtype, _button, result = parts(control)
    returned = control.run(32, "fp16")
    assert isinstance(returned, bench.Comparison)
    assert (slider.value, dtype.value) == (32, "fp16") and len(control.history) == 2
    assert "N=32 fp16" in result.value


def test_an_error_is_shown_not_raised(control, monkeypatch):
    _box, slider, _dtype, _button, result = parts(control)

    def oom(*args, **kwargs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(speed_widget.bench, "compare_matmul", oom)
    slider.value = 32
    assert control.last is None and control.text().startswith("❌ RuntimeError")
    assert "out of memory" in result.value and "💡" in result.value
    monkeypatch.undo()
    slider.value = 64
    assert control.last.n == 64 and "❌" not in result.value


def test_result_html_is_escaped(control):
    assert SpeedControl._html("<b>&") == "<pre style='white-space: pre-wrap; margin: 0'>&lt;b&gt;&amp;</pre>"


def test_static_html_shows_the_result_and_says_the_controls_need_a_notebook(control, monkeypatch):
    page = control.static_html()
    assert CONTROL_CLASS in page and "N=16 fp32" in page and "thanh trượt" in page
    shown = []
    monkeypatch.setattr(speed_widget, "show_widget", lambda make_box, text, static_html=None: shown.append(static_html))
    control._ipython_display_()
    assert shown == [page]


def test_plain_text_display_without_a_widget_frontend(control, capsys):
    control._ipython_display_()
    assert "N=16 fp32" in capsys.readouterr().out


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"n": 999}, ValueError, "999"),
        ({"sizes": []}, ValueError, "empty|rỗng"),
        ({"sizes": [32, 16]}, ValueError, "increasing|tăng dần"),
        ({"dtype": "int8"}, ValueError, "fp16"),
        ({"include_copy": "yes"}, TypeError, "include_copy"),
        ({"max_call_s": -1}, ValueError, "max_call_s"),
        ({"device": "tpu"}, ValueError, "cpu"),
    ],
)
def test_bad_input(kwargs, error, match):
    args = {"device": "cpu", "sizes": SIZES, "n": 16, "run_now": False} | kwargs
    device = args.pop("device")
    with pytest.raises(error, match=match):
        SpeedControl(device, **args)


def test_run_rejects_a_size_outside_the_slider(control):
    with pytest.raises(ValueError, match="999"):
        control.run(999)

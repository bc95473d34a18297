"""Tests of lessons_lib.speed_widget: the N / dtype control reruns one comparison and shows it."""

from __future__ import annotations

import pytest
import torch

from lessons_lib import bench, gpu_specs, speed_widget
from lessons_lib.bench import precisions
from lessons_lib.bench.matmul import Comparison
from lessons_lib.precision import format_name
from lessons_lib.speed_widget import CONTROL_CLASS, RESULT_CLASS, SpeedControl, speed_control


@pytest.fixture
def control(monkeypatch):
    monkeypatch.setattr(speed_widget, "_CPU_SIZES", (16, 32, 64))  # small sizes: quick to measure
    return speed_control("cpu")


def parts(ctrl):
    box = ctrl.widget()
    slider, dtype, button = box.children[0].children
    return box, slider, dtype, button, box.children[1]


def test_runs_once_at_creation(control):
    assert control.last.n == 16 and control.last.dtype == "fp32"
    assert "N=16 fp32" in control.text() and "N=16 fp32" in repr(control)


def test_cpu_mode_starts_at_the_seed_size_500_and_bounds_each_side_in_time(monkeypatch):
    seen = {}

    def fake(n, dtype, device, **kwargs):
        seen.update(kwargs, n=n, dtype=dtype)
        return Comparison(n, "fp32", None, None, None, False, skipped="⏭️ skipped")

    monkeypatch.setattr(speed_widget, "compare_matmul", fake)
    ctrl = SpeedControl("cpu")
    assert ctrl.n == 500 and 5000 in ctrl.sizes and not ctrl.accelerated and ctrl.dtype == "fp32"
    assert seen == {"n": 500, "dtype": "fp32", "max_call_s": 1.0, "max_time_s": 2.0}


# --------------------------------------------------------------------------- GPU mode, with a fake GPU


@pytest.fixture
def gpu(monkeypatch):
    """A SpeedControl that believes it runs on a CUDA GPU; compare_dtypes is replaced by a recorder."""
    calls = []

    def fake_compare(n, device, low, **kwargs):
        low = format_name(low)
        calls.append((n, str(device), low, kwargs))
        sides = (precisions.Side("cuda:0", "fp32", 2, timing=_timing(0.004, n)),
                 precisions.Side("cuda:0", low, 2, timing=_timing(0.001, n)),
                 precisions.Side("cpu", "fp32", 2, skipped=f"⏭️ không đo N={n} fp32 trên CPU (2 luồng): chậm"))
        return precisions.DtypeComparison(n, sides, "Tesla T4", gpu_specs.T4)

    monkeypatch.setattr(speed_widget, "_device", lambda device: torch.device("cuda"))
    monkeypatch.setattr(speed_widget, "compare_dtypes", fake_compare)
    return calls


def _timing(seconds, n):
    return bench.Timing(times_s=(seconds,) * 3, device="cuda:0", threads=2, warmup=2, number=1,
                        flops=bench.matmul_flops(n), label=f"matmul {n}")


def test_gpu_mode_compares_fp32_with_fp16_at_tensor_core_friendly_sizes(gpu):
    ctrl = speed_control("cuda")
    assert ctrl.accelerated and ctrl.n == 2048 and ctrl.dtype == "fp16"
    assert all(n % 8 == 0 for n in ctrl.sizes) and 500 not in ctrl.sizes and 8192 in ctrl.sizes
    n, device, low, kwargs = gpu[0]
    assert (n, device, low) == (2048, "cuda", "fp16")
    assert kwargs == {"threads": bench.cpu_threads()}
    text = ctrl.text()
    assert "fp16 (tensor core) nhanh hơn 4.0× so với fp32" in text and "⏭️ không đo N=2048 fp32 trên CPU" in text


def test_gpu_mode_widget_menu_is_the_16_bit_dtype(gpu):
    ctrl = speed_control("cuda")
    _box, slider, dtype, _button, result = parts(ctrl)
    assert dtype.description == "fp32 vs" and [v for _, v in dtype.options] == ["fp16", "bf16"]
    slider.value = 8192
    assert gpu[-1][:3] == (8192, "cuda", "fp16") and "N=8192" in result.value
    dtype.value = "bf16"
    assert gpu[-1][:3] == (8192, "cuda", "bf16") and "bf16" in result.value


def test_gpu_mode_rejects_fp32_as_the_compared_dtype(gpu):
    ctrl = SpeedControl("cuda")
    with pytest.raises(ValueError, match="'fp16' hoặc 'bf16'"):
        ctrl.run(1024, "fp32")
    assert (ctrl.n, ctrl.dtype) == (2048, "fp16")


def test_widget_has_stable_css_classes(control):
    box, _slider, _dtype, _button, result = parts(control)
    assert RESULT_CLASS in result._dom_classes and CONTROL_CLASS in box._dom_classes
    assert "N=16 fp32" in result.value
    assert control.widget() is box  # built once


def test_moving_the_slider_reruns_and_updates_the_result(control):
    _box, slider, _dtype, _button, result = parts(control)
    slider.value = 64
    assert control.last.n == 64
    assert "N=64 fp32" in result.value and "N=16" not in result.value


def test_changing_the_dtype_reruns(control):
    _box, _slider, dtype, _button, result = parts(control)
    dtype.value = "bf16"
    assert control.last.dtype == "bf16" and "N=16 bf16" in result.value


def test_button_measures_again(control):
    _box, _slider, _dtype, button, _result = parts(control)
    first = control.last
    button.click()
    assert control.last is not first and control.last.n == 16


def test_run_with_arguments_moves_the_widgets_without_a_second_run(control, monkeypatch):
    _box, slider, dtype, _button, result = parts(control)
    calls = []
    measure = speed_widget.compare_matmul
    monkeypatch.setattr(speed_widget, "compare_matmul", lambda *a, **kw: calls.append(a) or measure(*a, **kw))
    returned = control.run(32, "fp16")
    assert isinstance(returned, Comparison) and returned is control.last and len(calls) == 1
    assert (slider.value, dtype.value) == (32, "fp16")
    assert "N=32 fp16" in result.value


def test_an_error_is_shown_not_raised(control, monkeypatch):
    _box, slider, _dtype, _button, result = parts(control)

    def oom(*args, **kwargs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(speed_widget, "compare_matmul", oom)
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


def test_bad_device():
    with pytest.raises(ValueError, match="cpu"):
        speed_control("tpu")


def test_run_rejects_a_size_outside_the_slider_and_an_unknown_dtype(control):
    with pytest.raises(ValueError, match="999"):
        control.run(999)
    with pytest.raises(ValueError, match="fp16"):
        control.run(dtype="int8")
    with pytest.raises(TypeError, match="dtype"):
        control.run(dtype=8)
    assert (control.n, control.dtype) == (16, "fp32")


def test_gpu_mode_labels_bf16_as_emulated_where_it_is(gpu, monkeypatch):
    monkeypatch.setattr(speed_widget, "bf16_emulated", lambda device: True)
    ctrl = speed_control("cuda")
    labels = dict((v, k) for k, v in ctrl.dtype_options())
    assert "giả lập" in labels["bf16"] and "giả lập" not in labels["fp16"]
    _box, _slider, dtype, _button, _result = parts(ctrl)
    assert dict((v, k) for k, v in dtype.options)["bf16"] == labels["bf16"]
    monkeypatch.setattr(speed_widget, "bf16_emulated", lambda device: False)
    assert dict((v, k) for k, v in ctrl.dtype_options())["bf16"] == "bf16 (bfloat16)"


def test_cpu_mode_points_to_section_5_when_more_threads_are_slower(monkeypatch):
    def timing(seconds, threads):
        return bench.Timing((seconds,) * 3, "cpu", threads, 1, 1, flops=bench.matmul_flops(500), label="matmul 500")

    def fake(n, dtype, device, **kwargs):
        return Comparison(n, "fp32", timing(0.004, 1), timing(0.008, 2), (0.0, 0.0), False)

    monkeypatch.setattr(speed_widget, "compare_matmul", fake)
    text = SpeedControl("cpu").text()
    assert "CHẬM hơn 2.0×" in text and "lõi vật lý" in text and "mục 5" in text
    monkeypatch.setattr(speed_widget, "compare_matmul",
                        lambda n, dtype, device, **kw: Comparison(n, "fp32", timing(0.008, 1), timing(0.004, 2),
                                                                        (0.0, 0.0), False))
    assert "mục 5" not in SpeedControl("cpu").text()

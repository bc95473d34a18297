"""Section 7's verdicts on the CPU times (lessons_lib.exercises.lesson11): built from the numbers, flag contradictions."""

from __future__ import annotations

import pytest

from lessons_lib.exercises.lesson11 import bf16_verdict, epoch_time_warnings, work_time_verdict

GFLOP = {"nhỏ": 0.08, "rộng": 9.1}  # the lesson's two models: the wide one does 114× the work


def times(small_fp32, small_bf16, wide_fp32, wide_bf16):
    return {("nhỏ", "fp32"): small_fp32, ("nhỏ", "bf16"): small_bf16,
            ("rộng", "fp32"): wide_fp32, ("rộng", "bf16"): wide_bf16}


def test_no_warning_when_more_work_takes_longer():
    assert epoch_time_warnings(times(0.02, 0.03, 0.5, 0.4), GFLOP) == []


def test_small_model_slower_than_wide_is_flagged_per_dtype():
    # a busy Colab CPU once measured the small model at 1801.8 ms and the wide one at 1049.3 ms per fp32 epoch
    (line,) = epoch_time_warnings(times(1.8018, 0.03, 1.0493, 0.4), GFLOP)
    assert line.startswith("⚠️ fp32") and "1801.8 ms" in line and "1049.3 ms" in line
    assert "114×" in line and "chạy lại" in line


def test_the_model_with_least_work_is_the_small_one_whatever_the_order():
    swapped = {("rộng", "fp32"): 0.5, ("nhỏ", "fp32"): 0.9}
    assert "mô hình nhỏ" in epoch_time_warnings(swapped, GFLOP)[0]


@pytest.mark.parametrize(("measured", "ratio", "head"), [
    (times(0.1, 0.1, 0.6, 0.6), "6.0×", "→"),           # time grows far slower than work: fixed costs
    (times(0.0175, 1, 2.27, 1), "129.7×", "→"),          # time grows with the work: compute-bound
    (times(1.8, 1, 1.05, 1), "0.6×", "⚠️"),               # less time for more work: a busy machine
])
def test_work_time_verdict_gives_the_ratios_and_one_conclusion(measured, ratio, head):
    first, conclusion = work_time_verdict(measured, GFLOP).splitlines()
    assert "114×" in first and ratio in first and "(fp32)" in first
    assert conclusion.startswith(head)


def test_the_three_work_time_conclusions_differ():
    conclusions = {work_time_verdict(t, GFLOP).splitlines()[1]
                   for t in (times(0.1, 0.1, 0.6, 0.6), times(0.0175, 1, 2.27, 1), times(1.8, 1, 1.05, 1))}
    assert len(conclusions) == 3


def test_bf16_verdict_lines_and_conclusion():
    helps_wide = bf16_verdict(times(0.02, 0.03, 0.5, 0.25))
    assert "CHẬM hơn 1.5×" in helps_wide[0] and "nhanh hơn 2.0×" in helps_wide[1]
    assert helps_wide[2].startswith("→") and "rộng" in helps_wide[2]
    no_help = bf16_verdict(times(0.02, 0.021, 0.5, 0.52))
    assert all("±10%" in line for line in no_help[:2])
    assert no_help[2].startswith("→") and "FP32" in no_help[2]


def test_bf16_helping_the_small_model_more_is_flagged():
    # a busy Colab CPU once measured bf16 1.3× faster on the small model and 4.4× slower on the wide one
    lines = bf16_verdict(times(0.013, 0.010, 0.10, 0.44))
    assert "nhanh hơn 1.3×" in lines[0] and "CHẬM hơn 4.4×" in lines[1]
    assert lines[2].startswith("⚠️") and "chạy lại" in lines[2]


def test_bf16_verdict_draws_no_conclusion_from_times_that_contradict_the_work():
    # a busy 2-core machine once measured the small model at 5128 ms and the wide one at 2402 ms per fp32 epoch
    lines = bf16_verdict(times(5.128, 4.689, 2.402, 1.982))
    assert "nhanh hơn 1.2×" in lines[1]
    assert lines[2].startswith("⚠️") and "chạy lại" in lines[2] and lines[2] != bf16_verdict(
        times(0.013, 0.010, 0.10, 0.44))[2]


@pytest.mark.parametrize("bad, error", [
    ({}, TypeError), ([("nhỏ", "fp32")], TypeError), ({"nhỏ": 1.0}, TypeError),
    ({("nhỏ", "fp32"): 0.0}, ValueError), ({("nhỏ", "fp32"): "1 ms"}, TypeError),
    ({("nhỏ", "fp32"): float("nan")}, ValueError),
])
def test_bad_times_raise_clearly(bad, error):
    with pytest.raises(error, match="times"):
        epoch_time_warnings(bad, GFLOP)


@pytest.mark.parametrize(("call", "error", "names"), [
    (lambda good: epoch_time_warnings(good, {"nhỏ": 0.08}), ValueError, "gflop"),
    (lambda good: work_time_verdict(good, {"nhỏ": 0.08, "rộng": -1.0}), ValueError, "gflop"),
    (lambda good: bf16_verdict({("nhỏ", "fp32"): 0.1, ("rộng", "fp32"): 0.5}), ValueError, "'bf16'"),
    (lambda good: work_time_verdict(good, GFLOP, label="fp16"), ValueError, "fp16"),
    (lambda good: work_time_verdict(good, GFLOP, label=None), TypeError, "label"),
])
def test_bad_gflop_labels_and_missing_entries_raise_clearly(call, error, names):
    with pytest.raises(error, match=names):
        call(times(0.1, 0.1, 0.5, 0.5))

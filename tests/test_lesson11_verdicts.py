"""Section 7's verdicts on the CPU times (lessons_lib.exercises.lesson11): built from the numbers, flag contradictions."""

from __future__ import annotations

import pytest

from lessons_lib.exercises.lesson11 import bf16_verdict, epoch_time_warnings, work_time_verdict

GFLOP = {"nhỏ": 0.08, "rộng": 9.1}


def times(small_fp32, small_bf16, wide_fp32, wide_bf16):
    return {("nhỏ", "fp32"): small_fp32, ("nhỏ", "bf16"): small_bf16,
            ("rộng", "fp32"): wide_fp32, ("rộng", "bf16"): wide_bf16}


def test_no_warning_when_more_work_takes_longer():
    assert epoch_time_warnings(times(0.02, 0.03, 0.5, 0.4), GFLOP) == []


def test_small_model_slower_than_wide_is_flagged_per_dtype():
    # the review's Colab run: small 1801.8 ms, wide 1049.3 ms in fp32
    lines = epoch_time_warnings(times(1.8018, 0.03, 1.0493, 0.4), GFLOP)
    assert len(lines) == 1
    assert lines[0].startswith("⚠️ fp32: mô hình nhỏ (1801.8 ms/epoch) CHẬM hơn mô hình rộng (1049.3 ms)")
    assert "114×" in lines[0] and "chạy lại" in lines[0]


def test_the_model_with_least_work_is_the_small_one_whatever_the_order():
    swapped = {("rộng", "fp32"): 0.5, ("nhỏ", "fp32"): 0.9}
    assert "mô hình nhỏ" in epoch_time_warnings(swapped, GFLOP)[0]


def test_work_time_verdict_names_the_case_it_measured():
    fixed_costs = work_time_verdict(times(0.1, 0.1, 0.6, 0.6), GFLOP)       # 6× time for 114× work
    assert fixed_costs.startswith("Mô hình rộng: 114× số phép tính, nhưng 6.0× thời gian trên CPU (fp32).")
    assert "chi phí cố định" in fixed_costs.splitlines()[1] and fixed_costs.splitlines()[1].startswith("→")
    compute_bound = work_time_verdict(times(0.0175, 1, 2.27, 1), GFLOP)    # this machine: 130× time for 114× work
    assert "129.7× thời gian" in compute_bound and "chủ yếu là tính" in compute_bound
    contradiction = work_time_verdict(times(1.8, 1, 1.05, 1), GFLOP)
    assert contradiction.splitlines()[1].startswith("⚠️") and "chạy lại" in contradiction


def test_bf16_verdict_lines_and_conclusion():
    helps_wide = bf16_verdict(times(0.02, 0.03, 0.5, 0.25))
    assert helps_wide[:2] == ["mô hình nhỏ: bf16 CHẬM hơn 1.5×", "mô hình rộng: bf16 nhanh hơn 2.0×"]
    assert helps_wide[2].startswith("→") and "rộng" in helps_wide[2]
    no_help = bf16_verdict(times(0.02, 0.021, 0.5, 0.52))
    assert no_help[:2] == ["mô hình nhỏ: gần như bằng nhau (±10%)", "mô hình rộng: gần như bằng nhau (±10%)"]
    assert no_help[2] == "→ Trên CPU này bf16 không làm train nhanh hơn: giữ FP32."


def test_bf16_helping_the_small_model_more_is_flagged():
    # the review's Colab run: "nhỏ: bf16 nhanh hơn 1.3× · rộng: bf16 CHẬM hơn 4.4×"
    lines = bf16_verdict(times(0.013, 0.010, 0.10, 0.44))
    assert lines[0] == "mô hình nhỏ: bf16 nhanh hơn 1.3×" and lines[1] == "mô hình rộng: bf16 CHẬM hơn 4.4×"
    assert lines[2].startswith("⚠️ bf16 giúp mô hình nhỏ nhiều hơn mô hình rộng") and "chạy lại" in lines[2]


@pytest.mark.parametrize("bad, error", [
    ({}, TypeError), ([("nhỏ", "fp32")], TypeError), ({"nhỏ": 1.0}, TypeError),
    ({("nhỏ", "fp32"): 0.0}, ValueError), ({("nhỏ", "fp32"): "1 ms"}, TypeError),
    ({("nhỏ", "fp32"): float("nan")}, ValueError),
])
def test_bad_times_raise_clearly(bad, error):
    with pytest.raises(error, match="times"):
        epoch_time_warnings(bad, GFLOP)


def test_bad_gflop_and_missing_entries_raise_clearly():
    good = times(0.1, 0.1, 0.5, 0.5)
    with pytest.raises(ValueError, match="gflop"):
        epoch_time_warnings(good, {"nhỏ": 0.08})
    with pytest.raises(ValueError, match="gflop"):
        work_time_verdict(good, {"nhỏ": 0.08, "rộng": -1.0})
    with pytest.raises(ValueError, match="'bf16'"):
        bf16_verdict({("nhỏ", "fp32"): 0.1, ("rộng", "fp32"): 0.5})
    with pytest.raises(ValueError, match="fp16"):
        work_time_verdict(good, GFLOP, label="fp16")
    with pytest.raises(TypeError, match="label"):
        work_time_verdict(good, GFLOP, label=None)


def test_bf16_verdict_draws_no_conclusion_from_times_that_contradict_the_work():
    # this machine, busy: small 5128 ms vs wide 2402 ms in fp32
    lines = bf16_verdict(times(5.128, 4.689, 2.402, 1.982))
    assert lines[1] == "mô hình rộng: bf16 nhanh hơn 1.2×"
    assert lines[2].startswith("⚠️ Chưa kết luận được") and "chạy lại" in lines[2]

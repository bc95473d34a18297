"""Tests of lessons_lib.bench: correct timing, matmul sweeps under a budget, comparisons, bad input."""

from __future__ import annotations

import math
import os
import time

import pytest
import torch

from lessons_lib import bench
from lessons_lib.bench import matmul as bench_matmul
from lessons_lib.bench import sweep as bench_sweep

CPU = torch.device("cpu")
FP32_TOLERANCE = bench_matmul.TOLERANCE[torch.float32]


def make_sweep(times, sizes=(64, 128, 256, 512), device="cpu", dtype="fp32", threads=2, name=""):
    """A SweepResult built from given seconds per matmul (no measuring)."""
    records = [
        bench_sweep.MatmulRecord(n, bench.Timing((t,), device, threads, 1, 1, flops=bench.matmul_flops(n)), 0.0)
        for n, t in zip(sizes, times, strict=True)
    ]
    return bench_sweep.SweepResult(device, dtype, threads, 10.0, 1.0, "all_sizes", None, records, name)


# --------------------------------------------------------------------------- small helpers


def test_format_seconds():
    assert bench.format_seconds(1.5) == "1.50 s"
    assert bench.format_seconds(0.0123) == "12.3 ms"
    assert bench.format_seconds(0.0005) == "500 µs"
    assert bench.format_seconds(2e-9) == "2.00 ns"
    with pytest.raises(ValueError, match="seconds"):
        bench.format_seconds(-1.0)
    with pytest.raises(TypeError, match="seconds"):
        bench.format_seconds("1 s")


def test_cpu_threads_is_what_this_process_may_use_capped_by_omp_num_threads(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    n = bench.cpu_threads()
    assert 1 <= n <= (os.cpu_count() or n)
    if hasattr(os, "sched_getaffinity"):
        assert n == len(os.sched_getaffinity(0))
    for asked, expected in (("1", 1), (str(n + 8), n), ("0", n), ("many", n)):
        monkeypatch.setenv("OMP_NUM_THREADS", asked)
        assert bench.cpu_threads() == expected, asked


# --------------------------------------------------------------------------- measure


# (seconds each call sleeps, measure's arguments, what the result must be: a value or an inclusive (low, high) range;
# "wall_s" is the seconds measure took)
MEASURES = {
    "warm-up and repeats exactly": (0, {"repeats": 3, "warmup": 2, "number": 4}, {"repeats": 3, "number": 4, "warmup": 2}),
    "seconds per call": (0.01, {"repeats": 3, "warmup": 1, "number": 2, "flops": 2e9}, {"median_s": (0.0095, 0.05)}),
    "tiny work gets blocks": (0, {"repeats": 2, "warmup": 1}, {"number": (11, 100_000), "median_s": (0, 1e-3)}),
    "max_time_s cuts slow work": (0.05, {"repeats": 10, "warmup": 3, "max_time_s": 0.2},
                                  {"repeats": (1, 3), "number": 1, "wall_s": (0, 0.4)}),
}


@pytest.mark.parametrize(("sleep_s", "kwargs", "expected"), MEASURES.values(), ids=MEASURES)
def test_measure(sleep_s, kwargs, expected):
    calls = []
    start = time.perf_counter()
    # no sleep at all for 0: sleep(0) yields the CPU, which on a busy machine takes far longer than tiny work
    timing = bench.measure(lambda: calls.append(sleep_s and time.sleep(sleep_s)), device="cpu", **kwargs)
    wall_s = time.perf_counter() - start
    for key, want in expected.items():
        got = wall_s if key == "wall_s" else getattr(timing, key)
        assert want[0] <= got <= want[1] if isinstance(want, tuple) else got == want, (key, got)
    assert all(t > 0 for t in timing.times_s) and timing.min_s <= timing.median_s <= timing.max_s
    if "number" in kwargs or "max_time_s" in kwargs:  # no call that only sizes the blocks: every call is counted
        assert len(calls) == timing.warmup + timing.repeats * timing.number
    if "flops" in kwargs:
        assert timing.flops_per_s == pytest.approx(kwargs["flops"] / timing.median_s) and "FLOP/s" in str(timing)


def test_measure_uses_all_threads_by_default_and_restores_the_setting():
    seen = []
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        timing = bench.measure(lambda: seen.append(torch.get_num_threads()), device="cpu", repeats=1, warmup=0,
                               number=1)
        assert seen == [bench.cpu_threads()] and timing.threads == bench.cpu_threads()
        assert torch.get_num_threads() == 1
        seen.clear()
        bench.measure(lambda: seen.append(torch.get_num_threads()), device="cpu", threads=1, repeats=1, warmup=0,
                      number=1)
        assert seen == [1]
        with pytest.raises(ZeroDivisionError):  # the work raises: the setting is restored all the same
            bench.measure(lambda: 1 / 0, device="cpu", threads=2)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_timing_repr_states_the_conditions():
    timing = bench.measure(lambda: None, device="cpu", repeats=3, warmup=2, label="noop")
    text = repr(timing)
    assert text == str(timing) and text.startswith("noop: ") and "warm-up 2" in text and "3" in text
    assert f"{timing.threads} luồng" in text
    gpu_like = bench.Timing((1e-3,), "cuda:0", 2, 1, 1)
    assert "synchronize" in gpu_like.conditions()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_measure_on_a_missing_device_says_which_devices_exist():
    with pytest.raises(ValueError, match="cpu"):
        bench.measure(lambda: None, device="cuda")


# --------------------------------------------------------------------------- matmul pieces


def test_matmul_inputs_are_seeded_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a, b = bench_matmul.matmul_inputs(16, CPU, torch.float16)
    assert torch.equal(torch.random.get_rng_state(), state)
    a2, b2 = bench_matmul.matmul_inputs(16, CPU, torch.float16)
    assert a.shape == (16, 16) and a.dtype is torch.float16 and torch.equal(a, a2) and torch.equal(b, b2)
    assert not torch.equal(a, b)


def test_matmul_error_finds_wrong_results():
    a, b = bench_matmul.matmul_inputs(64, CPU, torch.float32)
    c = a @ b
    assert bench.matmul_error(a, b, c) < 1e-5
    assert bench.matmul_error(a, b, c + 1.0) > FP32_TOLERANCE
    assert bench.matmul_error(a, b, torch.zeros_like(c)) == pytest.approx(1.0)


def test_time_matmul_checks_then_times():
    timing = bench.time_matmul(64, "cpu", repeats=2, warmup=1)
    assert timing.flops == 2 * 64**3 and timing.label == "matmul 64×64 fp32"
    assert timing.flops_per_s > 0


def test_time_matmul_refuses_to_time_a_wrong_result(monkeypatch):
    monkeypatch.setattr(bench_matmul, "matmul_error", lambda a, b, c: 0.5)
    with pytest.raises(RuntimeError, match="0.5|5.00e-01"):
        bench.time_matmul(16, "cpu")


def test_memory_checks():
    assert bench.matmul_bytes(100) == 3 * 100 * 100 * 4
    assert bench_matmul.fits_in_memory(64, CPU, torch.float32)
    assert not bench_matmul.fits_in_memory(10**6, CPU, torch.float32)  # 12 TB of fp32


# --------------------------------------------------------------------------- sweep

SIZES = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)


def sweep_over(monkeypatch, sizes, *args, **kwargs):
    """Run matmul_sweep over `sizes` instead of 16 … 16384, so that a test runs quickly."""
    monkeypatch.setattr(bench_sweep, "_SIZES", tuple(sizes))
    return bench.matmul_sweep(*args, **kwargs)


def test_sweep_stops_before_the_budget_is_exceeded(monkeypatch):
    # The budget logic is checked on this thread's CPU clock (one PyTorch thread: the matmuls run on it), which
    # other processes cannot advance: on the wall clock a busy machine's pauses overran the budget at random.
    monkeypatch.setattr(time, "perf_counter", time.thread_time)
    result = sweep_over(monkeypatch, SIZES, "cpu", "fp32", budget_s=0.4, repeats=2, threads=1)
    assert result.stop_reason == "budget" and result.next_size in SIZES
    assert result.wall_s <= 0.4 * 2  # no size is started that is predicted to overrun (noise allowance ×2)
    assert result.sizes == sorted(result.sizes) and result.sizes == list(SIZES[: len(result.sizes)])
    assert len(result.sizes) >= 2
    assert all(s > 0 for s in result.seconds) and all(t > 0 for t in result.tflops)
    assert all(r.rel_error <= FP32_TOLERANCE for r in result.records)
    assert "ngân sách" in str(result)


def test_sweep_measures_every_size_when_the_budget_allows(monkeypatch):
    result = sweep_over(monkeypatch, [8, 16, 32], "cpu", torch.bfloat16, budget_s=10, repeats=2)
    assert result.stop_reason == "all_sizes" and result.next_size is None
    assert result.sizes == [8, 16, 32] and result.dtype == "bf16" and result.is_cpu
    assert result.threads == bench.cpu_threads() and result.label.startswith("CPU bf16")
    assert result.time_at(16) == result.records[1].seconds and result.time_at(999) is None
    assert all(isinstance(note, str) for note in result.notes)


def test_sweep_checks_memory_before_allocating(monkeypatch):
    allocated = []
    monkeypatch.setattr(bench_sweep, "fits_in_memory", lambda n, device, dtype: n <= 64)
    monkeypatch.setattr(bench_sweep, "matmul_inputs", lambda n, *a: allocated.append(n) or bench_matmul.matmul_inputs(n, *a))
    result = sweep_over(monkeypatch, [32, 64, 128, 256], "cpu", budget_s=10)
    assert result.sizes == [32, 64] and set(allocated) == {32, 64}
    assert result.stop_reason == "memory" and result.next_size == 128
    allocated.clear()
    monkeypatch.setattr(bench_sweep, "fits_in_memory", lambda n, device, dtype: False)
    result = sweep_over(monkeypatch, [64, 128], "cpu", budget_s=5)
    assert result.records == allocated == [] and result.stop_reason == "memory" and result.next_size == 64


# --------------------------------------------------------------------------- speedup and crossover


def test_speedup_uses_common_sizes_only():
    cpu = make_sweep([1e-5, 1e-4, 1e-3, 1e-2])
    gpu = make_sweep([1e-4, 2e-4, 5e-4], sizes=(64, 128, 1024), device="cuda:0")
    assert bench_sweep.speedups(cpu, gpu) == [(64, pytest.approx(0.1)), (128, pytest.approx(0.5))]


def test_crossover_interpolates_on_log_axes():
    cpu = make_sweep([1e-5, 1e-4, 1e-3, 1e-2])
    gpu = make_sweep([1e-4, 2e-4, 5e-4, 1e-3], device="cuda:0", name="Tesla T4")
    cross = bench.crossover(cpu, gpu)  # speedups 0.1, 0.5, 2, 10
    assert cross.status == "crosses"
    assert cross.n == pytest.approx((128 * 256) ** 0.5)
    assert "181" in cross.message


def test_crossover_ignores_an_early_lucky_point():
    cpu = make_sweep([1.0, 1.0, 1.0, 1.0, 1.0], sizes=(16, 32, 64, 128, 256))
    gpu = make_sweep([2.0, 0.5, 1.25, 0.5, 0.25], sizes=(16, 32, 64, 128, 256), device="cuda:0")
    cross = bench.crossover(cpu, gpu)  # 0.5, 2, 0.8, 2, 4: faster for good only from 128
    assert cross.status == "crosses" and 64 < cross.n < 128


def test_crossover_other_outcomes():
    cpu = make_sweep([1.0, 1.0, 1.0, 1.0])
    assert bench.crossover(cpu, make_sweep([0.5] * 4, device="cuda:0")).status == "always_faster"
    assert bench.crossover(cpu, make_sweep([2.0] * 4, device="cuda:0")).status == "never_faster"
    other = make_sweep([1.0], sizes=(99,), device="cuda:0")
    assert bench.crossover(cpu, other).status == "no_overlap" and bench.crossover(cpu, other).n is None


def test_estimate_seconds_scales_as_n_cubed_beyond_the_measured_sizes():
    sweep = make_sweep([1e-5, 1e-4, 1e-3, 1e-2])
    assert bench.estimate_seconds(sweep, 128) == 1e-4
    assert bench.estimate_seconds(sweep, 1024) == pytest.approx(8e-2)
    assert bench.estimate_seconds(sweep, 100) == pytest.approx(1e-4 * (100 / 128) ** 3)


# --------------------------------------------------------------------------- one comparison, copies


def test_compare_matmul_on_cpu_is_one_thread_vs_all():
    result = bench.compare_matmul(64, "fp32", "cpu")
    assert result.baseline.threads == 1 and result.other.threads == bench.cpu_threads()
    assert result.speedup == pytest.approx(result.baseline.median_s / result.other.median_s)
    assert max(result.errors) <= FP32_TOLERANCE
    assert "N=64 fp32" in result.verdict() and "✅" in str(result)


def test_compare_matmul_max_time_limits_each_side():
    result = bench.compare_matmul(128, "fp32", "cpu", max_time_s=1e-6)
    assert result.baseline.repeats == 1 and result.other.repeats == 1  # instead of 3


def test_compare_matmul_skips_sizes_that_would_take_too_long():
    result = bench.compare_matmul(256, "fp32", "cpu", max_call_s=1e-9)
    assert result.skipped and result.speedup is None and result.baseline is None
    assert "256" in str(result) and "⏭️" in result.verdict()


def test_copy_vs_compute_times_real_copies():
    cost = bench.copy_vs_compute(128, "cpu")
    assert cost.total_s == pytest.approx(cost.to_device.median_s + cost.compute.median_s + cost.to_host.median_s)
    assert cost.to_device.median_s > 0 and cost.to_host.median_s > 0
    assert cost.compute.flops == bench.matmul_flops(128)
    assert "N=128" in cost.verdict() and "copy" in str(cost)


def _measure(**kwargs):
    return bench.measure(**({"fn": lambda: None, "device": "cpu"} | kwargs))


def _sweep(**kwargs):
    return bench.matmul_sweep(**({"device": "cpu", "budget_s": 1.0} | kwargs))


def _compare(**kwargs):
    return bench.compare_matmul(**({"n": 16, "dtype": "fp32", "device": "cpu"} | kwargs))


_SWEEP = make_sweep([1e-5, 1e-4, 1e-3, 1e-2])
_THREADS = ("one_thread_s", "many_threads_s", "threads")
# (call, error, what the message must name): one row per argument check a lesson can reach
BAD_ARGUMENTS = {
    "measure fn": (lambda: _measure(fn=42), TypeError, "lambda"),
    "measure device": (lambda: _measure(device="tpu"), ValueError, "cpu"),
    "measure device type": (lambda: _measure(device=3), TypeError, "str"),
    **{f"measure {k}={v!r}": (lambda k=k, v=v: _measure(**{k: v}), error, k) for k, v, error in [
        ("repeats", 0, ValueError), ("repeats", 2.0, TypeError), ("warmup", -1, ValueError), ("number", 0, ValueError),
        ("threads", 0, ValueError), ("flops", -1.0, ValueError), ("label", 5, TypeError), ("max_time_s", 0, ValueError),
        ("warn", "no", TypeError)]},
    "matmul_bytes n": (lambda: bench.matmul_bytes(0), ValueError, "n"),
    **{f"sweep {k}={v!r}": (lambda k=k, v=v: _sweep(**{k: v}), error, names) for k, v, error, names in [
        ("budget_s", 0, ValueError, "budget_s"),
        ("budget_s", "10", TypeError, "budget_s"), ("dtype", "int8", ValueError, "fp16"), ("dtype", 8, TypeError, "dtype"),
        ("device", "tpu", ValueError, "cpu"), ("repeats", 0, ValueError, "repeats"), ("threads", 0, ValueError, "threads")]},
    "crossover baseline": (lambda: bench.crossover([1.0], _SWEEP), TypeError, "matmul_sweep"),
    "crossover other": (lambda: bench.crossover(_SWEEP, "gpu"), TypeError, "matmul_sweep"),
    "estimate n": (lambda: bench.estimate_seconds(_SWEEP, 0), ValueError, "n"),
    "estimate sweep": (lambda: bench.estimate_seconds({}, 10), TypeError, "matmul_sweep"),
    "estimate empty sweep": (lambda: bench.estimate_seconds(make_sweep([], sizes=()), 10), ValueError, "chưa đo"),
    **{f"compare {k}={v!r}": (lambda k=k, v=v: _compare(**{k: v}), error, names) for k, v, error, names in [
        ("n", 0, ValueError, "n"), ("dtype", "int4", ValueError, "fp16"), ("device", "tpu", ValueError, "cpu"),
        ("include_copy", "yes", TypeError, "include_copy"), ("max_call_s", 0, ValueError, "max_call_s"),
        ("max_time_s", -1, ValueError, "max_time_s")]},
    "copy pinned": (lambda: bench.copy_vs_compute(16, "cpu", pinned="yes"), TypeError, "pinned"),
    "copy n": (lambda: bench.copy_vs_compute(-1, "cpu"), ValueError, "n"),
    **{f"threads_verdict {args}": (lambda args=args: bench.threads_verdict(*args), error, _THREADS[i])
       for args, error, i in [(("1", 1e-3, 2), TypeError, 0), ((0, 1e-3, 2), ValueError, 0),
                              ((1e-3, math.nan, 2), ValueError, 1), ((1e-3, 1e-3, 2.0), TypeError, 2),
                              ((1e-3, 1e-3, 0), ValueError, 2)]},
    **{f"noise times {bad!r}": (lambda bad=bad: bench.noise_warning(bad), error, "times_s") for bad, error in [
        ("0.1 0.2", TypeError), ({0.1}, TypeError), ([], ValueError), ([0.1, 0.0], ValueError),
        ([0.1, "0.2"], TypeError)]},
    **{f"noise expected {bad!r}": (lambda bad=bad: bench.noise_warning([0.1], expected_s=bad), error, "expected_s")
       for bad, error in [(0, ValueError), ("1 ms", TypeError)]},
}


@pytest.mark.parametrize(("call", "error", "names"), BAD_ARGUMENTS.values(), ids=BAD_ARGUMENTS)
def test_bad_arguments_raise_and_say_what_to_pass(call, error, names):
    with pytest.raises(error, match=names):
        call()

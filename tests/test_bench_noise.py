"""Tests of bench.noise_warning and where bench prints it: measure, Timing.noise, the matmul sweep."""

from __future__ import annotations

import types

import pytest
import torch

from lessons_lib import bench
from lessons_lib.bench import noise_warning
from lessons_lib.bench import sweep as bench_sweep
from lessons_lib.bench import timing as bench_timing

CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _local(monkeypatch):
    monkeypatch.setattr(bench_timing, "detect_platform", lambda: "local")


_WARNED = "⚠️ số đo nhiễu"
# (seconds of each repeat, expected_s, platform, said (None: no warning), not said)
WARNINGS = {
    "consistent": ([0.010, 0.011, 0.012], None, "local", None, ()),
    "one repeat": ((0.010,), None, "local", None, ()),  # no spread to judge
    "just under 2x": ([0.010, 0.0199], None, "local", None, ()),
    "spread": ([0.010, 0.011, 0.030], None, "local", (_WARNED, "3.0×", "3 lần đo", "chạy lại", "repeats="),
               ("vCPU", "cả trung vị")),  # the Colab sentence only where it applies
    "median far above expected": ([0.010, 0.011, 0.012], 0.001, "local", (_WARNED, "mức dự kiến", "11.0×"), ()),
    "within the limit": ([0.010, 0.011, 0.012], 0.005, "local", None, ()),  # 2.2×
    "both": ([0.010, 0.011, 0.050], 0.001, "local", ("lần nhanh nhất", "mức dự kiến"), ()),
    "colab": ([0.01, 0.05], None, "colab", ("2 vCPU",), ()),
    "kaggle": ([0.01, 0.05], None, "kaggle", ("2 vCPU",), ()),
    "median dragged": ([0.010, 0.080, 0.085, 0.090, 0.011], None, "local",  # median 80 ms, min 10 ms
                       ("cả trung vị cũng gấp 8.0× lần nhanh nhất", "min"), ()),
    "a few slow repeats": ([0.010, 0.011, 0.012, 0.050, 0.060], None, "local", (_WARNED,), ("cả trung vị",)),
}


@pytest.mark.parametrize(("times", "expected", "platform", "said", "unsaid"), WARNINGS.values(), ids=WARNINGS)
def test_noise_warning(monkeypatch, times, expected, platform, said, unsaid):
    monkeypatch.setattr(bench_timing, "detect_platform", lambda: platform)
    line = noise_warning(times, expected_s=expected)
    if said is None:
        assert line is None
    else:
        assert line.startswith(_WARNED) and all(s in line for s in said) and not any(s in line for s in unsaid)


def _scripted_blocks(monkeypatch, seconds):
    """Make measure's timed blocks return the given seconds, one per block."""
    it = iter(seconds)
    monkeypatch.setattr(bench_timing, "_timed_block", lambda fn, number, device: next(it))


def test_measure_prints_the_line_when_repeats_disagree(monkeypatch, capsys):
    _scripted_blocks(monkeypatch, [0.01, 0.05, 0.01])
    t = bench.measure(lambda: None, device="cpu", repeats=3, warmup=0, number=1)
    out = capsys.readouterr().out
    assert out.startswith("⚠️ số đo nhiễu") and out.strip() == t.noise
    _scripted_blocks(monkeypatch, [0.01, 0.05, 0.01])
    t = bench.measure(lambda: None, device="cpu", repeats=3, warmup=0, number=1, warn=False)  # the caller shows it
    assert t.noise.startswith("⚠️ số đo nhiễu") and capsys.readouterr().out == ""
    _scripted_blocks(monkeypatch, [0.01, 0.011, 0.012])
    t = bench.measure(lambda: None, device="cpu", repeats=3, warmup=0, number=1)
    assert t.noise is None and capsys.readouterr().out == ""


def _timing(times, n):
    return bench.Timing(tuple(times), "cpu", 2, 1, 1, flops=bench.matmul_flops(n), label=f"matmul {n}")


def _sweep(per_size):
    records = [bench_sweep.MatmulRecord(n, _timing(times, n), 0.0) for n, times in per_size]
    return bench_sweep.SweepResult("cpu", "fp32", 2, 10.0, 1.0, "all_sizes", None, records)


def test_sweep_names_sizes_off_the_trend_or_with_a_wide_spread():
    smooth = _sweep([(16, [3e-6] * 3), (64, [1e-5] * 3), (128, [5e-5] * 3), (256, [3e-4] * 3)])
    assert smooth.noise is None and "⚠️" not in str(smooth)
    spiky = _sweep([(32, [2e-2] * 3), (64, [1e-5] * 3), (128, [5e-5] * 3), (256, [3e-4, 3e-4, 9e-4])])
    line = spiky.noise
    assert line.startswith("⚠️ số đo nhiễu") and line in str(spiky)
    assert "N=32 chậm hơn hẳn" in line  # a small size slower than every larger one
    assert "ở N=256 lần đo chậm nhất gấp đến 3.0×" in line
    last_too_slow = _sweep([(64, [1e-5] * 3), (128, [1e-3] * 3)])  # 100× for 8× the work
    assert "N=128 chậm hơn hẳn" in last_too_slow.noise


def test_sweep_notices_a_flat_stretch_far_above_what_the_flops_predict():
    """The busy-machine pattern: every mid size stuck near the same ~45 ms, consistently over its repeats."""
    sizes = [(16, [2.5e-6] * 3)] + [(n, [45e-3] * 3) for n in (32, 64, 128, 256)] + [(1024, [0.13] * 3)]
    line = _sweep(sizes).noise
    assert "N=32, 64, 128, 256 chậm hơn hẳn" in line and "1024" not in line
    assert bench_sweep._off_trend(_sweep(sizes).records, 0) is None


def test_sweep_measures_an_outlier_again_and_keeps_the_faster(monkeypatch):
    records = _sweep([(32, [2e-2] * 3), (64, [1e-5] * 3), (128, [5e-5] * 3)]).records
    calls = []

    def fake_measure(fn, *, label, warn, **kw):
        calls.append(label)
        assert not warn
        return _timing([4e-6] * 3, 32)

    monkeypatch.setattr(bench_sweep, "measure", fake_measure)
    notes = bench_sweep._remeasure_outliers(records, CPU, torch.float32, 2, 3, 5.0)
    assert calls == ["matmul 32×32 fp32"] and records[0].seconds == 4e-6
    assert len(notes) == 1 and "N=32 20.0 ms → 4.00 µs" in notes[0]
    records = _sweep([(32, [2e-2] * 3), (64, [1e-5] * 3)]).records
    monkeypatch.setattr(bench_sweep, "measure", lambda fn, **kw: _timing([3e-2] * 3, 32))
    bench_sweep._remeasure_outliers(records, CPU, torch.float32, 2, 3, 5.0)
    assert records[0].seconds == 2e-2  # the re-measurement was slower: the first one stays


def test_sweep_says_when_there_is_no_time_left_to_measure_again(monkeypatch):
    records = _sweep([(32, [2e-2] * 3), (64, [1e-5] * 3)]).records
    monkeypatch.setattr(bench_sweep, "measure", lambda *a, **kw: pytest.fail("must not measure"))
    notes = bench_sweep._remeasure_outliers(records, CPU, torch.float32, 2, 3, 0.01)
    assert notes == ["Không còn thời gian trong ngân sách để đo lại N=32."]


def test_a_stalled_size_does_not_end_the_sweep_early(monkeypatch):
    """N=16 fast (one thread), every larger call 50 ms (a busy machine's wait for the second thread, as seen on the
    Colab replica): N³ from 50 ms would stop before N=64; the sweep goes on."""
    monkeypatch.setattr(bench_sweep, "measure", lambda fn, *, label, flops, **kw: bench.Timing(
        (3e-6 if "16×16" in label else 0.05,) * 3, "cpu", 2, 1, 1, flops=flops, label=label))
    monkeypatch.setattr(bench_sweep, "_SIZES", (16, 32, 64, 128))
    # the scripted times alone decide: a busy machine's real seconds (inputs, checks) must not eat the budget
    monkeypatch.setattr(bench_sweep, "time", types.SimpleNamespace(perf_counter=lambda: 0.0))
    result = bench.matmul_sweep("cpu", budget_s=1.0)
    assert result.sizes == [16, 32, 64, 128] and result.stop_reason == "all_sizes"


# --------------------------------------------------------------------------- uniform stalls: median/min, expected_s


@pytest.fixture()
def work(request):
    """A kind of work no other test measured, so the speed history starts empty for it."""
    return request.node.name.replace("_", "-")


def test_measure_flags_a_uniform_stall_against_the_best_speed_measured_before(monkeypatch, capsys, work):
    flops = bench.matmul_flops(512)
    _scripted_blocks(monkeypatch, [0.001, 0.0011, 0.0012])  # a quiet run first: ~268 GFLOP/s
    quiet = bench.measure(lambda: None, device="cpu", repeats=3, warmup=0, number=1, flops=flops,
                          label=f"{work} matmul 512 fp32")
    assert quiet.noise is None and quiet.expected_s is None and capsys.readouterr().out == ""
    _scripted_blocks(monkeypatch, [0.008, 0.008, 0.0085])  # every repeat stalled: spread 1.06×
    stalled = bench.measure(lambda: None, device="cpu", repeats=3, warmup=0, number=1,
                            flops=bench.matmul_flops(500), label=f"{work} matmul 500×500 fp32")  # same kind of work
    out = capsys.readouterr().out
    assert stalled.expected_s == pytest.approx(1.5 * 0.001 * bench.matmul_flops(500) / flops)
    assert out.startswith("⚠️ số đo nhiễu") and "mức dự kiến" in out and "tốc độ tốt nhất đã đo" in out


def test_the_history_is_kept_per_kind_of_work_threads_and_size(monkeypatch, work):
    _scripted_blocks(monkeypatch, [0.001])
    bench.measure(lambda: None, device="cpu", repeats=1, warmup=0, number=1, threads=1,
                  flops=bench.matmul_flops(512), label=f"{work} matmul 512 fp32")
    # another kind (fp16), other threads, or a smaller call than any recorded: no expectation
    for label, threads, n in (("matmul 512 fp16", 1, 512), ("matmul 512 fp32", 2, 512), ("matmul 384 fp32", 1, 384)):
        label = f"{work} {label}"
        _scripted_blocks(monkeypatch, [0.5])
        t = bench.measure(lambda: None, device="cpu", repeats=1, warmup=0, number=1, threads=threads,
                          flops=bench.matmul_flops(n), label=label)
        assert t.expected_s is None, label


def test_sweep_best_skips_the_sizes_it_flags():
    sweep = _sweep([(32, [2e-2] * 3), (64, [1e-5] * 3), (128, [5e-5] * 3), (256, [3e-4, 3e-4, 9e-4])])
    assert 256 in sweep.noisy_sizes and sweep.best.n == 128
    assert _sweep([]).best is None

"""compare_dtypes: fp32 vs a 16-bit dtype on a device, next to the CPU, every side checked and bounded in time.

The GPU logic (which sides run, skip notes, % of peak, the tensor-core note, the sentences built from the
numbers) is tested on a CPU by faking the device, the spec and the measured sides; run_side itself runs
for real on the CPU.
"""

from __future__ import annotations

import pytest
import torch

from lessons_lib import bench, gpu_specs
from lessons_lib.bench import matmul as bench_matmul
from lessons_lib.bench import precisions
from lessons_lib.bench.precisions import DtypeComparison, Side, compare_dtypes, run_side
from lessons_lib.bench.timing import Timing

CUDA = torch.device("cuda")


def timing(seconds: float, n: int = 2048, device: str = "cuda:0", threads: int = 2) -> Timing:
    return Timing(times_s=(seconds,) * 5, device=device, threads=threads, warmup=2, number=1,
                  flops=bench.matmul_flops(n), label=f"matmul {n}")


# --------------------------------------------------------------------------- run_side on the real CPU


def test_run_side_checks_then_times_on_the_cpu():
    side = run_side(64, torch.device("cpu"), torch.float32, threads=1, max_call_s=5, max_time_s=1)
    assert side.measured and not side.skipped
    assert side.timing.threads == 1 and side.timing.repeats <= 5 and side.name == "CPU fp32 (1 luồng)"
    assert "GFLOP/s" in side.line() or "MFLOP/s" in side.line()


def test_run_side_skips_a_size_estimated_over_the_limit_without_running_it(monkeypatch):
    monkeypatch.setattr(precisions, "_probe_call_s", lambda *args: 12.5)
    monkeypatch.setattr(precisions, "_inputs", lambda *a: pytest.fail("a skipped size must not allocate"))
    side = run_side(4096, torch.device("cpu"), torch.float32, threads=2, max_call_s=1, max_time_s=2)
    assert not side.measured and side.skipped.startswith("⏭️")
    assert "12.5 s" in side.skipped and "1 s" in side.skipped and "N=4096" in side.skipped


def test_run_side_reports_an_error_of_this_dtype_on_that_side_only(monkeypatch):
    def unsupported(*args):
        raise RuntimeError('"addmm_impl_cpu_" not implemented for \'Half\'')

    monkeypatch.setattr(precisions, "_probe_call_s", unsupported)
    side = run_side(64, torch.device("cpu"), torch.float16, threads=1, max_call_s=1, max_time_s=1)
    assert side.skipped.startswith("❌ RuntimeError") and "not implemented" in side.skipped


def test_run_side_skips_when_the_matrices_do_not_fit(monkeypatch):
    monkeypatch.setattr(precisions, "_fits", lambda *args: False)
    side = run_side(8192, torch.device("cpu"), torch.float32, threads=1, max_call_s=1, max_time_s=1)
    assert "không vừa bộ nhớ" in side.skipped


# --------------------------------------------------------------------------- compare_dtypes with a fake GPU


@pytest.fixture
def fake_gpu(monkeypatch):
    """Make compare_dtypes believe it runs on a T4: fixed timings, T4 spec, a CPU side that is too slow."""
    calls = []

    def fake_side(n, device, dtype, *, threads, max_call_s, max_time_s, peak_tflops=None):
        calls.append((device.type, dtype, max_call_s, max_time_s, peak_tflops))
        label = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype]
        if device.type == "cpu":
            return Side("cpu", label, threads, skipped="⏭️ không đo: ước lượng ~4 s mỗi phép nhân")
        seconds = {"fp32": 0.004, "fp16": 0.001, "bf16": 0.02}[label]
        return Side("cuda:0", label, threads, timing=timing(seconds, n), peak_tflops=peak_tflops)

    monkeypatch.setattr(precisions, "run_side", fake_side)
    monkeypatch.setattr(precisions.gpu_specs, "spec_for_device", lambda device: gpu_specs.T4)
    monkeypatch.setattr(precisions.torch.cuda, "get_device_name", lambda device=None: "Tesla T4")
    monkeypatch.setattr(precisions.torch.cuda, "empty_cache", lambda: None)
    return calls


def test_gpu_mode_times_fp32_and_fp16_on_the_gpu_and_bounds_the_cpu(fake_gpu):
    result = compare_dtypes(2048, CUDA, torch.float16, threads=2)
    assert [(kind, dt) for kind, dt, *_ in fake_gpu] == [
        ("cuda", torch.float32), ("cuda", torch.float16), ("cpu", torch.float32)]
    assert fake_gpu[0][2:4] == (2.0, 3.0) and fake_gpu[2][2:4] == (1.0, 2.0)  # the GPU's limits, the CPU's
    t4 = gpu_specs.T4
    assert (fake_gpu[0][4], fake_gpu[1][4]) == (t4.peak_tflops("fp32"), t4.peak_tflops("fp16"))  # with the sides
    text = str(result)
    assert "Tesla T4" in text and t4.source in text
    assert "Trên cùng cuda:0, fp16 (tensor core) nhanh hơn 4.0× so với fp32." in text
    assert "⏭️ không đo" in text                          # the skipped CPU side is visible, with its reason
    assert "so với CPU" not in text                       # no sentence about a side that was not measured


def test_percent_of_the_documented_peak_is_built_from_the_timing(fake_gpu):
    result = compare_dtypes(2048, CUDA, torch.float16, threads=2)
    achieved = bench.matmul_flops(2048) / 0.001 / 1e12
    peak = gpu_specs.T4.peak_tflops("fp16")
    assert result.sides[1].percent_of_peak == pytest.approx(100 * achieved / peak)
    assert f"= {100 * achieved / peak:.0f}% đỉnh công bố {peak:g} TFLOP/s" in result.sides[1].line()


def test_bf16_slower_than_fp32_is_said_plainly(fake_gpu):
    result = compare_dtypes(1024, CUDA, torch.bfloat16, threads=2)
    assert "→ Trên cùng cuda:0, bf16 (tensor core) CHẬM hơn 5.0× so với fp32" in str(result)
    assert result.sides[1].peak_tflops is None and result.sides[1].percent_of_peak is None  # no T4 bf16 peak


def test_a_size_that_is_not_a_multiple_of_8_gets_the_tensor_core_note(fake_gpu):
    notes = compare_dtypes(500, CUDA, torch.float16, threads=2).notes()
    assert any("không chia hết cho 8" in note for note in notes)
    assert not compare_dtypes(512, CUDA, torch.float16, threads=2).notes()


def test_the_gpu_vs_cpu_sentence_when_every_side_ran():
    sides = (Side("cuda:0", "fp32", 2, timing=timing(0.01)), Side("cuda:0", "fp16", 2, timing=timing(0.002)),
             Side("cpu", "fp32", 2, timing=timing(0.5, device="cpu")))
    result = DtypeComparison(2048, sides, "Tesla T4", gpu_specs.T4)
    assert result.sentences() == ["Trên cùng cuda:0, fp16 (tensor core) nhanh hơn 5.0× so với fp32.",
                                  "cuda:0 fp32 nhanh hơn 50.0× so với CPU fp32 (2 luồng)."]


def test_nothing_measured_says_so():
    sides = (Side("cuda:0", "fp32", 2, skipped="❌ x"), Side("cuda:0", "fp16", 2, skipped="❌ y"))
    result = DtypeComparison(64, sides)
    assert "→ N=64: không đủ phía được đo để so sánh." in str(result) and "❌ x" in str(result)


def test_compare_dtypes_on_the_cpu_runs_for_real():
    result = compare_dtypes(64, torch.device("cpu"), torch.bfloat16, threads=2)
    fp32, low = result.sides
    assert fp32.is_cpu and low.dtype == "bf16" and fp32.measured and low.measured
    assert result.sentences()[0].startswith("Trên cùng CPU, bf16")


# --------------------------------------------------------------------------- the size probe (also compare_matmul's)


class _Size(int):
    """Stands for a size×size matrix: `a @ b` just returns the size, for the fake measure below."""

    def __matmul__(self, other):
        return int(self)


def _probe_with(monkeypatch, seconds_for_size, n, limit):
    """Run _probe_call_s against a fake device whose size-s matmul takes seconds_for_size(s)."""
    probed = []

    def fake_inputs(size, dev, dt):
        probed.append(size)
        return _Size(size), _Size(size)

    monkeypatch.setattr(bench_matmul, "_inputs", fake_inputs)
    monkeypatch.setattr(bench_matmul, "_measure",
                        lambda fn, dev, **kwargs: timing(seconds_for_size(fn()), device="cpu"))
    return bench_matmul._probe_call_s(n, torch.device("cpu"), torch.float32, 1, limit), probed


def test_the_probe_does_not_trust_launch_bound_gpu_timings(monkeypatch):
    """A T4-like GPU: 20 µs launch cost, 4.5 TFLOP/s. N=8192 takes ~0.24 s, not the 5 s that N=128 suggests."""
    def gpu(size):
        return max(20e-6, bench.matmul_flops(size) / 4.5e12)

    estimate, probed = _probe_with(monkeypatch, gpu, 8192, limit=2.0)
    assert estimate == pytest.approx(bench.matmul_flops(8192) / 4.5e12, rel=0.05) and estimate < 2.0
    assert probed[0] == 128 and probed[-1] > 128


def test_the_probe_stops_early_when_a_trustworthy_probe_is_over_the_limit(monkeypatch):
    """A slow CPU (2 GFLOP/s): N=128 already takes 2 ms, so N=5000 is clearly over a 1 s limit."""
    estimate, probed = _probe_with(monkeypatch, lambda size: bench.matmul_flops(size) / 2e9, 5000, limit=1.0)
    assert estimate > 1.0 and probed == [128]


# --------------------------------------------------------------------------- bf16 without bf16 tensor cores (T4)


def test_bf16_emulated_is_false_without_a_cuda_gpu():
    assert precisions.bf16_emulated("cpu") is False
    assert precisions.bf16_emulated(torch.device("meta")) is False
    if not torch.cuda.is_available():
        assert precisions.bf16_emulated("cuda") is False


def _fake_cuda(monkeypatch, major, *, new_api):
    monkeypatch.setattr(precisions.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(precisions.torch.version, "hip", None)
    monkeypatch.setattr(precisions.torch.cuda, "device", lambda dev: __import__("contextlib").nullcontext())
    monkeypatch.setattr(precisions.torch.cuda, "get_device_capability", lambda dev=None: (major, 5))
    if new_api:
        def is_bf16_supported(including_emulation=True):
            return including_emulation or major >= 8
    else:
        def is_bf16_supported():  # torch without the argument: the capability decides
            raise AssertionError("must not be called")
    monkeypatch.setattr(precisions.torch.cuda, "is_bf16_supported", is_bf16_supported)


@pytest.mark.parametrize("new_api", [True, False])
def test_bf16_emulated_below_compute_capability_8(monkeypatch, new_api):
    _fake_cuda(monkeypatch, 7, new_api=new_api)
    assert precisions.bf16_emulated("cuda") is True
    _fake_cuda(monkeypatch, 8, new_api=new_api)
    assert precisions.bf16_emulated("cuda:0") is False


def test_an_emulated_bf16_comparison_says_so(fake_gpu, monkeypatch):
    monkeypatch.setattr(precisions, "bf16_emulated", lambda device: True)
    text = str(compare_dtypes(2048, CUDA, torch.bfloat16, threads=2))
    assert "không có tensor core cho bf16" in text and "chọn fp16" in text
    assert "tensor core cho bf16" not in str(compare_dtypes(2048, CUDA, torch.float16, threads=2))


def test_a_noisy_side_gets_the_noise_line():
    noisy = Timing(times_s=(0.001, 0.001, 0.004), device="cuda:0", threads=2, warmup=2, number=1,
                   flops=bench.matmul_flops(64), label="matmul 64")
    sides = (Side("cuda:0", "fp32", 2, timing=noisy), Side("cuda:0", "fp16", 2, timing=timing(0.001)))
    text = str(DtypeComparison(64, sides))
    assert "⚠️ số đo nhiễu (máy bận?): cuda:0 fp32: lần chậm nhất gấp 4.0×" in text

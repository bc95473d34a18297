"""1 CPU thread against several (and why more can be slower), and the comparisons that say it."""

from __future__ import annotations

import sys
import types

import pytest

from lessons_lib import bench
from lessons_lib.bench import matmul as bench_matmul
from lessons_lib.bench import timing as bench_timing
from lessons_lib.bench.matmul import Comparison


@pytest.fixture(autouse=True)
def _local(monkeypatch):
    monkeypatch.setattr(bench_matmul, "detect_platform", lambda: "local")
    monkeypatch.setattr(bench_timing, "detect_platform", lambda: "local")
    monkeypatch.setitem(sys.modules, "psutil", None)  # not installed: the reasons cannot name the cores


def test_more_threads_faster_says_by_how_much_without_excuses():
    text = bench.threads_verdict(8e-3, 4e-3, 2)
    assert text.startswith("→ 2 luồng nhanh hơn 1 luồng 2.0×") and "= 2.00" in text
    assert "Lý do" not in text


def test_one_thread_winning_is_said_with_the_reasons():
    text = bench.threads_verdict(4.22e-3, 11.02e-3, 2)  # 1 thread 4.22 ms, 2 threads 11.02 ms: two vCPUs on one core
    assert text.startswith("→ 1 luồng NHANH hơn 2 luồng 2.6×") and "ngược với điều thường thấy" in text
    assert "lõi vật lý" in text and "bận" in text and "Chạy lại" in text
    assert "Colab" not in text


def test_a_tie_is_not_called_a_speedup():
    text = bench.threads_verdict(8e-3, 7.5e-3, 2)
    assert "gần như bằng nhau" in text and "không giúp" in text and "Lý do" in text


@pytest.mark.parametrize(("cores", "said"), [
    (1, "chỉ có 1 lõi vật lý cho 2 luồng"),
    (8, "!lscpu"),  # e.g. a container limited to 2 of 8 cores
    (None, "!lscpu"),  # psutil does not know
])
def test_the_reason_names_the_physical_cores_when_psutil_knows_them(monkeypatch, cores, said):
    monkeypatch.setitem(sys.modules, "psutil", types.SimpleNamespace(cpu_count=lambda logical=True: cores))
    assert said in bench.threads_verdict(4e-3, 8e-3, 2)


def test_colab_and_kaggle_get_their_two_shared_vcpus(monkeypatch):
    monkeypatch.setattr(bench_matmul, "detect_platform", lambda: "colab")
    assert "2 vCPU" in bench.threads_verdict(4e-3, 11e-3, 2)


def test_a_single_cpu_has_nothing_to_compare():
    assert "Chỉ có 1 CPU" in bench.threads_verdict(1e-3, 1e-3, 1)


def _timing(times, threads, device="cpu"):
    return bench.Timing(tuple(times), device, threads, 1, 1, flops=bench.matmul_flops(500), label="matmul 500")


def test_cpu_comparison_where_more_threads_lose_gives_the_reason():
    slow = Comparison(500, "fp32", _timing([4e-3] * 3, 1), _timing([8e-3] * 3, 2), (0.0, 0.0), False)
    assert slow.more_threads_not_faster
    verdict = slow.verdict()
    assert "CPU 2 luồng CHẬM hơn 2.0× so với CPU 1 luồng" in verdict and "lõi vật lý" in verdict
    fast = Comparison(500, "fp32", _timing([8e-3] * 3, 1), _timing([4e-3] * 3, 2), (0.0, 0.0), False)
    assert not fast.more_threads_not_faster and "Lý do" not in fast.verdict()
    gpu = Comparison(500, "fp32", _timing([8e-3] * 3, 2), _timing([9e-3] * 3, 2, "cuda:0"), (0.0, 0.0), False)
    assert not gpu.more_threads_not_faster


def test_comparison_shows_the_noise_line_of_a_noisy_side():
    noisy = Comparison(500, "fp32", _timing([4e-3, 4e-3, 12e-3], 1), _timing([2e-3] * 3, 2), (0.0, 0.0), False)
    assert noisy.noise.startswith("⚠️ số đo nhiễu (máy bận?): CPU 1 luồng: lần chậm nhất gấp 3.0×")
    assert noisy.noise in str(noisy)
    quiet = Comparison(500, "fp32", _timing([4e-3] * 3, 1), _timing([2e-3] * 3, 2), (0.0, 0.0), False)
    assert quiet.noise is None and "⚠️" not in str(quiet)


def test_a_skipped_size_says_why_and_what_to_try(monkeypatch):
    monkeypatch.setattr(bench_matmul, "_probe_call_s", lambda *args: 4.3)
    fp32 = bench.compare_matmul(500, "fp32", "cpu", max_call_s=1.0)
    assert fp32.skipped.startswith("⏭️ Không chạy N=500 fp32") and "~4.30 s > giới hạn 1 s" in fp32.skipped
    assert "hoặc fp32" not in fp32.skipped and "máy đang bận" in fp32.skipped
    assert "(hoặc fp32 trên CPU)" in bench.compare_matmul(500, "fp16", "cpu", max_call_s=1.0).skipped

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


# (1 thread s, all threads s, threads, platform, physical cores psutil reports (None: no psutil), said, not said)
VERDICTS = {
    "faster": (8e-3, 4e-3, 2, "local", None, ("→ 2 luồng nhanh hơn 1 luồng 2.0×", "= 2.00"), ("Lý do",)),
    # 1 thread 4.22 ms, 2 threads 11.02 ms: two vCPUs on one core
    "one thread wins": (4.22e-3, 11.02e-3, 2, "local", None, (
        "→ 1 luồng NHANH hơn 2 luồng 2.6×", "ngược với điều thường thấy", "lõi vật lý", "bận", "Chạy lại",
        "!lscpu"), ("Colab",)),
    "tie": (8e-3, 7.5e-3, 2, "local", None, ("gần như bằng nhau", "không giúp", "Lý do"), ()),
    "psutil names the cores": (4e-3, 8e-3, 2, "local", 1, ("chỉ có 1 lõi vật lý cho 2 luồng",), ("!lscpu",)),
    "more cores than threads": (4e-3, 8e-3, 2, "local", 8, ("!lscpu",), ()),  # a container limited to 2 of 8
    "psutil does not know": (4e-3, 8e-3, 2, "local", 0, ("!lscpu",), ()),
    "colab": (4e-3, 11e-3, 2, "colab", None, ("2 vCPU",), ()),
    "a single cpu": (1e-3, 1e-3, 1, "local", None, ("Chỉ có 1 CPU",), ("Lý do",)),
}


@pytest.mark.parametrize(("one", "many", "threads", "platform", "cores", "said", "unsaid"), VERDICTS.values(),
                         ids=VERDICTS)
def test_threads_verdict(monkeypatch, one, many, threads, platform, cores, said, unsaid):
    monkeypatch.setattr(bench_matmul, "detect_platform", lambda: platform)
    if cores is not None:
        monkeypatch.setitem(sys.modules, "psutil", types.SimpleNamespace(cpu_count=lambda logical=True: cores))
    text = bench.threads_verdict(one, many, threads)
    assert all(s in text for s in said) and not any(s in text for s in unsaid), text


def _timing(times, threads, device="cpu"):
    return bench.Timing(tuple(times), device, threads, 1, 1, flops=bench.matmul_flops(500), label="matmul 500")


def test_cpu_comparison_where_more_threads_lose_gives_the_reason():
    slow = Comparison(500, "fp32", _timing([4e-3] * 3, 1), _timing([8e-3] * 3, 2), (0.0, 0.0), False)
    verdict = slow.verdict()
    assert "CPU 2 luồng CHẬM hơn 2.0× so với CPU 1 luồng" in verdict and "lõi vật lý" in verdict
    fast = Comparison(500, "fp32", _timing([8e-3] * 3, 1), _timing([4e-3] * 3, 2), (0.0, 0.0), False)
    assert "Lý do" not in fast.verdict()
    gpu = Comparison(500, "fp32", _timing([8e-3] * 3, 2), _timing([9e-3] * 3, 2, "cuda:0"), (0.0, 0.0), False)
    assert "Lý do" not in gpu.verdict()  # the threads' reasons are for 1 CPU thread against several only


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

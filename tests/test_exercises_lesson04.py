"""Checked tasks of lesson 04: the solutions pass, typical wrong answers fail with their own message, blanks are "missing"."""

from __future__ import annotations

import statistics
import time

import pytest
import torch
from _lesson_tasks import assert_fails, lines_of, solution_of

from lessons_lib.exercises import _core
from lessons_lib.exercises.lesson04 import _COMPUTE_S, _FakeGpu, _FakeTensor, fake_cuda, task0, task1, task2


def time_it(fn, sync=lambda: None, warmup=2, repeats=7):
    """The lesson's own time_it (§3), which the core task's solution calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


SCOPE = {"torch": torch, "time": time, "statistics": statistics, "time_it": time_it}  # what the lesson defines


# --------------------------------------------------------------------------- the fake GPU behaves like CUDA


def test_the_fake_gpu_queues_matmuls_and_cpu_waits_for_them():
    gpu = _FakeGpu()
    a, b, device = _FakeTensor(gpu), _FakeTensor(gpu), gpu
    a_d, b_d = a.to(device), b.to(device)
    start = time.perf_counter()
    c_d = a_d @ b_d
    queued = time.perf_counter() - start
    start = time.perf_counter()
    c_d.cpu()
    waited = time.perf_counter() - start
    assert queued < 0.01 and waited >= _COMPUTE_S  # the download pays for the queued matmul
    assert torch.matmul(a_d, b_d).device.type == "cuda" and a.device.type == "cpu"
    assert gpu.uploads == 2 and gpu.downloads == 1 and gpu.matmuls == 2


# --------------------------------------------------------------------------- task 0: gpu_time (core)


def test_fake_cuda_queues_and_sync_waits():
    x, sync = fake_cuda()
    start = time.perf_counter()
    x @ x
    queued = time.perf_counter() - start
    sync()
    assert queued < 0.01 and time.perf_counter() - start >= _COMPUTE_S


def test_task0_solution_passes():
    feedback = task0.evaluate(solution_of(task0, "gpu_time", SCOPE))
    assert feedback.passed, str(feedback)


@pytest.mark.parametrize("blank", [None, ...])
def test_task0_blank_is_missing(blank):
    assert task0.evaluate(blank).status == _core.MISSING


def _hand_timed(x, sync, repeats, *, warm=True, sync_after=True, scale=1.0, total=False):
    if warm:
        x @ x
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        x @ x
        if sync_after:
            sync()
        times.append(time.perf_counter() - start)
    return (sum(times) if total else statistics.median(times)) * scale


WRONG_TASK0 = {
    "no sync at all": (lambda x, sync, repeats=5: time_it(lambda: x @ x, repeats=repeats), "không gọi sync() lần nào"),
    "sync only before the clock starts": (lambda x, sync, repeats=5: _hand_timed(x, sync, repeats, sync_after=False),
                                          "XẾP HÀNG"),
    "no warm-up": (lambda x, sync, repeats=5: _hand_timed(x, sync, repeats, warm=False), "warm-up"),
    "milliseconds": (lambda x, sync, repeats=5: _hand_timed(x, sync, repeats, scale=1e3), "mili-giây"),
    "the total": (lambda x, sync, repeats=5: _hand_timed(x, sync, repeats, total=True), "tổng"),
    "torch.cuda.synchronize": (lambda x, sync, repeats=5: time_it(lambda: x @ x, sync=torch.cuda.synchronize),
                               "sync được truyền vào"),
    "a list": (lambda x, sync, repeats=5: [0.05] * repeats, "MỘT số giây"),
}


@pytest.mark.parametrize(("fn", "message"), WRONG_TASK0.values(), ids=WRONG_TASK0.keys())
def test_task0_typical_wrong_answers_fail_with_their_message(fn, message):
    assert_fails(task0.evaluate(fn), message, in_lines=True)


@pytest.mark.parametrize("error", ["Torch not compiled with CUDA enabled",  # a CPU build
                                   "Found no NVIDIA driver on your system."])  # a CUDA build without a driver
def test_task0_names_a_real_synchronize_the_same_way_on_every_build(monkeypatch, error):
    def synchronize(device=None):
        raise RuntimeError(error)

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)  # the matrix's CUDA-build row found the second
    fn, message = WRONG_TASK0["torch.cuda.synchronize"]
    assert_fails(task0.evaluate(fn), message, in_lines=True)


# --------------------------------------------------------------------------- task 1: split_time


def test_task1_solution_passes():
    feedback = task1.evaluate(solution_of(task1, "split_time", SCOPE))
    assert feedback.passed, str(feedback)


@pytest.mark.parametrize("blank", [None, ...])
def test_task1_blank_is_missing(blank):
    assert task1.evaluate(blank).status == _core.MISSING


def test_task1_learner_stub_is_missing():
    def split_time(a, b, device, sync, repeats=5):
        ...

    feedback = task1.evaluate(split_time)
    assert feedback.status == _core.MISSING and "return" in lines_of(feedback)


def _timed(a, b, device, sync, repeats, *, warm=True, sync_after_matmul=True, sync_at_all=True, upload=True,
           download=True, scale=1.0, swap=False):
    s = sync if sync_at_all else (lambda: None)
    if warm:
        (a.to(device) @ b.to(device)).cpu()
    copies, computes = [], []
    for _ in range(repeats):
        s()
        t0 = time.perf_counter()
        a_d, b_d = a.to(device), b.to(device)
        s()
        t1 = time.perf_counter()
        c_d = a_d @ b_d
        if sync_after_matmul:
            s()
        t2 = time.perf_counter()
        c_d.cpu()
        t3 = time.perf_counter()
        copies.append(((t1 - t0) if upload else 0) + ((t3 - t2) if download else 0))
        computes.append(t2 - t1)
    result = statistics.median(copies) * scale, statistics.median(computes) * scale
    return result[::-1] if swap else result


WRONG_TASK1 = {
    "no sync after the matmul": (dict(sync_after_matmul=False), "ngay sau phép nhân"),
    "no sync at all": (dict(sync_at_all=False), "không gọi sync() lần nào"),
    "no warm-up": (dict(warm=False), "warm-up"),
    "upload only": (dict(download=False), "chép kết quả về"),
    "download only": (dict(upload=False), "chép a, b lên"),
    "milliseconds": (dict(scale=1e3), "mili-giây"),
    "swapped": (dict(swap=True), "đảo thứ tự"),
}


@pytest.mark.parametrize(("options", "message"), WRONG_TASK1.values(), ids=WRONG_TASK1.keys())
def test_task1_typical_wrong_answers_fail_with_their_message(options, message):
    def split_time(a, b, device, sync, repeats=5):
        return _timed(a, b, device, sync, repeats, **options)

    assert_fails(task1.evaluate(split_time), message, in_lines=True)


def test_task1_other_wrong_shapes():
    assert "HAI số" in lines_of(task1.evaluate(lambda a, b, device, sync, repeats=5: 0.1))
    assert "TypeError" in lines_of(task1.evaluate(lambda a, b: (0.1, 0.2)))
    no_copy = task1.evaluate(lambda a, b, device, sync, repeats=5: (a @ b, 0.1))
    assert no_copy.status == _core.FAIL and "chép a, b lên trước" in lines_of(no_copy)


# --------------------------------------------------------------------------- task 2: crossover_n


def test_task2_solution_passes():
    feedback = task2.evaluate(solution_of(task2, "crossover_n", SCOPE))
    assert feedback.passed, str(feedback)


def test_task2_learner_stub_is_missing():
    def crossover_n(sizes, cpu_s, gpu_s):
        ...  # TODO: N nhỏ nhất mà từ đó trở lên GPU luôn nhanh hơn (None nếu không có)

    feedback = task2.evaluate(crossover_n)
    assert feedback.status == _core.MISSING, str(feedback)


def _first_faster(sizes, cpu_s, gpu_s):
    return next((n for n, c, g in zip(sizes, cpu_s, gpu_s, strict=True) if g < c), None)


def _first_slower(sizes, cpu_s, gpu_s):
    return next((n for n, c, g in zip(sizes, cpu_s, gpu_s, strict=True) if g > c), sizes[-1])


def _index(sizes, cpu_s, gpu_s):
    answer = None
    for i in reversed(range(len(sizes))):
        if gpu_s[i] >= cpu_s[i]:
            break
        answer = i
    return answer


def _never_none(sizes, cpu_s, gpu_s):
    answer = sizes[-1]
    for n, c, g in reversed(list(zip(sizes, cpu_s, gpu_s, strict=True))):
        if g >= c:
            break
        answer = n
    return answer


def _speedup(sizes, cpu_s, gpu_s):
    return cpu_s[-1] / gpu_s[-1]


WRONG_TASK2 = {
    "first faster point": (_first_faster, "LẦN ĐẦU"),
    "inverted comparison": (_first_slower, "bị đảo"),
    "index instead of N": (_index, "chỉ số"),
    "no None when never faster": (_never_none, "None"),
    "a speedup, not a size": (_speedup, "kích thước N"),
    "always None": (lambda sizes, cpu_s, gpu_s: None, "trả về None"),
    "raises": (lambda sizes, cpu_s, gpu_s: sizes[99], "báo lỗi"),
}


@pytest.mark.parametrize(("fn", "message"), WRONG_TASK2.values(), ids=WRONG_TASK2.keys())
def test_task2_typical_wrong_answers_fail_with_their_message(fn, message):
    assert_fails(task2.evaluate(fn), message, in_lines=True)


def test_lesson04_tasks_are_grouped():
    assert set(_core.GROUPS["lesson04"]) == {"task0", "task1", "task2"}


@pytest.mark.parametrize(("options", "message"), [WRONG_TASK1["upload only"], WRONG_TASK1["download only"],
                                                  (dict(), None)], ids=["upload only", "download only", "right"])
def test_task1_verdict_does_not_depend_on_a_busy_machine(options, message, monkeypatch):
    real_sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda s: real_sleep(3 * s + 0.01))  # every fake step overshoots a lot

    def split_time(a, b, device, sync, repeats=5):
        return _timed(a, b, device, sync, repeats, **options)

    if message is None:
        assert task1.evaluate(split_time).passed
    else:
        assert_fails(task1.evaluate(split_time), message, in_lines=True)

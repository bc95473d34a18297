"""Lesson 04's checked tasks: the solutions pass, each wrong answer gets its row's message, blanks are "missing"."""

from __future__ import annotations

import statistics
import time

import pytest
import torch
from _lesson_tasks import assert_fails, rows, solution_of

from lessons_lib.exercises import _core
from lessons_lib.exercises.lesson04 import _COMPUTE_S, fake_cuda, task0, task1, task2


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


def test_fake_cuda_queues_and_sync_waits():
    x, sync = fake_cuda()
    start = time.perf_counter()
    x @ x
    queued = time.perf_counter() - start
    sync()
    assert queued < 0.01 and time.perf_counter() - start >= _COMPUTE_S


@pytest.mark.parametrize(("task", "name"), [(task0, "gpu_time"), (task1, "split_time"), (task2, "crossover_n")])
def test_solutions_pass_and_blanks_are_missing(task, name):
    feedback = task.evaluate(solution_of(task, name, SCOPE))
    assert feedback.passed, str(feedback)
    assert task.evaluate(None).status == task.evaluate(...).status == _core.MISSING


def test_the_learner_stubs_are_missing():
    def split_time(a, b, device, sync, repeats=5):
        ...

    def crossover_n(sizes, cpu_s, gpu_s):
        ...  # TODO: N nhỏ nhất mà từ đó trở lên GPU luôn nhanh hơn (None nếu không có)

    assert task1.evaluate(split_time).status == task2.evaluate(crossover_n).status == _core.MISSING


# --------------------------------------------------------------------------- task 0: gpu_time (core)


def _hand_timed(x, sync, repeats=5, *, warm=True, sync_after=True, scale=1.0, total=False, runs=None, answer=None):
    if warm:
        x @ x
    times = []
    for _ in range(repeats if runs is None else runs):
        sync()
        start = time.perf_counter()
        x @ x
        if sync_after:
            sync()
        times.append(time.perf_counter() - start)
    return answer if answer is not None else (sum(times) if total else statistics.median(times)) * scale


#: A wrong gpu_time for each row of task0's table, and what its message must name.
WRONG_TASK0 = {
    "torch.cuda.synchronize": (lambda x, sync, repeats=5: time_it(lambda: x @ x, sync=torch.cuda.synchronize),
                               ["torch.cuda.synchronize()", "sync"]),
    "too few": (lambda x, sync, repeats=5: _hand_timed(x, sync, runs=2), ["3 lần", "repeats=5"]),
    "milliseconds": (lambda x, sync, repeats=5: _hand_timed(x, sync, scale=1e3), ["50000.0 ms", "giây"]),
    "no sync": (lambda x, sync, repeats=5: _hand_timed(x, sync, sync_after=False), ["sync()", "time_it"]),
    "total": (lambda x, sync, repeats=5: _hand_timed(x, sync, total=True), ["250.0 ms"]),
    "off": (lambda x, sync, repeats=5: _hand_timed(x, sync, answer=0.02), ["20.0 ms", "50 ms"]),
    "no warm-up": (lambda x, sync, repeats=5: _hand_timed(x, sync, warm=False), ["warm-up"]),
}


@pytest.mark.parametrize("row", rows(task0))
def test_task0_each_misconception_has_its_message(row):
    fn, names = WRONG_TASK0[row]
    assert_fails(task0.evaluate(fn), *names, row=row)


def test_task0_without_sync_says_so():
    feedback = task0.evaluate(lambda x, sync, repeats=5: time_it(lambda: x @ x, repeats=repeats))
    assert_fails(feedback, "không gọi sync() lần nào", row="no sync")


@pytest.mark.parametrize("error", ["Torch not compiled with CUDA enabled",  # a CPU build
                                   "Found no NVIDIA driver on your system."])  # a CUDA build without a driver
def test_task0_names_a_real_synchronize_the_same_way_on_every_build(monkeypatch, error):
    def synchronize(device=None):
        raise RuntimeError(error)

    monkeypatch.setattr(torch.cuda, "synchronize", synchronize)  # the matrix's CUDA-build row found the second
    fn, names = WRONG_TASK0["torch.cuda.synchronize"]
    assert_fails(task0.evaluate(fn), *names, row="torch.cuda.synchronize")


def test_task0_a_list_is_named():
    feedback = task0.evaluate(lambda x, sync, repeats=5: [0.05] * repeats)
    assert feedback.status == _core.FAIL and "list" in feedback.lines[0]


# --------------------------------------------------------------------------- task 1: split_time


def _timed(a, b, device, sync, repeats, *, warm=True, sync_after_matmul=True, sync_at_all=True, upload=True,
           download=True, scale=1.0, swap=False, runs=None, copies_on=True, compute_add=0.0, copy_add=0.0):
    s = sync if sync_at_all else (lambda: None)
    a_d, b_d = a.to(device), b.to(device)
    if warm:
        (a_d @ b_d).cpu()
    copies, computes = [], []
    for _ in range(repeats if runs is None else runs):
        s()
        t0 = time.perf_counter()
        if copies_on:
            a_d, b_d = a.to(device), b.to(device)
        s()
        t1 = time.perf_counter()
        c_d = a_d @ b_d
        if sync_after_matmul:
            s()
        t2 = time.perf_counter()
        if copies_on:
            c_d.cpu()
        t3 = time.perf_counter()
        copies.append(((t1 - t0) if upload else 0) + ((t3 - t2) if download else 0) + copy_add)
        computes.append(t2 - t1 + compute_add)
    result = statistics.median(copies) * scale, statistics.median(computes) * scale
    return result[::-1] if swap else result


#: A wrong split_time for each row of task1's table (options of _timed), and what its message must name.
WRONG_TASK1 = {
    "too few": (dict(runs=2), ["3 lần", "repeats=5"]),
    "no copies": (dict(copies_on=False), [".cpu()", "a.to(device)"]),
    "milliseconds": (dict(scale=1e3), ["giây"]),
    "swapped": (dict(swap=True), ["(copy_s, compute_s)"]),
    "no sync after the matmul": (dict(sync_after_matmul=False), ["sync()", "c = a_d @ b_d"]),
    "compute off": (dict(compute_add=0.1), ["150.0 ms", "50 ms"]),
    "upload only": (dict(download=False), [".cpu()"]),
    "download only": (dict(upload=False), ["a, b lên"]),
    "copy off": (dict(copy_add=0.05), ["25 ms"]),
    "no warm-up": (dict(warm=False), ["warm-up"]),
}


def _split(options):
    def split_time(a, b, device, sync, repeats=5):
        return _timed(a, b, device, sync, repeats, **options)
    return split_time


@pytest.mark.parametrize("row", rows(task1))
def test_task1_each_misconception_has_its_message(row):
    options, names = WRONG_TASK1[row]
    assert_fails(task1.evaluate(_split(options)), *names, row=row)


def test_task1_other_wrong_shapes():
    assert "0.1" in task1.evaluate(lambda a, b, device, sync, repeats=5: 0.1).lines[0]
    assert "TypeError" in task1.evaluate(lambda a, b: (0.1, 0.2)).lines[0]
    assert "a.to(device)" in task1.evaluate(lambda a, b, device, sync, repeats=5: (a @ b, 0.1)).lines[0]


@pytest.mark.parametrize("row", ["upload only", "download only", None])
def test_task1_verdict_does_not_depend_on_a_busy_machine(row, monkeypatch):
    real_sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda s: real_sleep(3 * s + 0.01))  # every fake step overshoots a lot
    feedback = task1.evaluate(_split(WRONG_TASK1[row][0] if row else {}))
    assert feedback.passed if row is None else row in feedback.causes, str(feedback)


# --------------------------------------------------------------------------- task 2: crossover_n


def _first(faster: bool):
    """Return a crossover_n answering the first N where the GPU is faster (or slower) than the CPU."""
    return lambda sizes, cpu_s, gpu_s: next((n for n, c, g in zip(sizes, cpu_s, gpu_s, strict=True)
                                             if (g < c) == faster), None)


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


#: A wrong crossover_n for each row of task2's table, and what its message must name.
WRONG_TASK2 = {
    "no None when never faster": (_never_none, ["None", "64"]),
    "always None": (lambda sizes, cpu_s, gpu_s: None, ["N=128"]),
    "index instead of N": (_index, ["chỉ số 1", "N=128"]),
    "first faster point": (_first(faster=True), ["N=64"]),
    "inverted comparison": (_first(faster=False), ["N=64", "gpu_s", "cpu_s"]),
    "a speedup, not a size": (lambda sizes, cpu_s, gpu_s: cpu_s[-1] / gpu_s[-1], ["40.0", "sizes"]),
}


@pytest.mark.parametrize("row", rows(task2))
def test_task2_each_misconception_has_its_message(row):
    fn, names = WRONG_TASK2[row]
    assert_fails(task2.evaluate(fn), *names, row=row)


def test_task2_an_answer_that_changes_the_lists_does_not_change_the_next_check():
    task2.evaluate(lambda sizes, cpu_s, gpu_s: sizes.reverse())
    assert task2.evaluate(solution_of(task2, "crossover_n", SCOPE)).passed

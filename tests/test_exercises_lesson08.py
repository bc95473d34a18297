"""Lesson 08's checked tasks: the solutions pass, a blank is "chưa làm", each row of the checkers' tables of wrong
answers is found by an example of it and names what is wrong, and nothing raises."""

from __future__ import annotations

import math

import pytest
import torch
from _lesson_tasks import assert_checks_never_raise, assert_fails, assert_missing, lines_of, rows, solution_of

from lessons_lib.exercises.lesson08 import _expected_gb, _expected_shard, task1, task2


@pytest.mark.parametrize("task", [task1, task2], ids=lambda t: t.key)
def test_blank_is_not_done_and_nothing_raises(task, capsys):
    assert_missing(task.evaluate(None))
    assert_missing(task.evaluate(lambda *args: None), "return")
    assert_checks_never_raise(task, capsys)


# --------------------------------------------------------------------------- task 2: shard indices


def test_task2_solution_passes_and_matches_torch():
    shard_indices = solution_of(task2, "shard_indices", {})
    assert task2.evaluate(shard_indices).passed
    assert task2.evaluate(lambda n, w, r: torch.tensor(shard_indices(n, w, r))).passed
    assert task2.evaluate(lambda n, w, r: tuple(shard_indices(n, w, r))).passed


def _blocks(n, world_size, rank):
    per = math.ceil(n / world_size)
    return list(range(rank * per, min((rank + 1) * per, n)))


def _pad_with_last(n, world_size, rank):
    total = math.ceil(n / world_size) * world_size
    return (list(range(n)) + [n - 1] * (total - n))[rank:total:world_size]


#: An example of each row of task 2's table: (answer, what the message must name).
SHARD_EXAMPLES = {
    "blocks": (_blocks, "r + world_size"),
    "no padding": (lambda n, w, r: list(range(r, n, w)), "ceil(n / world_size)"),
    "ranks from one": (lambda n, w, r: _expected_shard(n, w, (r + 1) % w), "Rank đếm từ 0"),
    "pads with others": (_pad_with_last, "i % n"),
    "other": (lambda n, w, r: [0], "DistributedSampler"),
}


@pytest.mark.parametrize("name", rows(task2))  # a row without an example fails (KeyError)
def test_task2_each_wrong_split_is_found_and_named(name):
    answer, names = SHARD_EXAMPLES[name]
    feedback = task2.evaluate(answer)
    assert_fails(feedback, names)
    assert feedback.causes == (name,)


@pytest.mark.parametrize(("answer", "names"), [
    (lambda n, w, r: torch.tensor(_expected_shard(n, w, r), dtype=torch.float32), "Tensor"),
    (lambda n, w, r: "0,2,4", "str"),
    (lambda n, w, r: 1 / 0, "ZeroDivisionError"),
    (lambda n: [0], "TypeError"),
])
def test_task2_odd_answers_name_what_they_are(answer, names):
    assert_fails(task2.evaluate(answer), names)


def test_task2_long_lists_are_shortened_in_messages():
    fb = task2.evaluate(lambda n, w, r: list(range(r * (n // w), (r + 1) * (n // w))) if n == 64 else
                        _expected_shard(n, w, r))
    assert "(32 chỉ số)" in lines_of(fb) and str(list(range(32))) not in lines_of(fb)


# --------------------------------------------------------------------------- task 1: memory per GPU


def test_task1_solution_passes_and_matches_the_lesson_and_the_zero_paper():
    per_gpu_gb = solution_of(task1, "per_gpu_gb", {})
    assert task1.evaluate(per_gpu_gb).passed
    assert task1.evaluate(lambda n, g, s: torch.tensor(_expected_gb(n, g, s))).passed
    assert [round(per_gpu_gb(7_500_000_000, 64, s), 1) for s in range(4)] == [120.0, 31.4, 16.6, 1.9]  # paper, fig. 1


def _gb(n, g, s, p=2, gr=2, o=12, sp=3, sg=2, so=1):
    return sum(b * n / (g if s >= k else 1) for b, k in ((p, sp), (gr, sg), (o, so))) / 1e9


#: An example of each row of task 1's table.
MEMORY_EXAMPLES = {
    "ddp divides": lambda n, g, s: 16 * n / g / 1e9 if s == 0 else _expected_gb(n, g, s),
    "adam 8": lambda n, g, s: _gb(n, g, s, o=8),
    "adam 4": lambda n, g, s: _gb(n, g, s, o=4),
    "fp32 adam": lambda n, g, s: _gb(n, g, s, p=4, gr=4, o=8),
    "stages reversed": lambda n, g, s: _gb(n, g, s, sp=1, sg=2, so=3),
    "zero-1 shards gradients": lambda n, g, s: _gb(n, g, s, sg=1),
    "zero-2 shards parameters": lambda n, g, s: _gb(n, g, s, sp=2),
    "zero-3 keeps parameters": lambda n, g, s: _gb(n, g, s, sp=4),
    "GiB": lambda n, g, s: _expected_gb(n, g, s) * 1e9 / 2**30,
    "bytes": lambda n, g, s: _expected_gb(n, g, s) * 1e9,
}


@pytest.mark.parametrize("name", rows(task1))  # a row without an example fails (KeyError)
def test_task1_each_wrong_rule_is_found_with_a_concrete_case(name):
    feedback = task1.evaluate(MEMORY_EXAMPLES[name])
    assert feedback.status == "fail" and feedback.causes == (name,)
    assert "per_gpu_gb(" in feedback.lines[-1]


def test_task1_other_wrong_answers_get_a_concrete_case():
    feedback = task1.evaluate(lambda n, g, s: 1.0)
    assert_fails(feedback, "per_gpu_gb(7_000_000_000, 8, 0)", "112 GB")
    assert feedback.causes == ()


@pytest.mark.parametrize(("answer", "names"), [
    (lambda n, g, s: int("x"), "ValueError"), (lambda n, g, s: [1.0], "list"), (lambda n, g, s: float("nan"), "float"),
])
def test_task1_odd_answers_name_what_they_are(answer, names):
    assert_fails(task1.evaluate(answer), names)

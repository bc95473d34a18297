"""The checked tasks of lesson 08: the solutions pass, typical wrong answers fail with their specific message,
a blank answer says "chưa làm", and nothing raises from inside a checker."""

from __future__ import annotations

import math

import pytest
import torch
from _lesson_tasks import assert_fails, lines_of, solution_of

from lessons_lib.exercises import _core
from lessons_lib.exercises.lesson08 import _expected_gb, _expected_shard, task1, task2

# --------------------------------------------------------------------------- task 2: shard indices


def test_task2_solution_passes_and_matches_torch():
    shard_indices = solution_of(task2, "shard_indices", {})
    fb = task2.evaluate(shard_indices)
    assert fb.status == _core.PASS, fb
    assert shard_indices(10, 4, 2) == [2, 6, 0] == _expected_shard(10, 4, 2)
    assert sorted(i for r in range(3) for i in shard_indices(10, 3, r)) == sorted(list(range(10)) + [0, 1])


def test_task2_blank_and_missing_return_are_not_done():
    assert task2.evaluate(None).status == _core.MISSING
    assert task2.evaluate(...).status == _core.MISSING

    def todo(n, world_size, rank):
        ...

    fb = task2.evaluate(todo)
    assert fb.status == _core.MISSING and "return" in lines_of(fb)


def test_task2_contiguous_blocks_are_explained():
    def blocks(n, world_size, rank):
        per = math.ceil(n / world_size)
        return list(range(rank * per, min((rank + 1) * per, n)))

    fb = task2.evaluate(blocks)
    assert_fails(fb, "khúc liền", "xen kẽ", in_lines=True)


def test_task2_missing_padding_is_explained():
    fb = task2.evaluate(lambda n, w, r: list(range(r, n, w)))
    assert_fails(fb, "cùng số mẫu", "lặp lại các mẫu đầu", "[2, 6, 0]", in_lines=True)


def test_task2_ranks_counted_from_one_are_explained():
    fb = task2.evaluate(lambda n, w, r: _expected_shard(n, w, (r + 1) % w))
    assert_fails(fb, "Rank đếm từ 0", in_lines=True)


def test_task2_padding_with_the_wrong_samples_is_explained():
    def pad_with_last(n, world_size, rank):
        total = math.ceil(n / world_size) * world_size
        indices = list(range(n)) + [n - 1] * (total - n)
        return indices[rank:total:world_size]

    fb = task2.evaluate(pad_with_last)
    assert_fails(fb, "ĐẦU", "i % n", in_lines=True)


def test_task2_accepts_tensors_and_ranges_but_not_floats():
    sol = solution_of(task2, "shard_indices", {})
    assert task2.evaluate(lambda n, w, r: torch.tensor(sol(n, w, r))).status == _core.PASS
    assert task2.evaluate(lambda n, w, r: tuple(sol(n, w, r))).status == _core.PASS
    fb = task2.evaluate(lambda n, w, r: torch.tensor(sol(n, w, r), dtype=torch.float32))
    assert_fails(fb, "list chỉ số", in_lines=True)
    fb = task2.evaluate(lambda n, w, r: "0,2,4")
    assert_fails(fb, "str", in_lines=True)


def test_task2_never_raises_on_bad_answers():
    fb = task2.evaluate(lambda n, w, r: 1 / 0)
    assert_fails(fb, "ZeroDivisionError", in_lines=True)
    fb = task2.evaluate(42)
    assert_fails(fb, "phải là một hàm", in_lines=True)
    fb = task2.evaluate(lambda n: [0])  # wrong signature
    assert_fails(fb, "TypeError", in_lines=True)


def test_task2_long_lists_are_shortened_in_messages():
    fb = task2.evaluate(lambda n, w, r: list(range(r * (n // w), (r + 1) * (n // w))) if n == 64 else _expected_shard(n, w, r))
    assert_fails(fb, "(32 chỉ số)", "…", in_lines=True)


# --------------------------------------------------------------------------- task 1: memory per GPU


def test_task1_solution_passes_and_matches_the_lesson_numbers():
    per_gpu_gb = solution_of(task1, "per_gpu_gb", {})
    assert task1.evaluate(per_gpu_gb).status == _core.PASS
    assert per_gpu_gb(7_000_000_000, 8, 0) == pytest.approx(112.0)
    assert [round(per_gpu_gb(7_500_000_000, 64, s), 1) for s in range(4)] == [120.0, 31.4, 16.6, 1.9]  # ZeRO paper
    assert _expected_gb(7_000_000_000, 8, 3) == pytest.approx(14.0)


def test_task1_blank_is_not_done():
    assert task1.evaluate(None).status == _core.MISSING

    def todo(n_params, n_gpus, stage):
        ...

    assert task1.evaluate(todo).status == _core.MISSING


@pytest.mark.parametrize("wrong, message", [
    (lambda n, g, s: 16 * n / g / 1e9 if s == 0 else _expected_gb(n, g, s), "DDP (stage 0) không chia gì"),
    (lambda n, g, s: (2 * n / (g if s >= 3 else 1) + 2 * n / (g if s >= 2 else 1) + 8 * n / (g if s >= 1 else 1)) / 1e9,
     "12 byte"),
    (lambda n, g, s: (4 * n / (g if s >= 3 else 1) + 4 * n / (g if s >= 2 else 1) + 8 * n / (g if s >= 1 else 1)) / 1e9,
     "Adam fp32"),
    (lambda n, g, s: (2 * n / (g if s >= 1 else 1) + 2 * n / (g if s >= 2 else 1) + 12 * n / (g if s >= 3 else 1)) / 1e9,
     "thứ tự các stage bị đảo"),
    (lambda n, g, s: (2 * n / (g if s >= 3 else 1) + 2 * n / (g if s >= 1 else 1) + 12 * n / (g if s >= 1 else 1)) / 1e9,
     "ZeRO-1 chỉ chia trạng thái optimizer"),
    (lambda n, g, s: (2 * n / (g if s >= 2 else 1) + 2 * n / (g if s >= 2 else 1) + 12 * n / (g if s >= 1 else 1)) / 1e9,
     "mỗi GPU vẫn giữ đủ tham số"),
    (lambda n, g, s: (2 * n + 2 * n / (g if s >= 2 else 1) + 12 * n / (g if s >= 1 else 1)) / 1e9, "ZeRO-3"),
    (lambda n, g, s: _expected_gb(n, g, s) * 1e9 / 2**30, "GiB"),
    (lambda n, g, s: _expected_gb(n, g, s) * 1e9, "chia cho 1e9"),
])
def test_task1_typical_wrong_answers_get_their_message(wrong, message):
    fb = task1.evaluate(wrong)
    assert_fails(fb, message, in_lines=True)
    assert "ví dụ: per_gpu_gb(" in lines_of(fb)  # and a concrete case


def test_task1_other_wrong_answers_get_a_concrete_example():
    fb = task1.evaluate(lambda n, g, s: 1.0)
    assert_fails(fb, "ví dụ: per_gpu_gb(7_000_000_000, 8, 0) trả về 1 GB, đúng là 112 GB", in_lines=True)


def test_task1_never_raises_on_bad_answers():
    assert "ValueError" in lines_of(task1.evaluate(lambda n, g, s: int("x")))
    assert "phải trả về một số GB" in lines_of(task1.evaluate(lambda n, g, s: [1.0]))
    assert "phải trả về một số GB" in lines_of(task1.evaluate(lambda n, g, s: float("nan")))
    assert task1.evaluate(lambda n, g, s: torch.tensor(_expected_gb(n, g, s))).status == _core.PASS


# --------------------------------------------------------------------------- group and language


def test_tasks_belong_to_lesson08_and_progress_lists_them(capsys):
    assert set(_core.GROUPS["lesson08"]) == {"task2", "task1"}
    _core.progress("lesson08")
    out = capsys.readouterr().out
    assert "Nhiệm vụ 1" in out and "Nhiệm vụ 2" in out



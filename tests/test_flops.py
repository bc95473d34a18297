import pytest

from lessons_lib.flops import matmul_flops


def test_matmul_flops():
    assert matmul_flops(10) == 2000
    assert matmul_flops(1) == 2


@pytest.mark.parametrize(("args", "error", "match"), [
    ((0,), ValueError, "n phải ≥ 1"), ((-1,), ValueError, "n phải"), ((2.0,), TypeError, "số nguyên"),
    ((True,), TypeError, "n"),
])
def test_matmul_flops_rejects_bad_sizes(args, error, match):
    with pytest.raises(error, match=match):
        matmul_flops(*args)

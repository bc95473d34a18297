import pytest
import torch

from lessons_lib.flops import count_flops, matmul_flops


def test_matmul_flops():
    assert matmul_flops(10) == 2000
    assert matmul_flops(2, 3, 4) == 48


def test_count_flops_of_linear_matches_hand_count():
    layer = torch.nn.Linear(64, 32, bias=False, device="meta")
    x = torch.randn(8, 64, device="meta")
    assert count_flops(layer, x) == 2 * 8 * 64 * 32
    # backward: grad wrt input and wrt weight, each as large as the forward matmul
    x.requires_grad_(True)
    assert count_flops(layer, x, backward=True) == 3 * 2 * 8 * 64 * 32


@pytest.mark.parametrize("args, error", [((0,), ValueError), ((2.0,), TypeError), ((2, -1), ValueError)])
def test_matmul_flops_rejects_bad_sizes(args, error):
    with pytest.raises(error, match="positive int"):
        matmul_flops(*args)


def test_count_flops_rejects_bad_input():
    with pytest.raises(TypeError, match="module or function"):
        count_flops(42)
    with pytest.raises(TypeError, match="backward"):
        count_flops(torch.nn.Identity(), torch.ones(1), backward="yes")
    with pytest.raises(ValueError, match="requires grad"):
        count_flops(lambda t: t * 2, torch.ones(2), backward=True)

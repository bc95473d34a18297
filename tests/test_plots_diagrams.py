import pytest

from lessons_lib.plots import cuda_stack


def test_cuda_stack_draws_every_layer():
    ax = cuda_stack()
    texts = [t.get_text() for t in ax.texts]
    assert "Python: c = a @ b" in texts and "NVIDIA driver" in texts
    assert len(ax.patches) == 6


def test_cuda_stack_sends_only_matmul_and_conv_to_nvidia_libraries():
    texts = " ".join(t.get_text() for t in cuda_stack().texts)
    assert "cuBLAS cho a @ b" in texts and "conv: cuDNN" in texts and "kernel riêng của ATen" in texts
    assert "NCCL" not in texts  # collectives between GPUs are not on the a @ b path


def test_cuda_stack_rejects_bad_ax():
    with pytest.raises(TypeError, match="Axes"):
        cuda_stack(ax="left")

import pytest

from lessons_lib import gpu_cells


@pytest.mark.parametrize(
    "source, needed",
    [
        ("%%gpu\nx = 1", 1),
        ("\n%%gpu  # needs CUDA\nx", 1),
        ("%%gpu 2\nprint()", 2),
        ("x = 1\n%%gpu", None),
        ("# %%gpu\n", None),
        ("", None),
    ],
)
def test_required_gpus(source, needed):
    assert gpu_cells.required_gpus(source) == needed


@pytest.mark.parametrize("source", ["%%gpu two\n", "%%gpu 0\n", "%%gpux\n"])
def test_required_gpus_rejects_malformed_markers(source):
    with pytest.raises(ValueError, match="%%gpu"):
        gpu_cells.required_gpus(source)


def test_required_gpus_rejects_non_text():
    with pytest.raises(TypeError, match="str"):
        gpu_cells.required_gpus(["%%gpu"])


def test_missing_hardware_messages_are_one_vietnamese_line():
    one = gpu_cells.missing_hardware(1, 0)
    two = gpu_cells.missing_hardware(2, 1)
    assert "cần GPU CUDA" in one and "Runtime → Change runtime type → T4 GPU" in one
    assert "cần ít nhất 2 GPU" in two and "GPU T4 ×2" in two
    assert "\n" not in one and "\n" not in two
    assert one.startswith(gpu_cells.SKIP_MARK + " ") and two.startswith(gpu_cells.SKIP_MARK + " ")


def test_missing_hardware_none_when_enough():
    assert gpu_cells.missing_hardware(1, 1) is None
    assert gpu_cells.missing_hardware(2, 4) is None


@pytest.mark.parametrize("needed, available, error", [("1", 0, TypeError), (1, -1, ValueError), (True, 0, TypeError)])
def test_missing_hardware_rejects_bad_counts(needed, available, error):
    with pytest.raises(error):
        gpu_cells.missing_hardware(needed, available)


def test_skip_reason_uses_fake_counts():
    assert gpu_cells.skip_reason("print(1)", 0) is None
    assert gpu_cells.skip_reason("%%gpu\nx", 0) is not None
    assert gpu_cells.skip_reason("%%gpu\nx", 1) is None
    assert gpu_cells.skip_reason("%%gpu 2\nx", 1) is not None
    assert gpu_cells.skip_reason("%%gpu 2\nx", 2) is None


def test_cuda_gpu_count_matches_torch():
    import torch

    expected = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert gpu_cells.cuda_gpu_count() == expected

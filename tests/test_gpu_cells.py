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


@pytest.mark.parametrize("source, error, named", [
    *[(source, ValueError, source.strip()) for source in ("%%gpu two\n", "%%gpu 0\n", "%%gpux\n")],
    (["%%gpu"], TypeError, "str"),
])
def test_argument_checks_name_what_to_pass(source, error, named):
    with pytest.raises(error) as raised:
        gpu_cells.required_gpus(source)
    assert named in str(raised.value)


@pytest.mark.parametrize("needed, available, platform, named, not_named", [
    (1, 0, "local", ["GPU CUDA", "không có", "Colab", "Kaggle"], []),
    (2, 1, "local", ["2 GPU", "chỉ có 1", "Kaggle"], []),
    (2, 0, "local", ["2 GPU", "không có GPU nào"], []),
    (1, 0, "colab", ["Runtime → Change runtime type → T4 GPU"], ["Kaggle"]),  # the menu of a Colab CPU runtime
    (2, 1, "colab", ["Colab chỉ cho 1 GPU"], []),  # 2 GPUs: Kaggle, said plainly
])
def test_missing_hardware_is_one_skip_line_naming_what_the_cell_needs(monkeypatch, needed, available, platform,
                                                                      named, not_named):
    monkeypatch.setattr("lessons_lib.platforms.detect_platform", lambda: platform)
    notice = gpu_cells.missing_hardware(needed, available)
    assert notice.startswith(gpu_cells.SKIP_MARK + " ") and "\n" not in notice
    assert all(part in notice for part in named) and not any(part in notice for part in not_named), notice
    assert gpu_cells.missing_hardware(needed, needed) is None and gpu_cells.missing_hardware(needed, 4) is None


def test_cuda_gpu_count_matches_torch():
    import torch

    expected = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert gpu_cells.cuda_gpu_count() == expected

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


@pytest.mark.parametrize("needed, available, named", [
    (1, 0, ["GPU CUDA", "không có", "Colab", "Kaggle"]),
    (2, 1, ["2 GPU", "chỉ có 1", "Kaggle"]),
    (2, 0, ["2 GPU", "không có GPU nào"]),
])
def test_missing_hardware_is_one_skip_line_naming_what_the_cell_needs(monkeypatch, needed, available, named):
    monkeypatch.setattr("lessons_lib.platforms.detect_platform", lambda: "local")
    notice = gpu_cells.missing_hardware(needed, available)
    assert notice.startswith(gpu_cells.SKIP_MARK + " ") and "\n" not in notice
    assert all(part in notice for part in named), notice


def test_missing_hardware_on_a_colab_cpu_runtime_names_colabs_menu_only(monkeypatch):
    monkeypatch.setattr("lessons_lib.platforms.detect_platform", lambda: "colab")
    one = gpu_cells.missing_hardware(1, 0)
    assert "Runtime → Change runtime type → T4 GPU" in one and "Kaggle" not in one
    assert "Colab chỉ cho 1 GPU" in gpu_cells.missing_hardware(2, 1), "2 GPUs: Kaggle, said plainly"


def test_missing_hardware_none_when_enough():
    assert gpu_cells.missing_hardware(1, 1) is None
    assert gpu_cells.missing_hardware(2, 4) is None


def test_cuda_gpu_count_matches_torch():
    import torch

    expected = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert gpu_cells.cuda_gpu_count() == expected

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


def test_missing_hardware_messages_are_one_vietnamese_line(monkeypatch):
    for name in ("COLAB_RELEASE_TAG", "KAGGLE_KERNEL_RUN_TYPE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("lessons_lib.platforms.detect_platform", lambda: "local")
    one = gpu_cells.missing_hardware(1, 0)
    assert one.startswith("⏭️ Bỏ qua ô này: ô cần GPU CUDA, máy này không có. Colab: Runtime → Change runtime type")
    assert "Kaggle" in one
    assert "ô cần ít nhất 2 GPU CUDA, máy này chỉ có 1. Kaggle" in gpu_cells.missing_hardware(2, 1)
    assert "ô cần ít nhất 2 GPU CUDA, máy này không có GPU nào." in gpu_cells.missing_hardware(2, 0)
    assert all("\n" not in gpu_cells.missing_hardware(n, a) for n, a in ((1, 0), (2, 0), (2, 1)))
    assert all(gpu_cells.missing_hardware(n, a).startswith(gpu_cells.SKIP_MARK + " ")
               for n, a in ((1, 0), (2, 0), (2, 1)))


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

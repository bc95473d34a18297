import pytest
import torch

from lessons_lib.memory import blas_workspace_estimate
from lessons_lib.memory.workspace import WorkspaceEstimate

MIB = 2**20
DEFAULT = 8 * MIB + 128 * 1024          # ":4096:2:16:8"
_VARIABLES = ("CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE", "TORCH_CUBLASLT_UNIFIED_WORKSPACE",
              "TORCH_CUBLAS_WORKSPACE_CACHE")


@pytest.fixture
def estimate(monkeypatch):
    """Return ``estimate(capability, version, **env)``: the estimate under that torch and environment."""

    def run(capability, version, **env):
        monkeypatch.setattr(torch, "__version__", version)
        for name in _VARIABLES:
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return blas_workspace_estimate(capability)

    return run


@pytest.mark.parametrize(
    ("version", "capability", "before"),
    [("2.4.1", (7, 5), 2 * DEFAULT),                 # cuBLASLt allocated per call until 2.8
     ("2.8.0", (7, 5), 2 * DEFAULT),
     ("2.9.1", (7, 5), 2 * DEFAULT + MIB),           # kept per handle from 2.9 (pytorch#156495)
     ("2.11.0+cu130", (7, 5), 2 * DEFAULT + MIB),    # Colab: unified only in the size rule
     ("2.11.0", (9, 0), 2 * 32 * MIB + MIB),         # Hopper: 32 MiB per handle
     ("2.11.0", (12, 0), 2 * DEFAULT + MIB),         # Blackwell: 32 MiB only from 2.12
     ("2.12.0", (12, 0), 2 * 32 * MIB),
     ("2.13.0", (7, 5), 2 * DEFAULT),                # unified by default from 2.12
     ("2.14.1", (8, 0), 2 * DEFAULT),
     ("2.15.0", (7, 5), 0)],                         # per-operation workspaces from 2.15
)
def test_estimate_follows_the_torch_version(estimate, version, capability, before):
    result = estimate(capability, version)
    assert isinstance(result, WorkspaceEstimate)
    assert result.before_step_bytes == before
    assert f"sm_{capability[0]}{capability[1]}" in str(result)
    if version.startswith(("2.4", "2.8")):
        assert "cuBLASLt 1.00 MiB chỉ được cấp trong lúc gọi" in str(result)  # in the step's peak instead
    if version == "2.15.0":
        assert "nằm trong peak của bước" in str(result)


def test_environment_variables_change_the_estimate(estimate):
    t4 = (7, 5)
    assert estimate(t4, "2.15.0", TORCH_CUBLAS_WORKSPACE_CACHE="1").before_step_bytes == 2 * DEFAULT
    assert estimate(t4, "2.11.0", TORCH_CUBLASLT_UNIFIED_WORKSPACE="1").before_step_bytes == 2 * DEFAULT
    assert estimate(t4, "2.13.0", TORCH_CUBLASLT_UNIFIED_WORKSPACE="0").before_step_bytes == 2 * DEFAULT + MIB
    assert estimate(t4, "2.9.0", CUBLAS_WORKSPACE_CONFIG=":16:8").before_step_bytes == 2 * 128 * 1024 + MIB
    assert estimate(t4, "2.9.0", CUBLAS_WORKSPACE_CONFIG="junk").before_step_bytes \
        == 2 * DEFAULT + MIB                           # torch warns and keeps its default
    assert estimate(t4, "2.9.0", CUBLASLT_WORKSPACE_SIZE="4096").before_step_bytes == 2 * DEFAULT + 4 * MIB
    assert estimate(t4, "2.11.0", CUBLAS_WORKSPACE_CONFIG=":16:8").before_step_bytes \
        == 3 * 128 * 1024                             # 2.11 caps the Lt size at the cuBLAS size


def test_defaults_read_the_running_torch_and_environment(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    estimate = blas_workspace_estimate((7, 5))
    assert estimate.torch_version == tuple(int(v) for v in torch.__version__.split(".")[:2])
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    assert "2 × cuBLAS 32.00 MiB" in str(blas_workspace_estimate((7, 5)))


@pytest.mark.parametrize("capability", [(7, 5, 0), "7.5", (7, -1), (True, 5)])
def test_bad_input_is_refused_clearly(capability):
    with pytest.raises(TypeError, match="major, minor"):
        blas_workspace_estimate(capability)

import pytest

from lessons_lib.memory import blas_workspace_estimate
from lessons_lib.memory.workspace import WorkspaceEstimate

MIB = 2**20
DEFAULT = 8 * MIB + 128 * 1024          # ":4096:2:16:8"


@pytest.mark.parametrize(
    ("version", "capability", "before", "in_step"),
    [("2.4.1", (7, 5), 2 * DEFAULT, MIB),            # cuBLASLt allocated per call until 2.8
     ("2.8.0", (7, 5), 2 * DEFAULT, MIB),
     ("2.9.1", (7, 5), 2 * DEFAULT + MIB, 0),        # kept per handle from 2.9 (pytorch#156495)
     ("2.11.0+cu130", (7, 5), 2 * DEFAULT + MIB, 0),  # Colab: unified only in the size rule
     ("2.11.0", (9, 0), 2 * 32 * MIB + MIB, 0),      # Hopper: 32 MiB per handle
     ("2.11.0", (12, 0), 2 * DEFAULT + MIB, 0),      # Blackwell: 32 MiB only from 2.12
     ("2.12.0", (12, 0), 2 * 32 * MIB, 0),
     ("2.13.0", (7, 5), 2 * DEFAULT, 0),             # unified by default from 2.12
     ("2.14.1", (8, 0), 2 * DEFAULT, 0),
     ("2.15.0", (7, 5), 0, DEFAULT)],                # per-operation workspaces from 2.15
)
def test_estimate_follows_the_torch_version(version, capability, before, in_step):
    estimate = blas_workspace_estimate(capability, torch_version=version, env={})
    assert isinstance(estimate, WorkspaceEstimate)
    assert (estimate.before_step_bytes, estimate.in_step_bytes) == (before, in_step)
    assert f"sm_{capability[0]}{capability[1]}" in str(estimate)


def test_environment_variables_change_the_estimate():
    t4 = (7, 5)
    assert blas_workspace_estimate(t4, torch_version="2.15.0",
                                   env={"TORCH_CUBLAS_WORKSPACE_CACHE": "1"}).before_step_bytes == 2 * DEFAULT
    assert blas_workspace_estimate(t4, torch_version="2.11.0",
                                   env={"TORCH_CUBLASLT_UNIFIED_WORKSPACE": "1"}).before_step_bytes == 2 * DEFAULT
    assert blas_workspace_estimate(t4, torch_version="2.13.0",
                                   env={"TORCH_CUBLASLT_UNIFIED_WORKSPACE": "0"}).before_step_bytes == 2 * DEFAULT + MIB
    small = blas_workspace_estimate(t4, torch_version="2.9.0", env={"CUBLAS_WORKSPACE_CONFIG": ":16:8"})
    assert small.cublas_bytes == 128 * 1024 and small.before_step_bytes == 2 * 128 * 1024 + MIB
    assert blas_workspace_estimate(t4, torch_version="2.9.0", env={"CUBLAS_WORKSPACE_CONFIG": "junk"}).cublas_bytes \
        == DEFAULT                                     # torch warns and keeps its default
    assert blas_workspace_estimate(t4, torch_version="2.9.0", env={"CUBLASLT_WORKSPACE_SIZE": "4096"}).cublaslt_bytes \
        == 4 * MIB
    assert blas_workspace_estimate(t4, torch_version="2.11.0", env={"CUBLAS_WORKSPACE_CONFIG": ":16:8"}) \
        .cublaslt_bytes == 128 * 1024                 # 2.11 caps the Lt size at the cuBLAS size


def test_defaults_read_the_running_torch_and_environment(monkeypatch):
    import torch
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    estimate = blas_workspace_estimate((7, 5))
    assert estimate.torch_version == tuple(int(v) for v in torch.__version__.split(".")[:2])
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    assert blas_workspace_estimate((7, 5)).cublas_bytes == 32 * MIB


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [(((7, 5, 0),), {}, TypeError, "major, minor"), (("7.5",), {}, TypeError, "major, minor"),
     (((7, 5),), {"torch_version": 2.11}, TypeError, "torch_version"),
     (((7, 5),), {"torch_version": "latest"}, ValueError, "2.11.0"),
     (((7, 5),), {"env": ["CUBLAS_WORKSPACE_CONFIG"]}, TypeError, "env")],
)
def test_bad_input_is_refused_clearly(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        blas_workspace_estimate(*args, **kwargs)

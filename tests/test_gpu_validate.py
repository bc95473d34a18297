"""tools/gpu_validate.sh cannot pass hollow: it fails without a usable CUDA GPU and when a `%%gpu` cell that the
machine's GPUs allow was skipped (tools/run.py's counts); it keeps the executed notebooks.

The end-to-end tests run the real script in the environment these tests run in (fixture course_env_vars). "One
GPU present" is faked with an `nvidia-smi` shim first on PATH (the validator counts the machine's GPUs with it);
torch is this machine's own, so on a machine without CUDA the `%%gpu` cell really is skipped in the kernel, and
the validator must say so.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import nbformat
import pytest
from test_run import GPU_DEMO, write_notebook

from tools import gpu_check, gpu_validate

ROOT = Path(__file__).resolve().parent.parent

FAKE_SMI = """#!/bin/sh
case "$*" in
  *memory.total*) echo "name, driver_version, memory.total [MiB], compute_cap"; echo "Fake GPU, 580.95.05, 81559 MiB, 9.0" ;;
  *) echo "Fake GPU, 580.95.05" ;;
esac
"""


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has CUDA")
def test_first_gpu_computation_reports_the_error_instead_of_raising():
    error = gpu_validate.first_gpu_computation()
    assert isinstance(error, str) and error


# --------------------------------------------------------------------------- the script, end to end


def _validate(args, env_extra, tmp_path):
    env = {**os.environ, **env_extra}
    env.pop(gpu_check.ALLOW_NO_CUDA_ENV, None)
    return subprocess.run(["bash", str(ROOT / "tools" / "gpu_validate.sh"), *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=600)


def test_on_this_machine_without_a_usable_gpu_it_fails_with_the_message(tmp_path, course_env_vars):
    if gpu_check.no_usable_cuda(gpu_check.read_nvidia_smi(), gpu_check.read_torch()) is None:
        pytest.skip("this machine has a usable CUDA GPU")
    out = tmp_path / "out"
    proc = _validate(["-o", str(out)], course_env_vars, tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    first = (out / "problems.txt").read_text(encoding="utf-8").strip().splitlines()[0]
    assert first.startswith("❌") and first in text, "the problem is written once (Vietnamese) and shown"
    assert "Kiểm tra GPU KHÔNG đạt" in text and (out / "environment.txt").exists()
    assert not (out / "pytest.log").exists(), "without --keep-going it stops before running the tests"


@pytest.mark.skipif(os.name == "nt", reason="the nvidia-smi shim is a shell script")
def test_one_gpu_present_but_its_cell_skipped_fails(tmp_path, course_env_vars):
    import torch

    if torch.cuda.is_available():
        pytest.skip("torch has CUDA here: the %%gpu cell would really run")
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "nvidia-smi").write_text(FAKE_SMI, encoding="utf-8")
    (shims / "nvidia-smi").chmod(0o755)
    notebook = write_notebook(tmp_path / "demo.ipynb", *GPU_DEMO)
    out = tmp_path / "out"
    env = {**course_env_vars, "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}"}
    proc = _validate(["-o", str(out), "--keep-going", str(notebook)], env, tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    problems = (out / "problems.txt").read_text(encoding="utf-8")
    assert "Fake GPU" in problems and "Máy có 1 GPU NVIDIA" in problems, "the CUDA problem is named"
    assert "Các ô %%gpu sau bị bỏ qua dù máy có 1 GPU" in problems
    assert f"{notebook}::Cell 1 (cần 1 GPU)" in problems
    assert "Cell 2" not in problems, "the %%gpu 2 cell is rightly skipped on a one-GPU machine"
    executed = nbformat.read(out / "executed" / "demo.ipynb", as_version=4)
    assert "Bỏ qua ô này" in executed.cells[1].outputs[0]["text"], "the executed notebook keeps its outputs"
    assert "| 0 / 1 (cần 1 GPU, máy có 1), 1 (cần 2 GPU, máy có 1) |" in (out / "notebooks.log").read_text(encoding="utf-8")

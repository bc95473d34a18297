"""The plugin's skip decision, checked through a real nbval run with a faked GPU count."""

import nbformat
import pytest

from lessons_lib import gpu_cells, gpu_check
from lessons_lib.gpu_check import SmiReport, TorchReport

pytest_plugins = ["pytester"]


def _write_notebook(path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext lessons_lib.notebook"),
        nbformat.v4.new_code_cell("x = 1 + 1"),
        nbformat.v4.new_code_cell("%%gpu\nprint('one gpu cell')"),
        nbformat.v4.new_code_cell("%%gpu 2\nprint('two gpu cell')"),
        nbformat.v4.new_code_cell("assert x == 2"),
    ]
    nbformat.write(nb, path)


@pytest.mark.parametrize("fake_count, expected", [(0, (3, 2)), (1, (4, 1))])
@pytest.mark.slow
def test_gpu_cells_skipped_by_fake_count(pytester, monkeypatch, fake_count, expected):
    monkeypatch.setattr(gpu_cells, "cuda_gpu_count", lambda: fake_count)
    _write_notebook(pytester.path / "demo.ipynb")
    result = pytester.runpytest_inprocess("--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider", "-rs",
                                          "demo.ipynb")
    passed, skipped = expected
    result.assert_outcomes(passed=passed, skipped=skipped)
    if skipped:
        result.stdout.fnmatch_lines(["*SKIPPED*cần*GPU*"])


def test_loading_the_plugin_does_not_import_torch():
    """The plugin loads in every pytest session of the environment: it must stay cheap."""
    import subprocess
    import sys

    code = "import sys, lessons_lib.pytest_plugin; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# --------------------------------------------------------------------------- header and the hollow-GPU guard


def _fake_machine(monkeypatch, smi, torch_report):
    """Fake what nvidia-smi and torch say in this process (pytester runs the session in-process)."""
    monkeypatch.setattr(gpu_check, "read_nvidia_smi", lambda: smi)
    monkeypatch.setattr(gpu_check, "read_torch", lambda: torch_report)
    monkeypatch.setattr(gpu_cells, "cuda_gpu_count", lambda: torch_report.count)


def _h200():
    return SmiReport(gpus=("NVIDIA H200",), driver="580.95.05")


def test_header_names_torch_build_and_gpus(pytester, monkeypatch):
    _fake_machine(monkeypatch, _h200(), TorchReport("2.13.0", cuda="13.0", available=True, count=1))
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["lessons_lib *: torch 2.13.0 (CUDA 13.0 build), 1 CUDA GPU(s) usable by torch*",
                                 "nvidia-smi: 1 GPU(s) [[]0: NVIDIA H200[]], driver 580.95.05"])
    result.assert_outcomes(passed=1)


def test_gpu_listed_but_cpu_torch_stops_a_session_with_gpu_cells(pytester, monkeypatch):
    monkeypatch.delenv("LESSONS_ALLOW_NO_CUDA", raising=False)
    _fake_machine(monkeypatch, _h200(), TorchReport("2.13.0+cpu"))
    _write_notebook(pytester.path / "demo.ipynb")
    result = pytester.runpytest_inprocess("--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider",
                                          "demo.ipynb")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ❌ Máy có 1 GPU NVIDIA (NVIDIA H200) nhưng torch 2.13.0+cpu*",
                                 "*LESSONS_ALLOW_NO_CUDA=1*"])
    assert "passed" not in result.stdout.str(), "no cell may run once the session is stopped"


@pytest.mark.slow
def test_the_opt_out_lets_the_session_skip_gpu_cells(pytester, monkeypatch):
    monkeypatch.setenv("LESSONS_ALLOW_NO_CUDA", "1")
    _fake_machine(monkeypatch, _h200(), TorchReport("2.13.0+cpu"))
    _write_notebook(pytester.path / "demo.ipynb")
    result = pytester.runpytest_inprocess("--nbval-lax", "--nbval-current-env", "-p", "no:cacheprovider",
                                          "demo.ipynb")
    result.assert_outcomes(passed=3, skipped=2)


def test_sessions_without_gpu_cells_are_never_stopped(pytester, monkeypatch):
    monkeypatch.delenv("LESSONS_ALLOW_NO_CUDA", raising=False)
    _fake_machine(monkeypatch, _h200(), TorchReport("2.13.0+cpu"))
    pytester.makepyfile("def test_x(): pass")
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)

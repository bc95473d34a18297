"""The plugin's skip decision, checked through a real nbval run with a faked GPU count."""

import nbformat
import pytest

from lessons_lib import gpu_cells

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

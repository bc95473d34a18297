"""The IPython extension, run in a real Jupyter kernel: the hint under the learner's traceback, its off
switch, and the `%%gpu` cells (with the GPU count patched inside the kernel, so this runs anywhere)."""

from __future__ import annotations

import re
from pathlib import Path

import nbclient
import nbformat
import pytest

from lessons_lib import notebook as ext
from tools import run as tools_run

META_ERROR = "import torch\ntorch.ones(2, device='meta') + torch.ones(2)"
# torch 2.4's torch.utils.checkpoint warns about its own call; the same warning from a learner's cell must show
CHECKPOINT_DEPRECATION = "`torch.cpu.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cpu', ...)`"


def _texts(cell, name="stdout") -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == name)


def _plain(lines) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(lines))


def _errors(cell):
    return [o for o in cell.outputs if o.output_type == "error"]


@pytest.fixture(scope="module")
def run():
    """Run cells one at a time in one kernel; return a function source -> executed cell."""
    nb = nbformat.v4.new_notebook()
    client = tools_run.notebook_client(nb, Path.cwd(), 180, allow_errors=True)
    with client.setup_kernel():
        def execute(source: str, allow_errors: bool = True):
            cell = nbformat.v4.new_code_cell(source)
            nb.cells.append(cell)
            client.allow_errors = allow_errors
            client.execute_cell(cell, len(nb.cells) - 1)
            return cell

        execute("from lessons_lib import gpu_cells\ngpu_cells.cuda_gpu_count = lambda: 0")
        loaded = execute("%load_ext lessons_lib.notebook")
        assert "torch" in _texts(loaded) and not _errors(loaded)
        yield execute


@pytest.mark.slow
def test_a_failing_cell_keeps_its_full_traceback_then_the_hint_and_still_stops_run_all(run):
    with pytest.raises(nbclient.exceptions.CellExecutionError):
        run(META_ERROR, allow_errors=False)  # "Run all" stops here, as it should
    cell = run(META_ERROR)
    kinds = [o.output_type for o in cell.outputs]
    assert kinds == ["error", "stream"]
    error = cell.outputs[0]
    assert error.ename == "RuntimeError" and "not on the expected device" in error.evalue
    assert "torch.ones(2, device='meta') + torch.ones(2)" in _plain(error.traceback)
    hint = cell.outputs[1].text
    assert hint.startswith("💡 ") and "(ở đây: cpu và meta)" in hint
    unknown = run("raise ValueError('lỗi khác')")  # no hint for an error explain() does not know
    assert [o.output_type for o in unknown.outputs] == ["error"] and _errors(unknown)[0].ename == "ValueError"


@pytest.mark.slow
def test_the_off_switch_and_back_on(run):
    assert not run("%lessons_explain off").outputs
    off = run(META_ERROR)
    assert len(_errors(off)) == 1 and "💡" not in _texts(off)
    assert "Dùng: %lessons_explain on | off" in _texts(run("%lessons_explain maybe"))
    run("%lessons_explain on")
    on = run(META_ERROR)
    assert len(_errors(on)) == 1 and "💡" in _texts(on)


@pytest.mark.slow
def test_gpu_cells_are_skipped_without_the_hardware(run):
    one = run("%%gpu\nran_one = True\nprint('BODY')")
    assert _texts(one).startswith("⏭️ Bỏ qua ô này: ô cần GPU CUDA, máy này không có.")
    assert "BODY" not in _texts(one) and not _errors(one)
    two = run("%%gpu 2\nran_two = True")
    assert "ô cần ít nhất 2 GPU CUDA, máy này không có GPU nào." in _texts(two)
    assert _texts(run("print('ran_one' in globals(), 'ran_two' in globals())")).strip() == "False False"


@pytest.mark.slow
def test_gpu_cells_run_when_enough_gpus_exist_and_keep_line_numbers(run):
    run("gpu_cells.cuda_gpu_count = lambda: 1")
    try:
        assert _texts(run("%%gpu\nprint('BODY')")).strip() == "BODY"
        assert "máy này chỉ có 1." in _texts(run("%%gpu 2\nprint('BODY2')"))
        failing = run("%%gpu\n1 / 0")
        error = _errors(failing)[0]
        assert error.ename == "ZeroDivisionError"
        # the marker line still counts: IPython 8+ says "Cell In[n], line 2", Colab's IPython 7.34 "----> 2 1 / 0"
        assert re.search(r"line 2\b|-+> 2 ", _plain(error.traceback)), _plain(error.traceback)
    finally:
        run("gpu_cells.cuda_gpu_count = lambda: 0")


@pytest.mark.slow
def test_unloading_removes_the_hint(run):
    run("%unload_ext lessons_lib.notebook")
    try:
        cell = run(META_ERROR)
        assert len(_errors(cell)) == 1 and "💡" not in _texts(cell)
    finally:
        run("%load_ext lessons_lib.notebook")


@pytest.mark.slow
def test_rerunning_the_setup_cells_reload_prints_the_banner_and_registers_once(run):
    """The setup cell ends with %reload_ext: re-running it shows the banner again (no "already loaded")."""
    for _ in range(2):
        cell = run("%reload_ext lessons_lib.notebook")
        assert "torch" in _texts(cell) and "already loaded" not in _texts(cell) and not _errors(cell)
    count = run("print(sum(getattr(f, '__name__', '') == '_gpu_cell_transform' "
                "for f in get_ipython().input_transformers_cleanup))")
    assert _texts(count).strip() == "1", count.outputs
    filters = run("import logging\nprint(len(logging.getLogger('torch.utils.cpp_extension').filters))")
    assert _texts(filters).strip() == "1", filters.outputs
    skipped = run("%%gpu\nprint('GPU BODY RAN')")
    assert "Bỏ qua" in _texts(skipped) and "GPU BODY RAN" not in _texts(skipped)


# --------------------------------------------------------------------------- in-process pieces


def test_the_handler_shows_the_traceback_even_if_explaining_fails(monkeypatch, capsys):
    shown = []

    class Shell:
        def showtraceback(self, exc_tuple, tb_offset=None):
            shown.append(exc_tuple[1])

    def broken(exc):
        raise RuntimeError("hint failed")

    monkeypatch.setattr(ext, "explain", broken)
    error = RuntimeError("Expected all tensors to be on the same device")
    ext._explain_handler(Shell(), RuntimeError, error, None)
    assert shown == [error] and capsys.readouterr().out == ""


# --------------------------------------------------------------------------- known false alarms


@pytest.mark.slow
def test_loading_hides_the_cpp_extension_line_and_the_profiler_false_alarm_in_a_kernel(run):
    cell = run("import logging, warnings\n"
               "logging.getLogger('torch.utils.cpp_extension').warning(\"No CUDA runtime is found, using CUDA_HOME='%s'\", "
               "'/usr/local')\n"
               "warnings.warn('Warning: Profiler clears events at the end of each cycle.Only events from the current '"
               "'cycle will be reported.To keep events across cycles, set acc_events=True.', UserWarning)\n"
               f"warnings.warn_explicit({CHECKPOINT_DEPRECATION!r}, FutureWarning, 'checkpoint.py', 1, "
               "module='torch.utils.checkpoint')\n"
               "print('done')")
    assert _texts(cell).strip() == "done" and not _texts(cell, "stderr"), cell.outputs


@pytest.mark.slow
def test_other_warnings_and_log_lines_still_show_in_a_kernel(run):
    cell = run("import logging, warnings\n"
               "logging.getLogger('torch.utils.cpp_extension').error('Error building extension')\n"
               "warnings.warn('Warning: Profiler clears events at the end of each cycle. Only events from the '"
               "'current cycle will be reported. To keep events across cycles, set acc_events=True.', UserWarning)\n"
               "logging.getLogger('torch.utils.cpp_extension').warning('bad %d', 'not a number')\n"
               f"warnings.warn_explicit({CHECKPOINT_DEPRECATION!r}, FutureWarning, 'cell.py', 1, module='__main__')")
    err = _texts(cell, "stderr")
    assert "Error building extension" in err and "at the end of each cycle. Only events" in err
    assert "Logging error" in err and "cell.py" in err and not _errors(cell)  # a malformed record is not hidden

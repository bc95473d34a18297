"""The IPython extension of the course: `%%gpu` cells, error explanations, plot style, device banner.

Load it with ``%load_ext lessons_lib.notebook``; importing this module changes nothing.
"""

from __future__ import annotations

from . import gpu_cells
from .device import banner
from .errors import explain

_state = {"explain": True, "loaded": False}


def gpu_cell_transform(lines: list[str]) -> list[str]:
    """Rewrite a `%%gpu` cell: drop the marker when the GPUs are there, else print the skip notice only."""
    if not lines:
        return lines
    needed = gpu_cells.required_gpus(lines[0])
    if needed is None:
        return lines
    notice = gpu_cells.missing_hardware(needed, gpu_cells.cuda_gpu_count())
    if notice is None:
        return ["\n", *lines[1:]]  # keep line numbers in tracebacks
    return [f"print({notice!r})\n"]


def set_explain(enabled: bool) -> None:
    """Turn the friendly explanation under tracebacks on or off."""
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled must be True or False, got {type(enabled).__name__}")
    _state["explain"] = enabled


def _explain_handler(shell, etype, value, tb, tb_offset=None):
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    try:
        hint = explain(value) if _state["explain"] else None
    except Exception:  # a broken hint must never hide the learner's error or unregister this handler
        hint = None
    if hint:
        print(hint)


def _gpu_magic(line: str, cell: str):
    """Run the cell body only when enough CUDA GPUs exist (`%%gpu` or `%%gpu N`)."""
    from IPython import get_ipython

    source = f"%%gpu {line}".strip() + "\n"
    notice = gpu_cells.missing_hardware(gpu_cells.required_gpus(source), gpu_cells.cuda_gpu_count())
    if notice is not None:
        print(notice)
        return None
    return get_ipython().run_cell(cell)


def _explain_magic(line: str) -> None:
    """`%lessons_explain on|off`: show or hide the explanation under tracebacks."""
    arg = line.strip().lower()
    if arg not in ("on", "off"):
        print("Dùng: %lessons_explain on | off")
        return
    set_explain(arg == "on")


def _apply_plot_style() -> None:
    import matplotlib

    matplotlib.rcParams.update({"figure.figsize": (7.0, 4.0), "axes.grid": True, "grid.alpha": 0.3})


def load_ipython_extension(ipython) -> None:
    """Register the `%%gpu` marker, the error explainer and the plot style, then print the banner."""
    if not _state["loaded"]:
        ipython.input_transformers_cleanup.append(gpu_cell_transform)
        ipython.register_magic_function(_gpu_magic, magic_kind="cell", magic_name="gpu")
        ipython.register_magic_function(_explain_magic, magic_kind="line", magic_name="lessons_explain")
        ipython.set_custom_exc((Exception,), _explain_handler)
        _apply_plot_style()
        _state["loaded"] = True
    print(banner())


def unload_ipython_extension(ipython) -> None:
    """Remove the `%%gpu` transformer and the error explainer."""
    if gpu_cell_transform in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.remove(gpu_cell_transform)
    ipython.set_custom_exc((), None)
    _state["loaded"] = False

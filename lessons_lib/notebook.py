"""The course's IPython extension (``%load_ext lessons_lib.notebook``): `%%gpu`, error hints, plots, banner."""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import re
import sys
import warnings

import torch

from . import gpu_cells
from .device import environment_report
from .errors import explain

_state = {"explain": True, "loaded": False}

# torch.utils.cpp_extension logs this at import on a CUDA build without a usable driver (Colab's and Kaggle's
# CPU runtimes); it only matters when building CUDA extensions, which the course never does.
_CPP_EXTENSION_LOGGER = "torch.utils.cpp_extension"
_CPP_EXTENSION_NOISE = re.compile(r"^No CUDA runtime is found, using CUDA_HOME=")
# pytorch#168066 (torch 2.11 has it) warns on every torch.profiler.profile, though events are cleared only between
# the cycles of a schedule; pytorch#180387 (torch 2.13) warns only then and added the missing spaces. This pattern
# ("cycle." directly followed by "Only") matches only the false alarm; the fixed real warning still shows.
_PROFILER_FALSE_ALARM = r"Warning: Profiler clears events at the end of each cycle\.Only events"
# torch 2.4's own torch.utils.checkpoint still calls the torch.cpu.amp.autocast it deprecated in that release, so
# lesson 07's checkpoint cell warned about code the learner never wrote; matched only when raised from that module.
_CHECKPOINT_OWN_DEPRECATION = r"`torch\.cpu\.amp\.autocast\(args\.\.\.\)` is deprecated"


def _drop_cpp_extension_noise(record: logging.LogRecord) -> bool:
    """Return False (drop) for the cpp_extension line above; let every other record through."""
    try:
        return not _CPP_EXTENSION_NOISE.search(record.getMessage())
    except Exception:  # a malformed record is not ours to judge
        return True


def _quiet_known_noise() -> None:
    """Hide the false alarms above by their exact text, so every other line still shows (idempotent)."""
    logger = logging.getLogger(_CPP_EXTENSION_LOGGER)
    # by name: %reload_ext re-imports this module, so the filter an earlier load added is another function object
    if not any(getattr(f, "__name__", "") == _drop_cpp_extension_noise.__name__ for f in logger.filters):
        logger.addFilter(_drop_cpp_extension_noise)
    if torch.version.cuda and not torch.cuda.is_available() and _CPP_EXTENSION_LOGGER not in sys.modules:
        # torch 2.4 print()s the cpp_extension line, past the logging filter, when the module is first imported
        # (torch.utils.benchmark and torch.compile import it): import it here, where that one print is dropped.
        with contextlib.redirect_stderr(io.StringIO()):
            importlib.import_module(_CPP_EXTENSION_LOGGER)
    warnings.filterwarnings("ignore", message=_PROFILER_FALSE_ALARM, category=UserWarning)
    warnings.filterwarnings("ignore", message=_CHECKPOINT_OWN_DEPRECATION, category=FutureWarning,
                            module=r"torch\.utils\.checkpoint")


def _gpu_cell_transform(lines: list[str]) -> list[str]:
    """Rewrite a `%%gpu` cell: drop the marker when the GPUs are there, else print the skip notice only."""
    needed = gpu_cells.required_gpus(lines[0]) if lines else None
    if needed is None:
        return lines
    notice = gpu_cells.missing_hardware(needed, gpu_cells.cuda_gpu_count())
    if notice is None:
        return ["\n", *lines[1:]]  # keep line numbers in tracebacks
    return [f"print({notice!r})\n"]


def _explain_handler(shell, etype, value, tb, tb_offset=None):
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    try:
        hint = explain(value) if _state["explain"] else None
    except Exception:  # a broken hint must never hide the learner's error or unregister this handler
        hint = None
    if hint:
        print(hint)


def _explain_magic(line: str) -> None:
    """`%lessons_explain on|off`: show or hide the explanation under tracebacks."""
    arg = line.strip().lower()
    if arg not in ("on", "off"):
        print("Dùng: %lessons_explain on | off")
        return
    _state["explain"] = arg == "on"


def _banner() -> str:
    """Return a one-line summary: torch version, platform, chosen device and why."""
    report = environment_report()
    where = report.device
    if report.device == "cuda":
        where = f"cuda ({report.cuda.gpus[0].name}, {len(report.cuda.gpus)} GPU)"
    return f"torch {torch.__version__} · {report.cuda.platform} · thiết bị: {where} — {report.verdict}"


def _figure_alt(fig, include=None, exclude=None):
    """Add a text alternative (title, axis labels, legend, measured numbers) to a figure's PNG as its "alt"."""
    from .plots._axes import describe_figure

    alt = describe_figure(fig)
    return ({}, {"image/png": {"alt": alt}}) if alt else None


def load_ipython_extension(ipython) -> None:
    """Register the `%%gpu` marker, the error explainer, the plot style and alt text, then print the banner."""
    if not _state["loaded"]:
        import matplotlib
        from matplotlib import cycler  # matplotlib's own (validated) cycler: no extra dependency

        from .plots._axes import PALETTE

        ipython.input_transformers_cleanup.append(_gpu_cell_transform)
        ipython.register_magic_function(_explain_magic, magic_kind="line", magic_name="lessons_explain")
        ipython.set_custom_exc((Exception,), _explain_handler)
        matplotlib.rcParams.update({"figure.figsize": (7.0, 4.0), "axes.grid": True, "grid.alpha": 0.3,
                                    "axes.prop_cycle": cycler(color=PALETTE)})
        ipython.display_formatter.mimebundle_formatter.for_type_by_name("matplotlib.figure", "Figure", _figure_alt)
        _state["loaded"] = True
    _quiet_known_noise()  # again on every load: a learner's warnings.resetwarnings() would have removed it
    print(_banner())


def unload_ipython_extension(ipython) -> None:
    """Remove the `%%gpu` transformer and the error explainer."""
    if _gpu_cell_transform in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.remove(_gpu_cell_transform)
    ipython.set_custom_exc((), None)
    _state["loaded"] = False

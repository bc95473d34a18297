"""pytest plugin: nbval reports `%%gpu` cells as skipped when this machine lacks the GPUs they need.

Installed with lessons_lib (entry point ``pytest11``). It also prints, in the session header, the torch build
and the GPUs torch and nvidia-smi see; and a session that collects `%%gpu` cells stops at once when nvidia-smi
lists an NVIDIA GPU that torch cannot use (the run would look green), unless LESSONS_ALLOW_NO_CUDA=1.
"""

from __future__ import annotations

import os

import pytest

from . import __version__, gpu_cells, gpu_check

_TORCH_REPORT = "_lessons_lib_torch_report"  # a config attribute: works with every pytest version


def _cell_source(item) -> str | None:
    cell = getattr(item, "cell", None)
    source = cell.get("source") if isinstance(cell, dict) else getattr(cell, "source", None)
    return source if isinstance(source, str) else None


def _torch_report(config) -> gpu_check.TorchReport:
    """Return what torch says about CUDA, asked once per session (torch warns only the first time it is asked)."""
    if getattr(config, _TORCH_REPORT, None) is None:
        setattr(config, _TORCH_REPORT, gpu_check.read_torch())
    return getattr(config, _TORCH_REPORT)


def pytest_report_header(config) -> list[str]:
    """Name the torch build and the GPUs torch and nvidia-smi see."""
    return gpu_check.header_lines(gpu_check.read_nvidia_smi(), _torch_report(config), __version__)


def _stop_if_gpus_are_unusable(config) -> None:
    """Raise pytest.UsageError when nvidia-smi lists a GPU that torch cannot use (see LESSONS_ALLOW_NO_CUDA)."""
    if os.environ.get(gpu_check.ALLOW_NO_CUDA_ENV) == "1":
        return
    smi = gpu_check.read_nvidia_smi()
    problem = gpu_check.torch_cannot_use_gpus(smi, _torch_report(config)) if smi.gpus else None
    if problem is not None:
        raise pytest.UsageError(f"{problem}\n(Chạy tiếp dù vậy, các ô %%gpu bị bỏ qua: {gpu_check.ALLOW_NO_CUDA_ENV}=1)")


def pytest_collection_modifyitems(config, items) -> None:
    """Mark nbval cell items that need more CUDA GPUs than this machine has as skipped."""
    available = None
    for item in items:
        source = _cell_source(item)
        needed = gpu_cells.required_gpus(source) if source is not None else None
        if needed is None:
            continue
        if available is None:
            _torch_report(config)  # first, so that torch's warning (if any) is caught
            available = gpu_cells.cuda_gpu_count()
            if available == 0:
                _stop_if_gpus_are_unusable(config)
        reason = gpu_cells.missing_hardware(needed, available)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))

"""pytest plugin: nbval reports `%%gpu` cells as skipped when this machine lacks the GPUs they need.

Installed with lessons_lib (entry point ``pytest11``), so it works from any checkout.
"""

from __future__ import annotations

import pytest

from . import gpu_cells


def _cell_source(item) -> str | None:
    cell = getattr(item, "cell", None)
    source = getattr(cell, "source", None) if cell is not None else None
    if source is None and isinstance(cell, dict):
        source = cell.get("source")
    return source if isinstance(source, str) else None


def pytest_collection_modifyitems(config, items) -> None:
    """Mark nbval cell items that need more CUDA GPUs than this machine has as skipped."""
    available = None
    for item in items:
        source = _cell_source(item)
        if source is None or gpu_cells.required_gpus(source) is None:
            continue
        if available is None:
            available = gpu_cells.cuda_gpu_count()
        reason = gpu_cells.skip_reason(source, available)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=reason))

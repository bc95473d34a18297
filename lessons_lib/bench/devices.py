"""Resolve the device, count usable CPU threads and synchronize an accelerator."""

from __future__ import annotations

import os

import torch

_ACCELERATORS = ("cuda", "mps", "xpu")


def cpu_threads() -> int:
    """Return how many CPUs this process may run on: the "all threads" count used by default here."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS, Windows
        return os.cpu_count() or 1


def resolve_device(device: str | torch.device | None) -> torch.device:
    """Return `device` as a torch.device after checking that this machine has it (None: the best one here).

    Raises:
        TypeError: `device` is not a str, torch.device or None.
        ValueError: `device` is misspelt or this machine does not have it.
    """
    from ..device import pick_device

    return pick_device(device)


def synchronize(device: str | torch.device) -> None:
    """Wait until every queued operation on `device` has finished (nothing to wait for on the CPU)."""
    dev = torch.device(device) if not isinstance(device, torch.device) else device
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    elif dev.type == "mps":
        mps = getattr(torch, "mps", None)
        if mps is not None and hasattr(mps, "synchronize"):
            mps.synchronize()
    elif dev.type == "xpu":
        xpu = getattr(torch, "xpu", None)
        if xpu is not None and hasattr(xpu, "synchronize"):
            xpu.synchronize(dev)

"""Count tensor bytes by storage, so tensors that share memory are counted once."""

from __future__ import annotations

from collections.abc import Iterable

import torch


def _storage_key_and_bytes(t: torch.Tensor) -> tuple[object, int]:
    """Return a key that is equal for tensors sharing memory, and the bytes that memory holds."""
    try:
        storage = t.untyped_storage()
        return ("storage", storage._cdata), int(storage.nbytes())
    except (RuntimeError, NotImplementedError, AttributeError):  # sparse, nested or exotic tensors
        return ("tensor", id(t)), int(t.numel() * t.element_size())


def _unique_bytes(tensors: Iterable[torch.Tensor]) -> int:
    seen: dict[object, int] = {}
    for t in tensors:
        key, nbytes = _storage_key_and_bytes(t)
        seen[key] = nbytes
    return sum(seen.values())

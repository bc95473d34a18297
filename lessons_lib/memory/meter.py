"""Count the activation bytes autograd saves for backward, with `SavedTensorMeter`."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

import torch

from ..i18n import tr
from ._bytes import format_bytes
from ._storage import _storage_key_and_bytes


def _exclusion_keys(exclude) -> set:
    if exclude is None:
        return set()
    if isinstance(exclude, torch.nn.Module):
        tensors = [*exclude.parameters(), *exclude.buffers()]
    elif isinstance(exclude, torch.Tensor):
        tensors = [exclude]
    else:
        try:
            tensors = list(exclude)
        except TypeError:
            tensors = None
        if tensors is None or not all(isinstance(t, torch.Tensor) for t in tensors):
            raise TypeError(
                tr(
                    "exclude phải là một nn.Module (loại trừ tham số và buffer của nó), một tensor hoặc "
                    f"một danh sách tensor, không phải {type(exclude).__name__}",
                    "exclude must be an nn.Module (its parameters and buffers are left out), a tensor or "
                    f"a list of tensors, not {type(exclude).__name__}",
                )
            )
    return {_storage_key_and_bytes(t)[0] for t in tensors}


# --------------------------------------------------------------------------- saved-activation meter


class _Packed:
    """What the meter stores in the autograd graph instead of a saved tensor."""

    __slots__ = ("tensor", "version", "__weakref__")

    def __init__(self, tensor: torch.Tensor, version: int):
        self.tensor = tensor
        self.version = version


class SavedTensorMeter:
    """Count the bytes autograd saves for backward (the activations) while the block runs.

    Example::

        with SavedTensorMeter(exclude=model) as meter:
            loss = loss_fn(model(x), y)
        print(format_bytes(meter.live_bytes))   # held by the graph of `loss` right now
        loss.backward()                         # frees the graph: meter.live_bytes drops to 0

    Tensors that share memory (views, an output saved by two ops) are counted once, by their storage.
    Built on ``torch.autograd.graph.saved_tensors_hooks``; works on every device, ``meta`` included.
    Ops run inside a ``torch.utils.checkpoint`` region are not seen (checkpointing installs its own
    hooks there), which is exactly the memory checkpointing saves.

    Args:
        exclude: A module (its parameters and buffers) or tensors whose memory is not counted; pass the
            model so weights saved by matmuls are not mistaken for activations.

    Attributes:
        live_bytes: Bytes still held by graphs recorded in the block (drops when graphs are freed).
        peak_bytes: Largest ``live_bytes`` seen.
        total_bytes: Bytes that became held during the block, summed (a storage freed and saved again
            counts again).
        saved_count: How many tensors were saved (before de-duplication).
        excluded_count: How many of them were excluded.
        timeline: ``live_bytes`` after every change (a storage newly held or let go), starting at 0: a
            small CPU-visible cousin of PyTorch's memory timeline, for activations only (at most
            `TIMELINE_LIMIT` points; later changes still update the counters).
    """

    TIMELINE_LIMIT = 100_000

    def __init__(self, exclude=None):
        self._excluded = _exclusion_keys(exclude)
        self._held: dict[object, list[int]] = {}
        self._lock = threading.Lock()
        self._hooks = None
        self.live_bytes = 0
        self.peak_bytes = 0
        self.total_bytes = 0
        self.saved_count = 0
        self.excluded_count = 0
        self.timeline: list[int] = [0]

    def _record(self) -> None:
        if len(self.timeline) < self.TIMELINE_LIMIT:
            self.timeline.append(self.live_bytes)

    # -- hooks
    def _pack(self, tensor: torch.Tensor):
        self.saved_count += 1
        key, nbytes = _storage_key_and_bytes(tensor)
        packed = _Packed(tensor.detach(), tensor._version)
        if key in self._excluded:
            self.excluded_count += 1
            return packed
        with self._lock:
            entry = self._held.get(key)
            if entry is None:
                self._held[key] = [1, nbytes]
                self.live_bytes += nbytes
                self.total_bytes += nbytes
                self.peak_bytes = max(self.peak_bytes, self.live_bytes)
                self._record()
            else:
                entry[0] += 1
        weakref.finalize(packed, self._release, key)
        return packed

    def _release(self, key) -> None:
        with self._lock:
            entry = self._held.get(key)
            if entry is None:
                return
            entry[0] -= 1
            if entry[0] == 0:
                del self._held[key]
                self.live_bytes -= entry[1]
                self._record()

    @staticmethod
    def _unpack(packed: _Packed) -> torch.Tensor:
        # saved_tensors_hooks bypass autograd's in-place check; redo it (detach shares the version counter)
        if packed.tensor._version != packed.version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace "
                f"operation: it is at version {packed.tensor._version}; expected version {packed.version} "
                "instead (checked by SavedTensorMeter)."
            )
        return packed.tensor

    # -- context manager
    def __enter__(self) -> SavedTensorMeter:
        if self._hooks is not None:
            raise RuntimeError(tr("Meter này đang được dùng; tạo một SavedTensorMeter mới.",
                                  "This meter is already in use; create a new SavedTensorMeter."))
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        hooks, self._hooks = self._hooks, None
        hooks.__exit__(exc_type, exc, tb)
        return False

    def __repr__(self) -> str:
        return (f"SavedTensorMeter(live={format_bytes(self.live_bytes)}, peak={format_bytes(self.peak_bytes)}, "
                f"total={format_bytes(self.total_bytes)}, saved={self.saved_count}, "
                f"excluded={self.excluded_count})")


def saved_activation_bytes(fn: Callable[[], object], exclude=None) -> int:
    """Run ``fn()`` under a `SavedTensorMeter` and return the bytes its graph holds when it returns.

    The count is taken while the result is still alive, then the result is dropped (freeing its graph).
    Example: ``saved_activation_bytes(lambda: loss_fn(model(x), y), exclude=model)``.
    """
    if not callable(fn):
        raise TypeError(tr(f"fn phải là hàm không tham số (vd lambda: model(x)), không phải {type(fn).__name__}",
                           f"fn must be a zero-argument callable (e.g. lambda: model(x)), not {type(fn).__name__}"))
    with SavedTensorMeter(exclude=exclude) as meter:
        result = fn()
        held = meter.live_bytes
    del result
    return held

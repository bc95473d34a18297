"""Count the activation bytes autograd saves for backward (`SavedTensorMeter`), and compare gradients."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Mapping

import torch

from ..display import Printable
from .sizes import check_module, format_bytes, storage_key_and_bytes


def _exclusion_keys(exclude) -> set:
    if exclude is None:
        return set()
    if isinstance(exclude, torch.nn.Module):
        tensors = [*exclude.parameters(), *exclude.buffers()]
    elif isinstance(exclude, torch.Tensor):
        tensors = [exclude]
    else:
        tensors = list(exclude) if isinstance(exclude, Iterable) else [None]
        if not all(isinstance(t, torch.Tensor) for t in tensors):
            raise TypeError("exclude phải là một nn.Module (loại trừ tham số và buffer của nó), một tensor hoặc "
                            f"một danh sách tensor, không phải {type(exclude).__name__}")
    return {storage_key_and_bytes(t)[0] for t in tensors}


class _Packed:
    """What the meter stores in the autograd graph instead of a saved tensor."""

    __slots__ = ("tensor", "version", "__weakref__")

    def __init__(self, tensor: torch.Tensor, version: int):
        self.tensor = tensor
        self.version = version


class SavedTensorMeter(Printable):
    """Count the bytes autograd saves for backward (the activations) while the ``with`` block runs."""

    TIMELINE_LIMIT = 100_000

    def __init__(self, exclude=None):
        self._excluded = _exclusion_keys(exclude)
        self._held: dict[object, list[int]] = {}
        self._lock = threading.Lock()
        self._hooks = None
        self.live_bytes = self.peak_bytes = 0
        self.timeline: list[int] = [0]

    def __str__(self) -> str:
        return (f"SavedTensorMeter(live={format_bytes(self.live_bytes)}, "
                f"peak={format_bytes(self.peak_bytes)})")

    def _record(self) -> None:
        if len(self.timeline) < self.TIMELINE_LIMIT:
            self.timeline.append(self.live_bytes)

    def _pack(self, tensor: torch.Tensor):
        key, nbytes = storage_key_and_bytes(tensor)
        packed = _Packed(tensor.detach(), tensor._version)
        if key in self._excluded:
            return packed
        with self._lock:
            entry = self._held.get(key)
            if entry is None:
                self._held[key] = [1, nbytes]
                self.live_bytes += nbytes
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

    def __enter__(self) -> SavedTensorMeter:
        if self._hooks is not None:
            raise RuntimeError("Meter này đang được dùng; tạo một SavedTensorMeter mới.")
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        hooks, self._hooks = self._hooks, None
        hooks.__exit__(exc_type, exc, tb)
        return False


def saved_activation_bytes(fn: Callable[[], object], exclude=None) -> int:
    """Run ``fn()`` under a `SavedTensorMeter` and return the bytes its graph holds when it returns."""
    if not callable(fn):
        raise TypeError(f"fn phải là hàm không tham số (vd lambda: model(x)), không phải {type(fn).__name__}")
    with SavedTensorMeter(exclude=exclude) as meter:
        result = fn()
        held = meter.live_bytes
    del result
    return held


def gradient_snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Return a copy of every parameter's ``.grad`` by name (parameters without a gradient are left out)."""
    check_module(model)
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


def compare_gradients(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> str:
    """Return whether two `gradient_snapshot` results match (``torch.allclose``) and their largest difference."""
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, Mapping) or not all(isinstance(t, torch.Tensor) for t in value.values()):
            raise TypeError(f"{name} phải là dict tên → tensor (từ gradient_snapshot), không phải "
                            f"{type(value).__name__}")
    if set(a) != set(b):
        raise ValueError(f"Hai snapshot có tên tham số khác nhau: {sorted(set(a) ^ set(b))}")
    match, worst = True, 0.0
    for name in a:
        x, y = a[name], b[name]
        if x.shape != y.shape:
            raise ValueError(f"Gradient {name!r} khác shape: {tuple(x.shape)} và {tuple(y.shape)}")
        y = y.to(x.device)
        match &= bool(torch.allclose(x, y, rtol=1e-5, atol=1e-6))
        if x.numel():
            worst = max(worst, float((x - y).abs().max()))
    verdict = "khớp" if match else "KHÔNG khớp"
    return f"{len(a)} gradient {verdict} (sai khác tuyệt đối lớn nhất {worst:.2e})"

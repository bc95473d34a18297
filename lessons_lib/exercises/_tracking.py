"""Spies on the learner's code: `MoveTracker` records moves and tensor uses, so device bugs show on a CPU too;
`scaler_calls` records the GradScaler calls, in order.

A move that returns its input (``x.to("cpu")`` on a CPU) returns an alias instead, so an unused result shows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from unittest import mock

import torch
from torch.overrides import TorchFunctionMode

_MOVES = ("to", "cuda", "cpu")


@dataclass(eq=False)
class Move:
    """One ``.to()`` / ``.cuda()`` / ``.cpu()`` call (number `index`): the tensor moved, the result, where it went."""

    index: int
    source: torch.Tensor
    result: torch.Tensor
    target: torch.device


def _tensors(obj) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    return [t for item in items for t in _tensors(item)]


class MoveTracker(TorchFunctionMode):
    """Record moves and tensor uses while active (``with MoveTracker() as t: ...``)."""

    def __init__(self) -> None:
        super().__init__()
        self.moves: list[Move] = []
        self.calls = 0
        self._last_use: dict[int, int] = {}
        self._keep: list[torch.Tensor] = []  # keeps ids unique while we look at them

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        index, name = self.calls, getattr(func, "__name__", "")
        self.calls += 1
        for t in _tensors(args) + _tensors(kwargs):
            self._last_use[id(t)] = index
        out = func(*args, **kwargs)
        if name in _MOVES and args and isinstance(args[0], torch.Tensor) and isinstance(out, torch.Tensor):
            source = args[0]
            if out is source and not source.requires_grad:
                try:
                    out = out.view_as(out)  # a new tensor object on the same memory: "unused" becomes visible
                except RuntimeError:
                    pass
            self.moves.append(Move(index, source, out, out.device))
            self._keep += [source, out]
        return out

    def used_after(self, tensor: torch.Tensor, index: int) -> bool:
        """Return True when `tensor` was an input of some call after call number `index`."""
        return self._last_use.get(id(tensor), -1) > index

    def mark_used(self, obj) -> None:
        """Count the tensors inside `obj` (e.g. the returned value) as used."""
        for t in _tensors(obj):
            self._last_use[id(t)] = self.calls


@dataclass(eq=False)
class ScalerCall:
    """One GradScaler call: its `name`, whether on the scaler watched (`own`), `measure()` before and after it."""

    name: str
    own: bool
    before: object = None
    after: object = None


@contextlib.contextmanager
def scaler_calls(scaler: torch.amp.GradScaler, measure: Callable[[], object] = lambda: None
                 ) -> Iterator[list[ScalerCall]]:
    """Yield the list of ``scale``/``unscale_``/``step``/``update`` calls on any GradScaler while active, in order.

    A call from inside another (``step`` unscales by itself) is not listed. The class is patched, so a scaler the
    learner makes shows too (``own`` False).
    """
    calls: list[ScalerCall] = []
    depth = [0]
    originals = {name: getattr(torch.amp.GradScaler, name) for name in ("scale", "unscale_", "step", "update")}

    def spy(name: str):
        def record(self, *args, **kwargs):
            if depth[0]:
                return originals[name](self, *args, **kwargs)
            calls.append(call := ScalerCall(name, self is scaler, measure()))
            depth[0] += 1
            try:
                return originals[name](self, *args, **kwargs)
            finally:
                depth[0] -= 1
                call.after = measure()  # e.g. the gradient norm, which unscale_ divides by S
        return record

    with mock.patch.multiple(torch.amp.GradScaler, **{name: spy(name) for name in originals}):
        yield calls

"""Count the floating-point operations of real PyTorch code (on the `meta` device: no compute, no memory)."""

from __future__ import annotations

from collections.abc import Callable

import torch


def count_flops(fn: Callable[..., object], *args, backward: bool = False, **kwargs) -> int:
    """Return the FLOPs PyTorch's FlopCounterMode counts for ``fn(*args, **kwargs)``.

    Args:
        fn: A module or function to run.
        *args: Its inputs; use ``device="meta"`` tensors to count without computing.
        backward: Also run ``.sum().backward()`` on the output and count the backward pass.
        **kwargs: Keyword inputs of `fn`.

    Returns:
        The total count (a multiply-add counts as 2 FLOPs).
    """
    if not callable(fn):
        raise TypeError(f"fn must be a module or function to run, got {type(fn).__name__}")
    if not isinstance(backward, bool):
        raise TypeError(f"backward must be True or False, got {type(backward).__name__}")
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        out = fn(*args, **kwargs)
        if backward:
            if not isinstance(out, torch.Tensor) or not out.requires_grad:
                raise ValueError("backward=True needs fn to return a tensor that requires grad")
            out.sum().backward()
    return int(counter.get_total_flops())


def matmul_flops(n: int, m: int | None = None, k: int | None = None) -> int:
    """Return the FLOPs of an (n×k) @ (k×m) matmul: 2·n·m·k (square n×n when m and k are omitted)."""
    m = n if m is None else m
    k = n if k is None else k
    for name, value in (("n", n), ("m", m), ("k", k)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{name} must be a positive int (a matrix size), got {type(value).__name__}")
        if value <= 0:
            raise ValueError(f"{name} must be a positive int (a matrix size), got {value}")
    return 2 * n * m * k

"""Count the floating-point operations of a matmul."""

from __future__ import annotations

from ._validate import check_int


def matmul_flops(n: int, m: int | None = None, k: int | None = None) -> int:
    """Return the FLOPs of an (n×k) @ (k×m) matmul: 2·n·m·k (square n×n when m and k are omitted)."""
    m = n if m is None else m
    k = n if k is None else k
    for name, value in (("n", n), ("m", m), ("k", k)):
        check_int(name, value, 1)
    return 2 * n * m * k

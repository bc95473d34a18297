"""Count the floating-point operations of a matmul."""

from __future__ import annotations

from ._validate import check_int


def matmul_flops(n: int) -> int:
    """Return the FLOPs of an N×N @ N×N matmul: 2·N³ (N³ multiply-adds)."""
    check_int("n", n, 1)
    return 2 * n**3

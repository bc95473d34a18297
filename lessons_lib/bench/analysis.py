"""Compare two sweeps: speedup per N, the crossover size, and an N³ time estimate."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..i18n import tr
from ._checks import _check_positive_int
from .sweep import SweepResult


def _check_sweep(name: str, sweep) -> None:
    if not isinstance(sweep, SweepResult):
        raise TypeError(
            tr(f"{name} phải là kết quả của bench.matmul_sweep(...), không phải {type(sweep).__name__}",
               f"{name} must be the result of bench.matmul_sweep(...), not {type(sweep).__name__}")
        )


def speedup(baseline: SweepResult, other: SweepResult) -> list[tuple[int, float]]:
    """Return (N, baseline time / other time) for every N both sweeps measured (>1: `other` is faster)."""
    _check_sweep("baseline", baseline)
    _check_sweep("other", other)
    out = []
    for record in other.records:
        base = baseline.time_at(record.n)
        if base is not None:
            out.append((record.n, base / record.seconds))
    return out


@dataclass(frozen=True)
class Crossover:
    """Where `other` becomes faster than `baseline` (and stays faster for every larger N measured).

    ``status`` is "crosses" (``n`` is the interpolated crossover size), "always_faster",
    "never_faster" or "no_overlap" (no common sizes); ``n`` is None unless status is "crosses".
    """

    status: str
    n: float | None
    message: str


def crossover(baseline: SweepResult, other: SweepResult) -> Crossover:
    """Return the size N from which `other` beats `baseline` for every larger measured N.

    Between the last size where `other` is slower and the next one, N is interpolated on log-log axes
    where the speedup equals 1.
    """
    points = speedup(baseline, other)
    if not points:
        return Crossover("no_overlap", None, tr("Hai lần quét không có kích thước N chung.",
                                                "The two sweeps have no size N in common."))
    first_good = len(points)
    while first_good > 0 and points[first_good - 1][1] >= 1.0:
        first_good -= 1
    if first_good == 0:
        return Crossover("always_faster", None, tr(
            f"{other.label} nhanh hơn {baseline.label} ở mọi N đã đo (từ N={points[0][0]}).",
            f"{other.label} is faster than {baseline.label} at every measured N (from N={points[0][0]})."))
    if first_good == len(points):
        return Crossover("never_faster", None, tr(
            f"{other.label} chưa nhanh hơn {baseline.label} ở N lớn nhất đo chung (N={points[-1][0]}).",
            f"{other.label} is not faster than {baseline.label} at the largest common N (N={points[-1][0]})."))
    (n0, s0), (n1, s1) = points[first_good - 1], points[first_good]
    if s1 == s0:
        n_star = float(n1)
    else:
        frac = (0.0 - math.log(s0)) / (math.log(s1) - math.log(s0))
        n_star = math.exp(math.log(n0) + frac * (math.log(n1) - math.log(n0)))
    return Crossover("crosses", n_star, tr(
        f"{other.label} nhanh hơn {baseline.label} từ khoảng N≈{n_star:.0f} trở lên (đo được: chậm hơn ở N={n0}, "
        f"nhanh hơn ở N={n1}).",
        f"{other.label} beats {baseline.label} from about N≈{n_star:.0f} (measured: slower at N={n0}, "
        f"faster at N={n1})."))


def estimate_seconds(sweep: SweepResult, n: int) -> float:
    """Return the time of one N×N matmul: measured if the sweep has N, else scaled as N³ from the largest size.

    This is an *estimate* outside the measured sizes; say so wherever it is shown.
    """
    _check_sweep("sweep", sweep)
    _check_positive_int("n", n)
    if not sweep.records:
        raise ValueError(tr("Lần quét này chưa đo kích thước nào.", "This sweep measured no size."))
    measured = sweep.time_at(n)
    if measured is not None:
        return measured
    base = sweep.records[-1] if n > sweep.records[-1].n else min(sweep.records, key=lambda r: abs(r.n - n))
    return base.seconds * (n / base.n) ** 3

"""Compare lessons_lib.bench.measure with torch.utils.benchmark.Timer on CPU matmuls (same thread count).

For N in 256, 512, 1024, 2048 both time ``a @ b`` on N×N float32 matrices with the same number of
threads. To cancel drift on a shared machine, the two methods alternate over several rounds and each
reports the median of its round medians. One line per size, then ``timing ratio: min X max Y``
(lessons_lib / Timer). Goal: every ratio within 0.9-1.1 (the helper adds no overhead and no bias).
Each line also shows how much each method disagrees with itself from round to round, and the load
average: on a busy machine that noise, not a bias, is what moves the ratio.

Usage:
    python benchmarks/timing_accuracy.py [--rounds 5] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch
from torch.utils import benchmark

from lessons_lib import bench

SIZES = (256, 512, 1024, 2048)


def compare(n: int, threads: int, rounds: int) -> tuple[list[float], list[float]]:
    """Return the round medians (seconds) of lessons_lib and of Timer for an N×N fp32 matmul on the CPU."""
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
    assert bench.matmul_error(a, b, a @ b) <= 2e-3  # correct before timing (fp32, TF32 allowed)
    timer = benchmark.Timer("a @ b", globals={"a": a, "b": b}, num_threads=threads)
    ours, theirs = [], []
    for i in range(rounds):
        order = (0, 1) if i % 2 == 0 else (1, 0)  # alternate who goes first
        for who in order:
            if who == 0:
                ours.append(bench.measure(lambda: a @ b, device="cpu", threads=threads, repeats=5).median_s)
            else:
                theirs.append(timer.blocked_autorange(min_run_time=0.5).median)
    return ours, theirs


def spread(values: list[float]) -> float:
    """Return (max - min) / median: how much one method disagrees with itself across rounds."""
    return (max(values) - min(values)) / statistics.median(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per size (default 5)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: all, bench.cpu_threads())")
    args = parser.parse_args(argv)
    threads = args.threads or bench.cpu_threads()
    ratios = []
    for n in SIZES:
        our_rounds, their_rounds = compare(n, threads, args.rounds)
        ours, theirs = statistics.median(our_rounds), statistics.median(their_rounds)
        ratio = ours / theirs
        ratios.append(ratio)
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"N={n:<5} threads={threads}  lessons_lib {bench.format_seconds(ours):>9}  "
              f"Timer {bench.format_seconds(theirs):>9}  ratio {ratio:.3f}  (round-to-round spread: lessons_lib "
              f"{spread(our_rounds):.0%}, Timer {spread(their_rounds):.0%}; load avg {load:.1f}; "
              f"torch {torch.__version__})", flush=True)
    print(f"timing ratio: min {min(ratios):.3f} max {max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

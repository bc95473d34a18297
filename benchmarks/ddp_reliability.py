"""Run the DDP demo N times in a row and report how many runs passed, and how long they took.

A run passes when torchrun exits cleanly, every rank's log ends with "done" (no abort at exit),
the all-reduced gradients are bit-identical across ranks and allclose to the single-process
full-batch gradient, and no process of the run is left behind.

Usage:
    python benchmarks/ddp_reliability.py                # 20 runs, world size 2, gloo on CPU
    python benchmarks/ddp_reliability.py -n 50 --nproc 2 --timeout 120
    python benchmarks/ddp_reliability.py --unsafe-teardown   # the hazard: no barrier/destroy_process_group
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lessons_lib.ddp import DDPRunError, find_processes, run_ddp_demo


def one_run(nproc: int, backend: str, timeout: float, unsafe: bool) -> tuple[bool, str]:
    """Run the demo once in a fresh temp folder; return (passed, one-line reason)."""
    with tempfile.TemporaryDirectory(prefix="ddp_bench_") as tmp:
        try:
            run = run_ddp_demo(nproc_per_node=nproc, steps=3, backend=backend, timeout=timeout, out_dir=tmp,
                               unsafe_teardown=unsafe)
        except DDPRunError as exc:
            return False, str(exc).splitlines()[0][:160]
        finally:
            leftovers = find_processes(tmp)
        if leftovers:
            return False, f"leftover processes {leftovers}"
        logs = [(Path(tmp) / f"rank{r}.log").read_text() for r in range(nproc)]
        if any("terminate called" in log or not log.rstrip().endswith("done") for log in logs):
            return False, "a rank's log does not end cleanly"
        c = run.comparison
        if not c.ok:
            return False, f"comparison failed: {c}"
        return True, f"grad diff vs 1 process {c.grad_diff_vs_single:.1e}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=20, help="runs in a row (default 20)")
    parser.add_argument("--nproc", type=int, default=2, help="ranks per run (default 2)")
    parser.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"))
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run before it counts as hung")
    parser.add_argument("--unsafe-teardown", action="store_true", help="skip barrier + destroy_process_group")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")

    times, failures = [], []
    for i in range(1, args.runs + 1):
        start = time.perf_counter()
        passed, reason = one_run(args.nproc, args.backend, args.timeout, args.unsafe_teardown)
        elapsed = time.perf_counter() - start
        times.append(elapsed)
        if not passed:
            failures.append((i, reason))
        print(f"run {i:3d}/{args.runs}: {'PASS' if passed else 'FAIL'}  {elapsed:6.1f} s  {reason}", flush=True)
    passes = args.runs - len(failures)
    print(f"\n{passes} of {args.runs} runs passed (world size {args.nproc}, backend {args.backend}, "
          f"teardown {'UNSAFE' if args.unsafe_teardown else 'barrier + destroy_process_group'}); "
          f"time per run: median {statistics.median(times):.1f} s, min {min(times):.1f} s, max {max(times):.1f} s, "
          f"total {sum(times):.0f} s")
    for i, reason in failures:
        print(f"  run {i} failed: {reason}")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())

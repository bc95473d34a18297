"""Run the grade command from a test with a time limit that a busy machine does not break.

A class's grading is mostly CPU work on two cores; on a machine whose other work keeps the load average at 10 it
takes several times as long by the clock. The limit is therefore counted in the time of an idle machine: each
second by the clock counts as ``1 / slowness``, where slowness is the 1-minute load average per core (at least 1),
measured every few seconds while the command runs.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass

import pytest


@dataclass
class Graded:
    """What one run of the grade command printed, its seconds by the clock and of an idle machine, and the (wall,
    CPU) seconds its last line reports (None without that line)."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    idle_s: float
    reported: tuple[int, int] | None


def slowness() -> float:
    """Return how many times slower than idle this machine runs one more busy process now (≥ 1)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1.0, os.getloadavg()[0] / cores) if hasattr(os, "getloadavg") else 1.0


def run_grader(args: list[str], env: dict, cwd, limit_s: float = 600.0) -> Graded:
    """Run the grade command; fail the test (after a Ctrl+C to it) past `limit_s` seconds of an idle machine."""
    started = last = time.monotonic()
    idle = 0.0
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    while True:
        try:
            out, err = proc.communicate(timeout=5)
            break
        except subprocess.TimeoutExpired:
            now = time.monotonic()
            idle += (now - last) / slowness()
            last = now
            if idle > limit_s:
                proc.send_signal(signal.SIGINT)  # the grader stops every running notebook on Ctrl+C
                try:
                    out, err = proc.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, err = proc.communicate()
                pytest.fail(f"grading ran past {limit_s:.0f} s of an idle machine ({now - started:.0f} s by the "
                            f"clock, load {os.getloadavg()[0]:.1f})\n{out}\n{err}")
    now = time.monotonic()
    idle += (now - last) / slowness()
    found = re.search(r"(\d+) s thời gian thực, (\d+) s CPU", out.strip().splitlines()[-1] if out.strip() else "")
    return Graded(proc.returncode, out, err, now - started, idle, (int(found[1]), int(found[2])) if found else None)

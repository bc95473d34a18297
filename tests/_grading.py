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

_LAST_LINE = re.compile(r"(\d+) s thời gian thực, (\d+) s CPU")


@dataclass
class Graded:
    """What one run of the grade command printed, and how long it took."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float  # by the clock
    idle_s: float  # in the time of an idle machine (what the limit counts)
    reported: tuple[int, int] | None  # (wall, CPU) seconds from the command's last line


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def slowness() -> float:
    """Return how many times slower than idle this machine runs one more busy process now (≥ 1)."""
    return max(1.0, os.getloadavg()[0] / cores()) if hasattr(os, "getloadavg") else 1.0


def run_grader(args: list[str], env: dict, cwd, limit_s: float = 600.0, poll_s: float = 5.0) -> Graded:
    """Run the grade command; fail the test when it runs past `limit_s` seconds of an idle machine.

    Args:
        args: The command line.
        env: Its environment.
        cwd: Its working folder.
        limit_s: The limit, in seconds of an idle machine.
        poll_s: How often the load is measured.
    """
    started = last = time.monotonic()
    idle = 0.0
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    while True:
        try:
            out, err = proc.communicate(timeout=poll_s)
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
    found = _LAST_LINE.findall(out.strip().splitlines()[-1]) if out.strip() else []
    reported = (int(found[0][0]), int(found[0][1])) if found else None
    return Graded(proc.returncode, out, err, now - started, idle, reported)

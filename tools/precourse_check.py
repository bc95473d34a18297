"""The instructor's pre-course check (`bash tools/course.sh check [NOTEBOOK ...]`): tools/run.py over the course.

Every learner and solutions notebook runs twice in one kernel, its outputs checked, its `%%gpu` cells counted
(one that the machine's GPUs allow but that was skipped fails), one table row per notebook and a verdict
(tools/run.py). It runs as many notebooks at a time as the test command runs processes (see check_jobs), so both
run under the same conditions (part of the cache key): right after `course.sh test` its copies come from the cache.
"""

from __future__ import annotations

import os
import sys

from tools import run
from tools.course import test_workers


def check_jobs(environ=os.environ) -> int:
    """Return how many notebooks run at once: as many as the test command runs processes (a notebook waits on
    kernels starting, torchrun, DataLoader workers; run.share_cpus gives each its share of the CPUs).

    The check only asks whether every cell runs; the timings the notebooks print are noisier meanwhile
    (run.run_conditions keeps those copies from the site). COURSE_TEST_WORKERS overrides.
    """
    workers = test_workers([], environ)
    return int(workers[1]) if workers else 1


def main(argv: list[str] | None = None) -> int:
    return run.main(["--jobs", str(check_jobs()), *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())

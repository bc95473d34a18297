"""Run notebook 08's DDP run N times in a row and report every run's outcome, the aborts, and the time taken.

A run PASSES when torchrun exits cleanly, every rank reported its results, the all-reduced gradients are
bit-identical across ranks and allclose to a single-process full-batch computation, and no process of the
run is left behind. Any other outcome is reported per run: ABORT (a rank died of SIGABRT, e.g. "terminate
called without an active exception" at interpreter shutdown, see ``exit_rank``), HANG (stopped at the time
limit), FAIL (anything else).

Workers (--worker):
    notebook  the scripts notebook 08 writes with %%writefile (read from course_src/08_multi_gpu_preview.md),
              run with launch("torchrun --standalone --nproc_per_node=2 train_ddp.py"), as in the notebook
    race      a shutdown-only stress: each rank starts 200 all-reduces of fresh tensors and exits while they
              may still be in flight, so gloo's threads release tensors during interpreter shutdown;
              --exit python shows the abort, --exit os (the fix) must not

Usage:
    python benchmarks/ddp_reliability.py --runs 50 --load          # the notebook's run, both cores kept busy
    python benchmarks/ddp_reliability.py --runs 50 --load --python /path/to/colab-env/bin/python
    python benchmarks/ddp_reliability.py --worker race --exit python --runs 20
"""

from __future__ import annotations

import argparse
import os
import re
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from lessons_lib.ddp import DDPRunError, find_processes, launch

ROOT = Path(__file__).resolve().parent.parent

NOTEBOOK_SRC = ROOT / "course_src" / "08_multi_gpu_preview.md"
_WRITEFILE = re.compile(r'```python\n%%writefile "\{work\}/([\w.]+)"\n(.*?)```', re.S)
OUTCOMES = ("PASS", "ABORT", "HANG", "FAIL")
RACE_SCRIPT = '''\
import sys
import torch
import torch.distributed as dist
from lessons_lib.ddp_worker import exit_rank

dist.init_process_group("gloo")
for _ in range(200):
    dist.all_reduce(torch.ones(1000), async_op=True)   # never waited: gloo's threads hold these tensors
print("done", flush=True)
if sys.argv[1] == "os":
    exit_rank()                                        # the fix: no interpreter shutdown
'''


def write_notebook_scripts(folder: Path) -> list[str]:
    """Write the files notebook 08 writes with %%writefile into `folder`; return their names."""
    names = []
    for name, body in _WRITEFILE.findall(NOTEBOOK_SRC.read_text(encoding="utf-8")):
        (folder / name).write_text(body, encoding="utf-8")
        names.append(name)
    if "train_ddp.py" not in names:
        raise SystemExit(f"{NOTEBOOK_SRC} has no %%writefile cell for train_ddp.py")
    return names


def classify(error: DDPRunError | None, text: str) -> str:
    """Return the outcome of a failed run from its error and the ranks' logs."""
    if error is not None and error.kind == "timeout":
        return "HANG"
    if "terminate called" in text or "exit code -6" in text or "Fatal Python error: Aborted" in text:
        return "ABORT"
    return "FAIL"


def run_notebook(folder: Path, timeout: float) -> tuple[str, str]:
    """Run notebook 08's train_ddp.py once with launch(); return (outcome, one-line reason)."""
    run = launch("torchrun --standalone --nproc_per_node=2 train_ddp.py", cwd=folder, timeout=timeout, echo=False)
    if not run.ok:
        return classify(run.error, f"{run.error}\n{run.error.log_tail}\n{run.output}"), str(run.error).splitlines()[0]
    setup = runpy.run_path(str(folder / "ddp_setup.py"))
    c = run.compare_with_single_process(setup["make_data"](), setup["make_model"](seed=0), lr=0.1)
    if c is None or not c.ok:
        return "FAIL", f"comparison failed: {c}"
    return "PASS", f"{run.backend}, grad diff vs 1 process {c.grad_diff_vs_single:.1e}"


def run_race(folder: Path, timeout: float, exit_mode: str) -> tuple[str, str]:
    """Run the shutdown-only stress once; return (outcome, one-line reason)."""
    run = launch(f"torchrun --standalone --nproc_per_node=2 race_ddp.py {exit_mode}", cwd=folder, timeout=timeout,
                 echo=False)
    if run.ok:
        return "PASS", "both ranks exited cleanly"
    return classify(run.error, f"{run.error}\n{run.error.log_tail}\n{run.output}"), str(run.error).splitlines()[0][:160]


def start_load(workers: int, seconds: float) -> list[subprocess.Popen]:
    """Start `workers` processes that each keep one core busy for at most `seconds` (they end by themselves)."""
    code = f"import time\nend = time.monotonic() + {seconds:.0f}\nwhile time.monotonic() < end:\n    pass\n"
    return [subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL) for _ in range(workers)]


def stop_load(burners: list[subprocess.Popen]) -> None:
    """Stop the load processes and wait for them."""
    for b in burners:
        if b.poll() is None:
            b.kill()
    for b in burners:
        b.wait()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--runs", type=int, default=20, help="runs in a row (default 20)")
    parser.add_argument("--worker", default="notebook", choices=("notebook", "race"),
                        help="what to run (default: notebook 08's own script)")
    parser.add_argument("--exit", default="os", choices=("os", "python"),
                        help="race: end the ranks with os._exit (the fix) or normal interpreter shutdown")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run before it counts as hung")
    parser.add_argument("--load", action="store_true", help="keep --load-workers cores busy beside the runs")
    parser.add_argument("--load-workers", type=int, default=2, help="CPU-burning processes with --load (default 2)")
    parser.add_argument("--python", default=None,
                        help="run the benchmark with this interpreter (e.g. the Colab-pinned env's python)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    if args.load_workers < 1:
        parser.error("--load-workers must be >= 1")
    if args.worker == "notebook" and args.exit != "os":
        parser.error("--exit applies to --worker race; the notebook's script is as written")
    return args


def rerun_with(python: str, argv: list[str]) -> int:
    """Run this benchmark with another interpreter (this checkout's lessons_lib first on its path)."""
    rest, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--python":
            skip = True
        elif not a.startswith("--python="):
            rest.append(a)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    return subprocess.call([python, str(Path(__file__).resolve()), *rest], env=env)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    # Compare the paths as given: a virtualenv's python is a symlink, and its target is shared by other envs.
    if args.python and os.path.abspath(args.python) != os.path.abspath(sys.executable):
        return rerun_with(args.python, argv)
    import torch

    import lessons_lib

    print(f"python {sys.version.split()[0]} ({sys.executable}) · torch {torch.__version__} · "
          f"lessons_lib {Path(lessons_lib.__file__).parent} · {os.cpu_count()} CPUs · "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    burners = start_load(args.load_workers, args.runs * (args.timeout + 30)) if args.load else []
    outcomes, times = [], []
    try:
        with tempfile.TemporaryDirectory(prefix="ddp_bench_scripts_") as scripts:
            folder = Path(scripts)
            write_notebook_scripts(folder)
            (folder / "race_ddp.py").write_text(RACE_SCRIPT, encoding="utf-8")
            for i in range(1, args.runs + 1):
                start = time.perf_counter()
                if args.worker == "notebook":
                    outcome, reason = run_notebook(folder, args.timeout)
                else:
                    outcome, reason = run_race(folder, args.timeout, args.exit)
                left = find_processes(str(folder))
                if left:
                    outcome, reason = "FAIL", f"leftover processes {left}"
                elapsed = time.perf_counter() - start
                outcomes.append((i, outcome, reason))
                times.append(elapsed)
                print(f"run {i:3d}/{args.runs}: {outcome:5s} {elapsed:6.1f} s  {reason}", flush=True)
    finally:
        stop_load(burners)
    counts = Counter(o for _, o, _ in outcomes)
    setup = (f"worker {args.worker}" + (f", exit {args.exit}" if args.worker != "notebook" else "")
             + (f", load {args.load_workers} CPU burners" if args.load else ", no extra load"))
    print(f"\n{counts['PASS']} of {args.runs} runs passed ({setup}); "
          + ", ".join(f"{o} {counts[o]}" for o in OUTCOMES) + f"; aborts: {counts['ABORT']}; "
          f"time per run: median {statistics.median(times):.1f} s, min {min(times):.1f} s, max {max(times):.1f} s, "
          f"total {sum(times):.0f} s; load average at the end {os.getloadavg()[0]:.1f}")
    for i, outcome, reason in outcomes:
        if outcome != "PASS":
            print(f"  run {i}: {outcome}: {reason}")
    return 0 if counts["PASS"] == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())

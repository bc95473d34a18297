"""The instructor's pre-course check: run every notebook under nbval, print a table per notebook and a verdict.

Every learner and solutions notebook runs once, top to bottom, under nbval (``--nbval-lax``: a cell that raises
fails), three notebooks at a time on a 2-core machine without an NVIDIA GPU (see check_workers), one at a time
with one (GPU cells measure).
The table gives, per notebook: passed or not, cells run, ``%%gpu`` cells run / skipped and why, time, and the
kernel's peak memory (Linux; "?" elsewhere). On a machine with GPUs, a ``%%gpu`` cell that its GPU count allows
but that was skipped fails the check (the rule of tools/gpu_validate.py, whose junit reader this reuses).
The full test suite (``bash tools/course.sh test``) stays what CI runs.

Usage:
    bash tools/course.sh check [NOTEBOOK ...]     # default: notebooks/ and notebooks/solutions/
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from lessons_lib import gpu_check
from tools import gpu_validate
from tools.course import test_workers

ROOT = Path(__file__).resolve().parent.parent


PEAK_PROPERTY = "kernel_peak_bytes"


def kernel_peak_bytes(kernel) -> int | None:
    """Return the peak resident memory of an nbval kernel's process (Linux /proc VmHWM), or None if unknown."""
    km = getattr(kernel, "km", None)
    process = getattr(getattr(km, "provisioner", None), "process", None) or getattr(km, "kernel", None)
    try:
        with open(f"/proc/{process.pid}/status", encoding="ascii") as status:
            line = next(line for line in status if line.startswith("VmHWM:"))
    except (AttributeError, OSError, StopIteration):
        return None
    return int(line.split()[1]) * 1024


def pytest_runtest_teardown(item):
    """Record the kernel's peak memory so far on each notebook cell (read back from the junit file)."""
    peak = kernel_peak_bytes(getattr(item.parent, "kernel", None))
    if peak is not None:
        item.user_properties.append((PEAK_PROPERTY, peak))


def notebook_rows(junit_xml: Path, machine_gpus: int, rootdir: Path = ROOT) -> dict[str, dict]:
    """Return, per notebook of a junit file, its cells passed/failed, GPU cells run/skipped, time and peak."""
    rows: dict[str, dict] = {}
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        file = case.get("file") or ""
        if not file.endswith(".ipynb"):
            continue
        row = rows.setdefault(gpu_validate._shown(rootdir / file), {"passed": 0, "failed": 0, "seconds": 0.0, "peak": None,
                                     "gpu_run": 0, "gpu_skipped": {}})
        row["seconds"] += float(case.get("time") or 0)
        if case.find("failure") is not None or case.find("error") is not None:
            row["failed"] += 1
        elif case.find("skipped") is None:
            row["passed"] += 1
        for prop in case.iter("property"):
            if prop.get("name") == PEAK_PROPERTY:
                row["peak"] = max(row["peak"] or 0, int(prop.get("value")))
    for label, needed, outcome in gpu_validate.gpu_cells_in_junit(junit_xml, rootdir):
        row = rows[label.partition("::")[0]]
        if outcome == "skipped":
            reason = f"cần {needed} GPU, máy có {machine_gpus}"
            row["gpu_skipped"][reason] = row["gpu_skipped"].get(reason, 0) + 1
        else:
            row["gpu_run"] += 1
    return rows


def table(rows: dict[str, dict]) -> str:
    """Return the Markdown table of notebook rows."""
    lines = ["| notebook | kết quả | ô chạy / lỗi | ô %%gpu chạy / bỏ qua (lý do) | thời gian | bộ nhớ đỉnh (kernel) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for file, row in sorted(rows.items()):
        skipped = ", ".join(f"{n} ({why})" for why, n in row["gpu_skipped"].items()) or "0"
        peak = f"{row['peak'] / 2**20:.0f} MiB" if row["peak"] else "?"
        lines.append(f"| {file} | {'✅' if not row['failed'] else '❌'} | {row['passed']} / {row['failed']} | "
                     f"{row['gpu_run']} / {skipped} | {row['seconds']:.0f} s | {peak} |")
    return "\n".join(lines)


def check_workers(environ=os.environ) -> list[str]:
    """Return the pytest-xdist arguments: the test command's, with one process more when it runs several.

    A notebook spends much of its time waiting (a kernel starting, torchrun, DataLoader workers), so one process
    more than the test command's fills those waits: 2.7 instead of 3.1 minutes on 2 cores. The check only asks
    whether every cell runs; the timings the notebooks print are noisier meanwhile. COURSE_TEST_WORKERS overrides.
    """
    workers = test_workers([], environ)
    if workers and not environ.get("COURSE_TEST_WORKERS"):
        workers[1] = str(int(workers[1]) + 1)
    return workers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks (default: every course notebook)")
    args = parser.parse_args(argv)
    notebooks = [str(p) for p in args.notebooks] or ["notebooks"]
    report = gpu_check.read_torch()
    machine_gpus = report.count if report.available else 0
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bai14-check-") as tmp:
        junit = Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "--nbval-lax", "-q", "-p", "no:cacheprovider", "-p", "tools.precourse_check",
               *check_workers(),
               "-o", "junit_family=xunit1", f"--junitxml={junit}", "--rootdir", str(ROOT), *notebooks]
        status = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if not junit.is_file():
            print(status.stdout[-4000:])
            print("❌ Không chạy được pytest/nbval (xem dòng trên).")
            return 1
        rows = notebook_rows(junit, machine_gpus)
        problems = gpu_validate.skipped_by_pytest(junit, ROOT, machine_gpus) if machine_gpus else []
    print(table(rows))
    failed = [f for f, row in rows.items() if row["failed"]]
    minutes = (time.perf_counter() - start) / 60
    if status.returncode or failed or problems:
        tail = status.stdout.strip().splitlines()[-30:] if failed else []
        print("\n".join(["", *tail, *problems]))
        print(f"❌ KHÔNG SẴN SÀNG: {len(failed)} notebook lỗi, {len(problems)} ô %%gpu bị bỏ qua dù máy có đủ GPU "
              f"({len(rows)} notebook, {minutes:.1f} phút).")
        return 1
    gpu = f"{machine_gpus} GPU" if machine_gpus else "không GPU: các ô %%gpu được bỏ qua"
    print(f"✅ SẴN SÀNG: {len(rows)} notebook chạy hết ({gpu}; {minutes:.1f} phút).")
    return 0


if __name__ == "__main__":
    sys.exit(main())

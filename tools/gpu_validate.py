"""Validate the course on a machine with an NVIDIA GPU, keep the evidence, and fail unless the GPU cells ran.

Run it through ``bash tools/gpu_validate.sh [-o OUT] [--keep-going] [NOTEBOOK ...]`` (the course environment). It
fails (exit 1), saying why in Vietnamese, when no CUDA GPU is usable (no nvidia-smi or no GPU listed, a CPU-only
torch, a driver too old for torch's CUDA build, or a first computation on the GPU fails; ``--keep-going`` runs the
rest anyway), when pytest fails (the whole suite, when no notebook is named), or when a notebook fails in
tools/run.py or skips a `%%gpu` cell that the machine's GPU count (nvidia-smi's) allows.

Evidence in OUT (default ``gpu-validation-<date>-<time>/``, ignored by git): environment.txt (GPU, driver, CUDA,
torch), pytest.log, notebooks.log (run.py's table), problems.txt, and the executed notebooks with their outputs
under ``OUT/executed/<notebook path relative to the repository>`` (a website build can reuse them).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

from lessons_lib import __version__
from tools import gpu_check, run

ROOT = Path(__file__).resolve().parent.parent


def first_gpu_computation() -> str | None:
    """Run one small computation on cuda:0 and return its error, or None when it worked."""
    try:
        import torch

        x = torch.ones(256, 256, device="cuda")
        value = float((x @ x).sum().item())
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - any failure here means the GPU is not usable
        return f"{type(exc).__name__}: {exc}".splitlines()[0]
    return None if value == 256.0 ** 3 else f"wrong result {value} for a 256x256 matmul of ones"


def _tee(cmd: list[str], log: Path, env: dict) -> int:
    """Run `cmd` in the repository, echoing its output and writing it to `log`; return its exit status."""
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            sys.stdout.write(line)
            out.write(line)
        return proc.wait()


def _environment(out: Path, smi: gpu_check.SmiReport, report: gpu_check.TorchReport) -> None:
    query = ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap", "--format=csv"]
    try:
        smi_text = subprocess.run(query, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        smi_text = f"nvidia-smi: {type(exc).__name__}: {exc}"
    lines = [f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}",
             f"machine: {platform.platform()} | python {platform.python_version()} ({sys.executable})",
             *gpu_check.header_lines(smi, report, __version__), smi_text]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    (out / "environment.txt").write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="only these notebooks (default: everything)")
    parser.add_argument("-o", "--out", type=Path, help="evidence folder (default gpu-validation-<date>-<time>/)")
    parser.add_argument("--keep-going", action="store_true", help="run everything even without a usable GPU")
    args = parser.parse_args(argv)
    out = (args.out or ROOT / f"gpu-validation-{datetime.datetime.now():%Y%m%d-%H%M}").resolve()
    out.mkdir(parents=True, exist_ok=True)
    notebooks = [p.resolve() for p in args.notebooks]
    for path in notebooks:
        if path.suffix != ".ipynb" or not path.is_file():
            parser.error(f"{path} is not a notebook file (.ipynb)")

    smi, report = gpu_check.read_nvidia_smi(), gpu_check.read_torch()
    _environment(out, smi, report)
    init_error = first_gpu_computation() if report.count else None
    problems = []
    no_cuda = gpu_check.no_usable_cuda(smi, report, init_error)
    if no_cuda is not None:
        problems.append(no_cuda)
        if not args.keep_going:
            return _finish(out, problems)
        print(no_cuda, file=sys.stderr, flush=True)

    env = {**os.environ, "PYTHONUNBUFFERED": "1", run.EXECUTED_DIR_ENV: str(out / "executed")}
    if no_cuda is not None:
        env[gpu_check.ALLOW_NO_CUDA_ENV] = "1"  # the re-run test would fail on it too; this report names it
    if not notebooks:
        status = _tee([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
                       "-rs", "-p", "no:cacheprovider"], out / "pytest.log", env)
        if status != 0:
            problems.append(f"❌ pytest thất bại (mã {status}), xem {out / 'pytest.log'}")
    reports = run.run_all(notebooks or run.course_notebooks(), len(smi.gpus), out / "executed")
    log = run.table(reports) + "\n\n" + run.details(reports)
    (out / "notebooks.log").write_text(log + "\n", encoding="utf-8")
    print(log, flush=True)
    ran = sum(r.gpu_ran for r in reports)
    print(f"Số ô %%gpu đã chạy: {ran}", flush=True)
    if any(r.executed.error or r.problems for r in reports):
        problems.append(f"❌ Có notebook lỗi khi chạy từ đầu đến cuối, xem {out / 'notebooks.log'}")
    hollow = [cell for r in reports for cell in r.hollow]
    if hollow:
        cells = "\n  ".join(hollow)
        problems.append(f"❌ Các ô %%gpu sau bị bỏ qua dù máy có {len(smi.gpus)} GPU:\n  {cells}")
    return _finish(out, problems)


def _finish(out: Path, problems: list[str]) -> int:
    (out / "problems.txt").write_text("\n\n".join(problems) + ("\n" if problems else ""), encoding="utf-8")
    print("=" * 78)
    if problems:
        print("\n\n".join(problems))
        print(f"❌ Kiểm tra GPU KHÔNG đạt; bằng chứng ở {out}/")
        return 1
    print(f"✅ Kiểm tra GPU đạt: mọi ô %%gpu đã chạy; bằng chứng ở {out}/ (các notebook đã chạy: {out / 'executed'}/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

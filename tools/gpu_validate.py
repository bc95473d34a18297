"""Validate the course on a machine with an NVIDIA GPU, keep the evidence, and fail unless the GPU cells ran.

Run it through ``bash tools/gpu_validate.sh`` (which uses the course environment). It fails (exit 1), saying why
in Vietnamese, when:

- no CUDA GPU is usable: no nvidia-smi, nvidia-smi lists no GPU, a CPU-only torch, a driver too old for torch's
  CUDA build (torch.cuda.is_available() is False with a warning), or a first computation on the GPU fails;
- pytest fails, or a notebook fails when run top to bottom;
- any `%%gpu` cell that this machine's GPU count allows was skipped: by pytest (nbval, read from a junit XML) or
  inside the kernel (the executed notebook shows the cell's skip notice instead of its output).

Evidence in OUT (default ``gpu-validation-<date>-<time>/``, ignored by git): environment.txt (GPU, driver, CUDA,
torch), pytest.log + junit.xml, notebooks.log (time and peak memory per notebook), problems.txt, and the executed
notebooks with their outputs under ``OUT/executed/<notebook path relative to the repository>`` (the curves to look
at; a website build can reuse them).

Usage:
    bash tools/gpu_validate.sh [-o OUT] [--keep-going] [NOTEBOOK ...]
        NOTEBOOK ...   validate only these notebooks (default: the README's whole test command, then every
                       notebook under notebooks/)
        --keep-going   run pytest and the notebooks even when no CUDA GPU is usable (the exit status stays 1)
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import nbformat

from lessons_lib import __version__, gpu_cells, gpu_check

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


def _code_cells(path: Path) -> list:
    return [cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"]


def needed_gpus(source: str) -> int | None:
    """Return how many GPUs a `%%gpu` cell needs, or None for any other cell (or a malformed %%gpu line)."""
    try:
        return gpu_cells.required_gpus(source)
    except ValueError:
        return None


def gpu_cells_in_junit(junit_xml: Path, rootdir: Path) -> list[tuple[str, int, str]]:
    """Return (notebook::Cell N, GPUs it needs, "passed" | "skipped" | "failed") for each `%%gpu` cell pytest ran.

    Args:
        junit_xml: pytest's ``--junitxml`` output, written with ``-o junit_family=xunit1`` (it names the file).
        rootdir: pytest's rootdir (the junit file paths are relative to it).
    """
    found = []
    cells_of: dict[Path, list] = {}
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        file, name = case.get("file") or "", case.get("name") or ""
        if not file.endswith(".ipynb") or not name.startswith("Cell "):
            continue
        path = (rootdir / file).resolve()
        if path not in cells_of:
            cells_of[path] = _code_cells(path) if path.exists() else []
        index, cells = int(name.split()[1]), cells_of[path]
        needed = needed_gpus(cells[index].source) if index < len(cells) else None
        if needed is None:
            continue
        outcome = ("skipped" if case.find("skipped") is not None
                   else "failed" if case.find("failure") is not None or case.find("error") is not None else "passed")
        found.append((f"{_shown(path)}::{name}", needed, outcome))
    return found


def skipped_by_pytest(junit_xml: Path, rootdir: Path, machine_gpus: int) -> list[str]:
    """Return "[pytest] notebook::Cell N (needs K GPU)" for each `%%gpu` cell pytest skipped that the machine's
    GPUs allow."""
    return [f"[pytest] {label} (needs {needed} GPU)"
            for label, needed, outcome in gpu_cells_in_junit(junit_xml, rootdir)
            if outcome == "skipped" and needed <= machine_gpus]


def skipped_in_kernel(executed: Path, machine_gpus: int, shown_as: str | None = None) -> list[str]:
    """Return "[kernel] notebook::Cell N (needs K GPU)" for each `%%gpu` cell of an executed notebook that printed
    the skip notice instead of running, although the machine's GPUs allow it."""
    found = []
    for index, cell in enumerate(_code_cells(executed)):
        needed = needed_gpus(cell.source)
        if needed is None or needed > machine_gpus:
            continue
        text = "".join(out.get("text", "") for out in cell.get("outputs", []) if out.get("output_type") == "stream")
        if any(line.lstrip().startswith(gpu_cells.SKIP_MARK) for line in text.splitlines()):
            found.append(f"[kernel] {shown_as or _shown(executed)}::Cell {index} (needs {needed} GPU)")
    return found


def _shown(path: Path) -> str:
    path = Path(path).resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


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

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if no_cuda is not None:
        env[gpu_check.ALLOW_NO_CUDA_ENV] = "1"  # the session would stop at once; this report names the problem
    junit = out / "junit.xml"
    pytest_status = _tee([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT),
                          "-rs", "-p", "no:cacheprovider", "-o", "junit_family=xunit1", f"--junitxml={junit}",
                          *map(str, notebooks)], out / "pytest.log", env)
    executed = out / "executed"
    notebooks_status = _tee([sys.executable, "-m", "tools.run_notebooks", "--markdown", "--save",
                             str(executed), *map(str, notebooks)], out / "notebooks.log", env)
    if pytest_status != 0:
        problems.append(f"❌ pytest thất bại (mã {pytest_status}), xem {out / 'pytest.log'}")
    if notebooks_status != 0:
        problems.append(f"❌ Có notebook lỗi khi chạy từ đầu đến cuối, xem {out / 'notebooks.log'}")
    machine_gpus = len(smi.gpus)
    ran = sum(outcome == "passed" for _, _, outcome in gpu_cells_in_junit(junit, ROOT)) if junit.exists() else 0
    print(f"Số ô %%gpu đã chạy dưới pytest: {ran}", flush=True)
    hollow = skipped_by_pytest(junit, ROOT, machine_gpus) if junit.exists() else []
    for saved in sorted(executed.rglob("*.ipynb")) if executed.exists() else []:
        hollow += skipped_in_kernel(saved, machine_gpus, shown_as=saved.relative_to(out).as_posix())
    if hollow:
        cells = "\n  ".join(hollow)
        problems.append(f"❌ Các ô %%gpu sau bị bỏ qua dù máy có {machine_gpus} GPU:\n  {cells}")
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

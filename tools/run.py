"""Run course notebooks as "Run all", check their outputs, count their `%%gpu` cells and report per notebook.

The course's one notebook runner. Each notebook runs top to bottom with nbclient, twice in one kernel by default
(learners re-run cells; ``--once`` runs it once), under a time limit per cell and, with ``--memory-mb``, a memory
limit on the kernel. Its outputs go through tools/output_checks.py; its `%%gpu` cells are counted as run or
skipped (a skipped cell prints ``lessons_lib.gpu_cells.SKIP_MARK``), and one that the machine's GPUs allow but
that was skipped fails the notebook. A notebook that passes is kept, executed (last pass, with its outputs), under
``build/executed/<path relative to the repository>`` (``--save DIR`` elsewhere), keyed by a hash of the notebook,
every file of lessons_lib, the versions that change its outputs and the run's settings: it runs again only when
one of those changed (``--fresh`` runs it anyway). The saved notebook's ``lessons_run`` metadata records the key
and where it ran. The test suite (tests/test_rerun.py), the website build, `course.sh check` and
tools/gpu_validate.py share copies made under the same run conditions (``run_conditions``: inside the test command
the re-run test and the site test read the same ones).

Usage:
    python -m tools.run                                 # every notebook under notebooks/; `bash tools/course.sh check`
    python -m tools.run notebooks/02_moving_tensors.ipynb --once --fresh
    python -m tools.run --save out/executed --fresh     # the executed notebooks elsewhere, run now
    python -m tools.run --readme                        # run every notebook once, write the times into README
"""

from __future__ import annotations

import argparse
import copy
import datetime
import functools
import hashlib
import json
import os
import platform
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import nbclient
import nbformat
from filelock import FileLock, Timeout  # a dependency of torch

from lessons_lib import __version__, gpu_cells
from tools import EXECUTED_DIR_ENV, KERNEL_LOCK_DIR_ENV, gpu_check, output_checks

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "lessons_lib"
CACHE_DIR = Path(os.environ.get(EXECUTED_DIR_ENV, ROOT / "build" / "executed"))
SETTINGS = "tools.run v1 (first-pass streams kept); kernel=python3"
RUN_KEY = "lessons_run"
FILE_SIZE_LIMIT = 2**30  # RLIMIT_FSIZE of a limited kernel: one file it writes stays under 1 GiB
# Packages whose version changes what a notebook prints (torch first: it changes the most).
VERSIONED = ("torch", "numpy", "matplotlib", "ipywidgets", "ipykernel", "ipython")

# Printed by a cell appended after the notebook: where it ran and the kernel's peak memory, measured inside it.
PROBE = r'''
import json as _json, os as _os, platform as _platform, subprocess as _sp, sys as _sys, datetime as _dt
def _cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as _f:
            for _line in _f:
                if _line.lower().startswith(("model name", "hardware")):
                    return _line.split(":", 1)[1].strip()
    except OSError:
        pass
    if _sys.platform == "darwin":  # "Apple M2", where platform only knows "arm"
        _brand = _sp.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True).stdout
        if _brand.strip():
            return _brand.strip()
    return _platform.processor() or _platform.machine()
def _cores():
    try:
        return len(_os.sched_getaffinity(0))
    except AttributeError:
        return _os.cpu_count() or 1
def _peak():
    try:  # no `resource` module on Windows: the peak is then unknown
        import resource as _r
    except ImportError:
        return None
    _k = 1 if _sys.platform == "darwin" else 1024
    return max(_r.getrusage(_r.RUSAGE_SELF).ru_maxrss, _r.getrusage(_r.RUSAGE_CHILDREN).ru_maxrss) * _k
import torch as _torch
_gpus = [_torch.cuda.get_device_name(_i) for _i in range(_torch.cuda.device_count())] if _torch.cuda.is_available() else []
print("LESSONS_RUN", _json.dumps({
    "cpu": _cpu_model(), "cores": _cores(), "gpus": _gpus, "torch": _torch.__version__,
    "python": _platform.python_version(), "platform": _platform.platform(terse=True),
    "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"), "peak_bytes": _peak(),
}))
'''.strip()


@dataclass
class Executed:
    """One notebook run: the executed notebook (None where a cached run failed), its error, whether it came from the
    cache, its wall time."""

    source: Path
    nb: nbformat.NotebookNode | None
    error: str | None
    cached: bool
    wall_s: float

    @property
    def run(self) -> dict:
        """Return where and when it ran (the ``lessons_run`` metadata), or {} for a failed run."""
        return dict(self.nb.metadata.get(RUN_KEY, {})) if self.nb is not None else {}


def execute_notebook(path: Path, probe_source: str = "pass", timeout: int = 600, repeat: int = 1) -> Executed:
    """Execute `path` (in its folder, the file unchanged) `repeat` times in one kernel, `timeout` s per cell, then a
    cell of `probe_source` that stays appended to ``.nb``; the last pass is kept, even when a cell failed."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be an int >= 1 (2 runs every cell twice), got {repeat!r}")
    nb = nbformat.read(path, as_version=4)
    last_pass = nb.cells
    nb.cells = [copy.deepcopy(cell) for _ in range(repeat - 1) for cell in last_pass] + last_pass
    nb.cells.append(nbformat.v4.new_code_cell(probe_source))
    client = notebook_client(nb, Path(path).parent, timeout)
    start = time.perf_counter()
    error = None
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as exc:
        error = "\n".join(str(exc).strip().splitlines()[-40:]) or repr(exc)
    except Exception as exc:  # noqa: BLE001 - a kernel death or a timeout is a failure of the notebook too
        error = f"{type(exc).__name__}: {exc}"
    wall = time.perf_counter() - start
    keep_first_pass_streams(nb.cells[:len(last_pass)], last_pass)
    nb.cells = nb.cells[len(nb.cells) - len(last_pass) - 1:]  # keep the last pass (+ probe) only
    return Executed(Path(path), nb, error, False, wall)


class CourseClient(nbclient.NotebookClient):
    """A NotebookClient whose kernels start one at a time across every process that shares its lock's folder.

    jupyter_client picks a new kernel's free TCP ports in this process and the kernel binds them a moment later:
    two processes starting kernels at once (the test command's) can pick the same port, and one kernel dies
    with "Address already in use". Holding a file lock from picking the ports until the kernel answers closes that
    window.
    """

    _starting: FileLock | None = None

    async def async_start_new_kernel(self, **kwargs) -> None:
        folder = os.environ.get(KERNEL_LOCK_DIR_ENV) or tempfile.gettempdir()
        self._starting = FileLock(Path(folder) / "bai14-kernel-start.lock")
        self._starting.acquire()
        try:
            await super().async_start_new_kernel(**kwargs)
        except BaseException:
            self._release_start_lock()
            raise

    async def async_start_new_kernel_client(self):
        try:
            return await super().async_start_new_kernel_client()
        finally:
            self._release_start_lock()

    def _release_start_lock(self) -> None:
        if self._starting is not None:
            self._starting.release()
            self._starting = None


def notebook_client(nb: nbformat.NotebookNode, cwd: Path, timeout: int | None = 600,
                    **options) -> nbclient.NotebookClient:
    """Return the client every run of the course uses: "Run all" in a new python3 kernel started in `cwd`, killed
    at the end, each cell allowed `timeout` seconds; `options` are NotebookClient's (allow_errors, timeout_func, hooks)."""
    return CourseClient(nb, timeout=timeout, kernel_name="python3", shutdown_kernel="immediate",
                        resources={"metadata": {"path": str(cwd)}}, **options)


def keep_first_pass_streams(first: list, last: list) -> None:
    """Copy into each cell of `last` the printed text (stream outputs) of the same cell in `first` where it differs.

    A warning is often shown on the first pass only: the output checks (tools/output_checks.py) read it from the
    cell's ``metadata["first_pass_streams"]``. A notebook run once has the same cells in both (nothing to do).
    """
    for before, after in zip(first, last, strict=True):
        if before is after:
            continue
        streams = [o for o in before.get("outputs", []) if o.get("output_type") == "stream"]
        if streams and streams != [o for o in after.get("outputs", []) if o.get("output_type") == "stream"]:
            after.metadata[output_checks.FIRST_PASS_KEY] = streams


def course_notebooks(root: Path = ROOT / "notebooks") -> list[Path]:
    """Return every course notebook under `root`: lessons first, then sub-folders (solutions), each sorted."""
    paths = [p for p in root.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    return sorted(paths, key=lambda p: (len(p.relative_to(root).parts), p.relative_to(root).as_posix()))


def shown(path: Path) -> str:
    """Return `path` relative to the repository, or whole when it lies outside."""
    path = Path(path).resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def saved_path(path: Path, save_dir: Path) -> Path:
    """Return where the executed copy of `path` is kept: its path relative to the repository, or its name."""
    path = Path(path).resolve()
    return Path(save_dir) / (path.relative_to(ROOT) if path.is_relative_to(ROOT) else Path(path.name))


# --------------------------------------------------------------------------- %%gpu cells


def needed_gpus(source: str) -> int | None:
    """Return how many GPUs a `%%gpu` cell needs, or None for any other cell (or a malformed %%gpu line)."""
    try:
        return gpu_cells.required_gpus(source)
    except ValueError:
        return None


def was_skipped(cell) -> bool:
    """Return True when a %%gpu cell's outputs are only the skip notice lessons_lib prints."""
    outputs = cell.get("outputs", [])
    return bool(outputs) and all(o.get("output_type") == "stream" for o in outputs) and \
        "".join(o.get("text", "") for o in outputs).lstrip().startswith(gpu_cells.SKIP_MARK)


def gpu_cell_runs(nb) -> list[tuple[int, int, bool]]:
    """Return (code cell number, GPUs it needs, whether it ran) for each `%%gpu` cell of an executed notebook."""
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    return [(number, needed, not was_skipped(cell)) for number, cell in enumerate(code)
            if (needed := needed_gpus(cell.source)) is not None]


# --------------------------------------------------------------------------- the cache


def usable_cpus() -> int:
    """Return how many CPUs this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def environment_digest(library: Path = LIBRARY, conditions: str | None = None) -> str:
    """Return a SHA-256 over lessons_lib's files, the versions of Python, torch and the kernel's packages, the
    settings, the run conditions, the CPUs and threads the kernel may use and the GPUs the kernel may see (a copy whose
    %%gpu cells were skipped must not serve a machine where they run)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in library.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(library).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for package in VERSIONED:
        try:
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            version = "none"
        digest.update(f"{package}=={version}\0".encode())
    conditions = run_conditions() if conditions is None else conditions
    gpus = f"{_nvidia_gpus()} NVIDIA GPU, CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}"
    cpus = f"{usable_cpus()} CPU, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}"
    digest.update(f"python {platform.python_version()}\0{SETTINGS}\0{conditions}\0{gpus}\0{cpus}".encode())
    return digest.hexdigest()


def run_conditions(jobs: int = 1) -> str:
    """Return what else shares the CPU by design: the pytest-xdist processes of the test run or this runner's
    `jobs`, or "alone".

    Inside `course.sh test` several test processes run at once, so the notebooks' CPU timings are measured while the
    other process works (a 2-thread matmul can wait a whole scheduler tick for its second thread). Those copies serve
    the re-run test and the site test; a site built on its own (`course.sh site`) must not publish them, so this
    is part of the cache key.
    """
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    sharing = max(int(workers) if workers.isdigit() else 1, jobs)
    return f"with {sharing} test processes" if sharing > 1 else "alone"


@functools.cache
def _nvidia_gpus() -> int:
    return len(gpu_check.read_nvidia_smi().gpus)


def machine_gpus() -> int:
    """Return how many GPUs `%%gpu` cells must use here: torch's, or more where nvidia-smi lists more.

    A GPU that nvidia-smi lists but torch cannot use (a CPU build, a driver too old) would let every `%%gpu` cell
    skip and the run look green: its cells count as skipped though allowed, unless LESSONS_ALLOW_NO_CUDA=1.
    """
    usable = gpu_cells.cuda_gpu_count()
    return usable if os.environ.get(gpu_check.ALLOW_NO_CUDA_ENV) == "1" else max(usable, _nvidia_gpus())


def cache_key(path: Path, environment: str | None = None, repeat: int = 2) -> str:
    """Return the cache key of the notebook at `path` run `repeat` times (its bytes + ``environment_digest()``)."""
    environment = environment_digest() if environment is None else environment
    return hashlib.sha256(Path(path).read_bytes() + f"\0repeat={repeat}\0{environment}".encode()).hexdigest()


def execute_all_cached(paths: list[Path], **options) -> list[Executed]:
    """Return ``execute_cached(path, **options)`` for each path, in order, taking first the notebooks that no other
    process is running: two callers walking the course (the site build, the atlas test) then split it."""
    done = {path: execute_cached(path, wait=False, **options) for path in paths}
    return [done[path] or execute_cached(path, **options) for path in paths]


def execute_cached(path: Path, cache_dir: Path = CACHE_DIR, force: bool = False, timeout: int = 600,
                   repeat: int = 2, conditions: str | None = None, wait: bool = True) -> Executed | None:
    """Return the executed notebook for `path` from the cache at ``saved_path(path, cache_dir)``, running it
    (`repeat` times in one kernel) on a miss or when `force`d; a failed run (``nb`` None) is not cached. While
    another process runs it, wait for its copy, or return None at once when not `wait`."""
    path = Path(path)
    conditions = run_conditions() if conditions is None else conditions
    key = cache_key(path, environment_digest(conditions=conditions), repeat)
    target = saved_path(path, cache_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Two processes (e.g. `course.sh site` while a test run fills the cache, or two test processes) may ask for the
    # same notebook at once: the second waits for the first run and reads its copy.
    lock = FileLock(target.with_name(f".{target.name}.lock"))
    try:
        held = lock.acquire(timeout=-1 if wait else 0)
    except Timeout:
        return None
    with held:  # releases the one acquisition
        if not force and target.is_file():
            try:
                nb = nbformat.read(target, as_version=4)
            except (OSError, ValueError):
                nb = None  # unreadable (e.g. a half-written file from a killed run): run again
            if nb is not None and nb.metadata.get(RUN_KEY, {}).get("key") == key:
                return Executed(path, nb, None, True, float(nb.metadata[RUN_KEY].get("wall_s", 0.0)))
        run = execute_notebook(path.resolve(), PROBE, timeout=timeout, repeat=repeat)
        if run.error is not None:
            return Executed(path, None, run.error, False, run.wall_s)
        nb = run.nb
        # the probe cell, dropped; print() may reach it as several stream outputs: join them before parsing
        printed = "".join(output.get("text", "") for output in nb.cells.pop().get("outputs", [])).splitlines()
        probe = next((json.loads(line.split(" ", 1)[1]) for line in printed if line.startswith("LESSONS_RUN ")), {})
        nb.metadata[RUN_KEY] = {"key": key, "wall_s": round(run.wall_s, 1), "repeat": repeat, "conditions": conditions,
                                **probe}
        partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        nbformat.write(nb, partial)
        partial.replace(target)  # atomic: a reader never sees a half-written notebook
        return Executed(path, nb, None, False, run.wall_s)


# --------------------------------------------------------------------------- limits


def set_limits(memory_mb: int) -> str | None:
    """Limit this process and the kernels it starts: private memory, file size, no core files; return why not."""
    try:
        import resource
    except ImportError:  # Windows
        return "máy này không đặt được giới hạn bộ nhớ (không có module resource)"
    limits = [(resource.RLIMIT_DATA, memory_mb * 2**20), (resource.RLIMIT_FSIZE, FILE_SIZE_LIMIT),
              (resource.RLIMIT_CORE, 0)]
    for which, value in limits:
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, hard))
    return None


# --------------------------------------------------------------------------- the report


@dataclass
class Report:
    """One notebook's line of the report: its run, the output checks' problems and its %%gpu cells."""

    notebook: str
    executed: Executed
    problems: list[str]
    gpu_ran: int
    gpu_skipped: dict[str, int]  # why -> how many
    hollow: list[str]  # %%gpu cells the machine's GPUs allow but that were skipped

    @property
    def ok(self) -> bool:
        """Return True when the notebook ran, kept its promises and ran every %%gpu cell it could."""
        return self.executed.error is None and not self.problems and not self.hollow


def report(executed: Executed, machine_gpus: int, kind: str) -> Report:
    """Return the report of one executed notebook: output checks by machine `kind`, %%gpu cells against `machine_gpus`."""
    name = shown(executed.source)
    if executed.nb is None:
        return Report(name, executed, [], 0, {}, [])
    ran, skipped, hollow = 0, {}, []
    for number, needed, did_run in gpu_cell_runs(executed.nb):
        if did_run:
            ran += 1
            continue
        why = f"cần {needed} GPU, máy có {machine_gpus}"
        skipped[why] = skipped.get(why, 0) + 1
        if needed <= machine_gpus:
            hollow.append(f"{name}::Cell {number} (cần {needed} GPU)")
    return Report(name, executed, output_checks.check_outputs(executed.nb, kind), ran, skipped, hollow)


def table(reports: list[Report]) -> str:
    """Return the Markdown table of the reports, one row per notebook."""
    lines = ["| notebook | kết quả | ô %%gpu chạy / bỏ qua (lý do) | kiểm tra đầu ra | thời gian | bộ nhớ đỉnh (kernel) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in reports:
        skipped = ", ".join(f"{n} ({why})" for why, n in r.gpu_skipped.items()) or "0"
        peak = r.executed.run.get("peak_bytes")
        cached = " (đã lưu)" if r.executed.cached else ""
        checks = "lỗi chạy" if r.executed.error else f"{len(r.problems)} vấn đề" if r.problems else "đạt"
        lines.append(f"| {r.notebook} | {'✅' if r.ok else '❌'} | {r.gpu_ran} / {skipped} | {checks} | "
                     f"{r.executed.wall_s:.0f} s{cached} | {f'{peak / 2**20:.0f} MiB' if peak else '?'} |")
    return "\n".join(lines)


def details(reports: list[Report]) -> str:
    """Return what went wrong in each failed notebook: its error's last lines, the output problems, the hollow cells."""
    parts = []
    for r in reports:
        if r.executed.error:
            parts.append(f"❌ {r.notebook}: lỗi khi chạy\n{r.executed.error}")
        if r.problems:
            parts.append(f"❌ {r.notebook}: đầu ra không như bài hứa\n" + "\n".join(f"  - {p}" for p in r.problems))
        if r.hollow:
            parts.append(f"❌ {r.notebook}: ô %%gpu bị bỏ qua dù máy có đủ GPU\n" + "\n".join(f"  - {h}" for h in r.hollow))
    return "\n\n".join(parts)


def share_cpus(processes: int) -> None:
    """Give each of `processes` runs at once its share of the CPUs for torch's threads (``OMP_NUM_THREADS``, which
    child processes inherit), unless the caller set it.

    With one torch thread per CPU in each, a timed loop waits on a thread another run has descheduled and runs
    5-10× slower (lesson 09's logging benchmark: 19 s alone, 111 s beside one busy core).
    """
    if processes > 1 and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = str(max(1, usable_cpus() // processes))


def run_all(paths: list[Path], machine_gpus: int, cache_dir: Path = CACHE_DIR, fresh: bool = False,
            timeout: int = 600, repeat: int = 2, jobs: int = 1) -> list[Report]:
    """Execute (or take from the cache) each notebook, `jobs` at a time, and return their reports in order."""
    conditions = run_conditions(jobs)
    kind = output_checks.machine_kind()

    def one(path: Path) -> Report:
        executed = execute_cached(path, cache_dir, fresh, timeout, repeat, conditions)
        result = report(executed, machine_gpus, kind)
        print(f"{'✅' if result.ok else '❌'} {result.notebook} ({executed.wall_s:.0f} s)", flush=True)
        return result

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, paths))


# --------------------------------------------------------------------------- README's notebook table

README = ROOT / "README.md"
_FOOTNOTE = "Thời gian CPU đo bằng"  # how the line under the table starts
_LINK = re.compile(r"\]\((notebooks/[^)]+\.ipynb)\)")
_ROW = re.compile(r"^(\|.*\]\(notebooks/.*\|)[^|\n]*\|$", re.M)  # a row linking notebooks, up to its last cell


def readme_with_times(readme: str, results: list[Report], footnote: str) -> str:
    """Return `readme` whose notebook rows show, in their last column, the time and kernel peak memory of each
    notebook they link (from `results`), with `footnote` as the line under the table."""
    by_path = {r.notebook: r.executed for r in results}

    def measured(path: str) -> str:
        if path not in by_path:
            raise ValueError(f"no measurement for {path}: run every notebook (no arguments) with --readme")
        peak = by_path[path].run.get("peak_bytes")
        return f"{by_path[path].wall_s:.0f} s" + (f" · {peak / 2**20:.0f} MiB" if peak else "")

    readme = _ROW.sub(lambda row: f"{row[1]} {' / '.join(map(measured, _LINK.findall(row[1])))} |", readme)
    return re.sub(rf"^{_FOOTNOTE}.*$", lambda _: footnote, readme, count=1, flags=re.M)


def _footnote() -> str:
    load = f", tải trung bình lúc bắt đầu {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return (f"{_FOOTNOTE} `python -m tools.run --readme` (chạy như \"Run all\", từng notebook một) trên "
            f"{platform.system()} {platform.machine()}, {os.cpu_count()} lõi, không dùng GPU{load}, "
            f"{datetime.date.today().isoformat()} (cột cuối: thời gian · bộ nhớ đỉnh của kernel; bản học viên / bản lời giải).")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="notebooks to run (default: every course notebook)")
    parser.add_argument("--once", action="store_true", help="run all cells once (default: twice in one kernel)")
    parser.add_argument("--fresh", action="store_true", help="run even where the cache holds a current copy")
    parser.add_argument("--save", type=Path, metavar="DIR", default=CACHE_DIR,
                        help=f"keep the executed notebooks here (default {shown(CACHE_DIR)})")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell (default 600)")
    parser.add_argument("--memory-mb", type=int, help="limit this runner's and its kernels' private memory to this many MiB each")
    parser.add_argument("--gpus", type=int, help="GPUs this machine has for %%gpu cells (default: machine_gpus())")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks run at once (default 1)")
    parser.add_argument("--readme", action="store_true", help="run every notebook once, alone, and write the times "
                        "into README.md's notebook table")
    args = parser.parse_args(argv)
    if args.readme and (args.notebooks or args.jobs > 1):
        parser.error("--readme measures every notebook, one at a time: give no notebook names and no --jobs")
    for path in args.notebooks:
        if path.suffix != ".ipynb" or not path.is_file():
            parser.error(f"{path} is not a notebook file (.ipynb)")
    if args.memory_mb is not None and (why := set_limits(args.memory_mb)):
        print(f"⚠️ {why}", file=sys.stderr)
    footnote = _footnote()  # the load before the runs add their own
    print("\n".join(gpu_check.header_lines(gpu_check.read_nvidia_smi(), gpu_check.read_torch(), __version__)))
    gpus = machine_gpus() if args.gpus is None else args.gpus
    share_cpus(args.jobs)
    start = time.perf_counter()
    reports = run_all([p.resolve() for p in args.notebooks or course_notebooks()], gpus, args.save,
                      fresh=args.fresh or args.readme, timeout=args.timeout, repeat=1 if args.once or args.readme else 2,
                      jobs=args.jobs)
    print(table(reports))
    failed = [r for r in reports if not r.ok]
    minutes = (time.perf_counter() - start) / 60
    if failed:
        print("\n" + details(failed))
        print(f"❌ KHÔNG SẴN SÀNG: {len(failed)} / {len(reports)} notebook không đạt ({minutes:.1f} phút).")
        return 1
    gpu = f"{gpus} GPU" if gpus else "không GPU: các ô %%gpu được bỏ qua"
    print(f"✅ SẴN SÀNG: {len(reports)} notebook chạy hết, đầu ra đúng như bài hứa ({gpu}; {minutes:.1f} phút).")
    if args.readme:
        README.write_text(readme_with_times(README.read_text(encoding="utf-8"), reports, footnote), encoding="utf-8")
        print(f"wrote the times into {shown(README)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

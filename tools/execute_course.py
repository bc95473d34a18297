"""Execute the course notebooks twice in one kernel and keep the executed copies in a content-keyed cache.

Each notebook runs top to bottom twice in one kernel (learners re-run cells); the second pass, with its
outputs, is saved under ``build/executed/<relative notebook path>``. The saved notebook's metadata
(``lessons_run``) records the cache key and where it ran: CPU model, cores, GPU, torch, Python, date. The key
hashes the notebook's JSON, every file of ``lessons_lib``, the torch and Python versions, this executor's
settings and whether other test processes share the CPU (``run_conditions``), so a notebook runs again only
when one of those changed. A failed run is never cached.

The re-run test (``tests/test_rerun.py``) and the website build (``tools/build_site.py``) both read from this
cache, so one test command executes each notebook once for both.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import nbformat
from filelock import FileLock  # a dependency of torch

from tools.run_notebooks import execute_notebook, saved_path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
LIBRARY = ROOT / "lessons_lib"
CACHE_DIR = Path(os.environ.get("BAI14_EXECUTED_DIR", ROOT / "build" / "executed"))
REPEAT = 2
SETTINGS = f"execute_course v2 (first-pass streams kept); repeat={REPEAT}; kernel=python3"
RUN_KEY = "lessons_run"
# Packages whose version changes what a notebook prints (torch first: it changes the most).
VERSIONED = ("torch", "numpy", "matplotlib", "ipywidgets", "ipykernel", "ipython")

# Printed by a cell appended after the notebook: where it ran, measured inside the kernel itself.
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
    if _sys.platform == "darwin":
        try:
            return _sp.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
                           timeout=5).stdout.strip() or _platform.machine()
        except (OSError, _sp.SubprocessError):
            pass
    return _platform.processor() or _platform.machine()
def _cores():
    try:
        return len(_os.sched_getaffinity(0))
    except AttributeError:
        return _os.cpu_count() or 1
import torch as _torch
_gpus = [_torch.cuda.get_device_name(_i) for _i in range(_torch.cuda.device_count())] if _torch.cuda.is_available() else []
print("LESSONS_RUN", _json.dumps({
    "cpu": _cpu_model(), "cores": _cores(), "gpus": _gpus, "torch": _torch.__version__,
    "python": _platform.python_version(), "platform": _platform.platform(terse=True),
    "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"),
}))
'''.strip()


@dataclass
class Executed:
    """One notebook from the cache: the executed notebook (None if the run failed), its error and provenance."""

    source: Path
    nb: nbformat.NotebookNode | None
    error: str | None
    cached: bool
    wall_s: float

    @property
    def run(self) -> dict:
        """Return where and when it ran (the ``lessons_run`` metadata), or {} for a failed run."""
        return dict(self.nb.metadata.get(RUN_KEY, {})) if self.nb is not None else {}


def environment_digest(library: Path = LIBRARY) -> str:
    """Return a SHA-256 over lessons_lib's files, the versions of Python, torch and the kernel's packages, and the settings."""
    digest = hashlib.sha256()
    for path in sorted(p for p in library.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.relative_to(library).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for package in VERSIONED:
        try:
            version = metadata.version(package)
        except metadata.PackageNotFoundError:
            version = "none"
        digest.update(f"{package}=={version}\0".encode())
    digest.update(f"python {platform.python_version()}\0{SETTINGS}\0{run_conditions()}".encode())
    return digest.hexdigest()


def run_conditions() -> str:
    """Return what else shares the CPU by design: the number of pytest-xdist processes of the test run, or "alone".

    Inside `course.sh test` two test processes run at once, so the notebooks' CPU timings are measured while the
    other process works (a 2-thread matmul can wait a whole scheduler tick for its second thread). Those copies serve
    the re-run test and the site test; a site built on its own (`course.sh site`) must not publish them, so this
    is part of the cache key.
    """
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    return f"with {workers} test processes" if workers.isdigit() and int(workers) > 1 else "alone"


def cache_key(path: Path, environment: str | None = None) -> str:
    """Return the cache key of the notebook at `path` (its bytes + ``environment_digest()``)."""
    environment = environment_digest() if environment is None else environment
    return hashlib.sha256(Path(path).read_bytes() + b"\0" + environment.encode()).hexdigest()


def _parse_probe(text: str) -> dict:
    for line in text.splitlines():
        if line.startswith("LESSONS_RUN "):
            return json.loads(line.split(" ", 1)[1])
    return {}


def execute_cached(path: Path, cache_dir: Path = CACHE_DIR, force: bool = False, timeout: int = 600) -> Executed:
    """Return the executed notebook for `path` from the cache, running it (twice in one kernel) on a miss.

    Args:
        path: The course notebook (.ipynb).
        cache_dir: The cache folder; the executed copy is saved at ``saved_path(path, cache_dir)``.
        force: Run even when the cache holds a copy with the same key.
        timeout: Seconds allowed per cell.

    Returns:
        The ``Executed`` notebook; on a failed run ``nb`` is None, ``error`` holds the last lines of the
        error, and nothing is written to the cache.
    """
    path = Path(path)
    key = cache_key(path)
    target = saved_path(path, cache_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Two processes (e.g. `course.sh site` while a test run fills the cache, or tests outside conftest.py's shared
    # group) may ask for the same notebook at once: the second waits for the first run and reads its copy.
    with FileLock(target.with_name(f".{target.name}.lock")):
        return _execute_locked(path, target, key, force, timeout)


def _execute_locked(path: Path, target: Path, key: str, force: bool, timeout: int) -> Executed:
    if not force and target.is_file():
        try:
            nb = nbformat.read(target, as_version=4)
        except (OSError, ValueError):
            nb = None  # unreadable (e.g. a half-written file from a killed run): run again
        if nb is not None and nb.metadata.get(RUN_KEY, {}).get("key") == key:
            return Executed(path, nb, None, True, float(nb.metadata[RUN_KEY].get("wall_s", 0.0)))
    run = execute_notebook(path.resolve(), PROBE, timeout=timeout, repeat=REPEAT)
    if run.error is not None:
        return Executed(path, None, run.error, False, run.wall_s)
    nb = run.nb
    nb.cells = nb.cells[:-1]  # drop the probe cell
    info = _parse_probe(run.probe_text)
    nb.metadata[RUN_KEY] = {"key": key, "wall_s": round(run.wall_s, 1), "repeat": REPEAT,
                            "conditions": run_conditions(), **info}
    partial = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    nbformat.write(nb, partial)
    partial.replace(target)  # atomic: a reader never sees a half-written notebook
    return Executed(path, nb, None, False, run.wall_s)

"""Grade a class's notebooks with the course's own checkers: learner, lesson, task, result, the checker's message.

Each submission is recognised by its content and run top to bottom as "Run all" does, in its own worker, kernel and
temporary folder, under a time and a memory limit, sealed off with bubblewrap where it runs; every ``taskN.check(...)``
it runs logs its result (``lessons_lib.exercises._core.record_check``), which survives the kernel dying. This runs
the learners' code: docs/INSTRUCTORS.md, "Chấm bài cả lớp", says what goes in and out and what the sandbox stops.

Usage:
    bash tools/course.sh grade FOLDER [--out DIR] [--timeout S] [--memory-mb M] [--jobs N] [--sandbox MODE]
                                      [--disk-mb M]
"""

from __future__ import annotations

import argparse
import csv
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

#: Codes of a row's result, and how the table shows them.
LABELS = {
    "passed": "✅ đạt",
    "wrong": "❌ chưa đúng",
    "not_done": "⏳ chưa làm",
    "error": "💥 lỗi",
    "ran": "▶️ chạy xong",
}
_FROM_FEEDBACK = {"pass": "passed", "fail": "wrong", "missing": "not_done"}
NOTEBOOK_TASK = "(cả notebook)"
CSV_HEADER = ("học viên", "file", "bài", "nhiệm vụ", "tên nhiệm vụ", "kết quả", "mã", "thông báo")

KERNEL_START_S = 60  # a kernel that is not ready after this is reported as not started
MAX_SUBMISSION_BYTES = 100 * 2**20
CELL_OUTPUT_CHARS = 2_000  # kept per cell in the log ...
LOG_CHARS = 50_000  # ... and per submission; the rest is counted, not kept
_KEEP_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "SYSTEMROOT",
             "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "VIRTUAL_ENV", "CONDA_PREFIX",
             "MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")


class GradeError(ValueError):
    """The command was used wrongly; the message says what to pass."""


# --------------------------------------------------------------------------- the course's lessons


@dataclass(frozen=True)
class Lesson:
    """One lesson as the course build writes it: its checked tasks and what identifies its notebooks."""

    name: str  # e.g. "02_moving_tensors"
    number: int
    group: str  # its checkers' group, the lessons_lib.exercises module they come from, e.g. "lesson02"
    tasks: dict[str, str]  # key -> title of each task it checks, in notebook order
    ids: frozenset[str]
    texts: frozenset[str]


def cell_text(cell: Mapping) -> str:
    """Return a notebook cell's source as one string (Jupyter stores it as a string or a list of lines)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


_CHECK = re.compile(r"\b((?:task|ex)\w*)\.check\(")
_IMPORT = re.compile(r"^from (lessons_lib\.exercises(?:\.\w+)?) import .*\b(?:task|ex)\w*", re.M)


def load_lessons(notebooks: Path = NOTEBOOKS) -> dict[str, Lesson]:
    """Return the course's lessons by name, read from the generated notebooks, their tasks' titles from lessons_lib."""
    import importlib

    from lessons_lib.exercises import _core

    found: dict[str, dict] = {}
    for path in sorted([*notebooks.glob("[0-9][0-9]_*.ipynb"), *notebooks.glob("solutions/[0-9][0-9]_*.ipynb")]):
        name = path.stem.removesuffix("_solutions")
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        entry = found.setdefault(name, {"tasks": [], "module": "lessons_lib.exercises", "ids": set(), "texts": set()})
        for cell in cells:
            text = cell_text(cell)
            entry["ids"].add(cell.get("id", ""))
            if len(_norm(text)) >= 30:
                entry["texts"].add(_norm(text))
            if cell.get("cell_type") == "code":
                for key in _CHECK.findall(text):
                    if key not in entry["tasks"]:
                        entry["tasks"].append(key)
                imported = _IMPORT.search(text)
                if imported:
                    entry["module"] = imported.group(1)
    if not found:
        raise GradeError(f"không thấy notebook nào của khoá học trong {notebooks} (chạy python -m tools.build_course)")
    lessons_of = Counter(text for e in found.values() for text in e["texts"])  # the setup cell is in every lesson
    lessons = {}
    for name, e in found.items():
        importlib.import_module(e["module"])  # its tasks register on import
        group = e["module"].rsplit(".", 1)[-1]
        tasks = {key: getattr(_core.GROUPS.get(group, {}).get(key), "title", key) for key in e["tasks"]}
        texts = frozenset(text for text in e["texts"] if lessons_of[text] == 1)  # a shared text identifies none
        lessons[name] = Lesson(name, int(name[:2]), group, tasks, frozenset(e["ids"] - {""}), texts)
    return lessons


_TITLE = re.compile(r"^#\s*(?:🔭\s*)?Bài 14\.(\d+)\b", re.M)  # 🔭: a lesson that is all extension


def identify(nb: Mapping, lessons: Mapping[str, Lesson]) -> str | None:
    """Return the name of the lesson a submitted notebook is, from its cells' ids and texts, or None.

    A cell counts for a lesson when its id or its text (up to whitespace) is one the course build wrote for
    that lesson; the lesson with most such cells wins if it has at least 3 and no other has as many. Without
    that (every cell rewritten), a ``# Bài 14.N`` title decides. The file name is never used.
    """
    scores = {name: sum(1 for cell in nb["cells"] if cell.get("id") in lesson.ids
                        or _norm(cell_text(cell)) in lesson.texts) for name, lesson in lessons.items()}
    ranked = sorted(scores.items(), key=lambda item: -item[1])
    if ranked and ranked[0][1] >= 3 and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
        return ranked[0][0]
    numbers = {int(m) for cell in nb["cells"] if cell.get("cell_type") == "markdown"
               for m in _TITLE.findall(cell_text(cell))}
    by_number = [name for name, lesson in lessons.items() if lesson.number in numbers]
    return by_number[0] if len(by_number) == 1 else None


# --------------------------------------------------------------------------- submissions


@dataclass
class Submission:
    """One file of the folder: who handed it in, which lesson it is (None: unknown), or why it cannot run."""

    path: Path
    learner: str
    nb: dict | None = None
    lesson: str | None = None
    problem: str | None = None


def find_files(folder: Path, exclude: Path | None = None) -> list[Path]:
    """Return every file under `folder` (hidden files and folders, and `exclude`, left out), sorted."""
    out = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or "__pycache__" in rel.parts:
            continue
        if exclude is not None and (path == exclude or exclude in path.parents):
            continue
        if path.is_file() and not path.is_symlink():
            out.append(path)
    return out


_COPY_OF = re.compile(r"^(?:copy of|bản sao của)\s+", re.I)


def learner_name(path: Path, folder: Path, lesson: str | None = None) -> str:
    """Return who handed `path` in: its first sub-folder of `folder`, else its file name without the lesson's name.

    ``Trần Thị B/bai1.ipynb`` → "Trần Thị B"; ``an-02_moving_tensors.ipynb`` → "an"; ``Copy of x (1).ipynb`` → "x".
    """
    rel = path.relative_to(folder)
    if len(rel.parts) > 1:
        return rel.parts[0]
    stem = path.stem if path.suffix == ".ipynb" else path.name
    name = _COPY_OF.sub("", stem)
    if lesson:
        name = re.sub(re.escape(lesson) + r"(?:_solutions)?", "", name, flags=re.I)
    name = re.sub(r"\s*\(\d+\)\s*$", "", name).strip(" -_.·")
    return name or stem


def read_submission(path: Path, folder: Path, lessons: Mapping[str, Lesson]) -> Submission:
    """Read one file: a notebook of a known lesson, or a Submission whose `problem` says why it is not one."""
    sub = Submission(path, learner_name(path, folder))
    if path.suffix.lower() != ".ipynb":
        sub.problem = "không phải notebook (.ipynb): không chấm được"
    elif path.stat().st_size > MAX_SUBMISSION_BYTES:
        sub.problem = f"file quá lớn ({path.stat().st_size / 2**20:.0f} MiB): không chấm"
    else:
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
            if not all(isinstance(cell, dict) for cell in nb["cells"]):
                raise ValueError("a cell is not an object")
        except Exception as exc:  # noqa: BLE001 - anything a broken file raises is "not a notebook"
            sub.problem = f"không đọc được như một notebook ({type(exc).__name__}): file hỏng hoặc không phải .ipynb"
            return sub
        sub.nb, sub.lesson = nb, identify(nb, lessons)
        sub.learner = learner_name(path, folder, sub.lesson)
        if sub.lesson is None:
            sub.problem = "không nhận ra đây là bài nào của khoá (không có ô nào giống notebook của khoá): không chấm"
    return sub


# --------------------------------------------------------------------------- running one notebook (worker)


def _first_line(code: str, width: int = 60) -> str:
    line = next((ln.strip() for ln in code.splitlines() if ln.strip()), "")
    return line if len(line) <= width else line[:width - 1] + "…"


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_cells(job: dict) -> dict:
    """Run the job's code cells in order in a new kernel (tools/run.py's client) until the time limit; return what
    happened.

    `job` holds "cells" ([index, code] pairs), "timeout" (seconds for all cells), "pid_file" (where the kernel's
    process group id is written as soon as it is ready).
    """
    import nbformat
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    from tools import run

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code, metadata={"index": index})
                                         for index, code in job["cells"] if code.strip()])
    result = {"errors": [], "stopped": None, "cells_run": 0, "seconds": 0.0, "log": "", "dropped": 0}
    state = {"deadline": None, "cell": None, "exit": None, "pgid": None}

    def started(notebook) -> None:
        provisioner = client.km.provisioner
        state["pgid"] = getattr(provisioner, "pgid", None)
        Path(job["pid_file"]).write_text(str(state["pgid"] or getattr(provisioner, "pid", "") or ""), encoding="utf-8")
        state["deadline"] = time.monotonic() + job["timeout"]  # one time limit for all the cells

    def cell_started(cell, cell_index) -> None:
        state["cell"] = cell
        result["cells_run"] += 1

    def failed(notebook) -> None:  # called before the kernel is cleaned up: its exit status is still there
        process = getattr(client.km.provisioner, "process", None)
        state["exit"] = process.poll() if process is not None else None

    client = run.notebook_client(nb, Path.cwd(), None, allow_errors=True, startup_timeout=KERNEL_START_S,
                                 timeout_func=lambda cell: max(0.01, state["deadline"] - time.monotonic()),
                                 on_notebook_start=started, on_cell_start=cell_started, on_notebook_error=failed)
    start = time.monotonic()
    try:
        client.execute(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    except Exception as exc:  # noqa: BLE001 - a kernel that does not start, dies or runs out of time is reported
        cell = state["cell"]
        where = {"cell": cell.metadata["index"], "detail": _first_line(cell.source)} if cell is not None else {}
        if state["deadline"] is None:
            result["stopped"] = {"reason": "start", "cell": None, "detail": f"{type(exc).__name__}: {exc}"[:300]}
        elif isinstance(exc, CellTimeoutError):
            result["stopped"] = {"reason": "timeout", **where}
        else:
            result["stopped"] = {"reason": "died", **where, "exit": state["exit"] if isinstance(exc, DeadKernelError)
                                 else f"{type(exc).__name__}: {exc}"[:300]}
    finally:
        _kill_group(state["pgid"])  # what the kernel started and left running
    result["seconds"] = round(time.monotonic() - start, 1)
    _collect(nb.cells[:result["cells_run"]], result)
    return result


def _collect(cells: list, result: dict) -> None:
    """Record each cell's error and its output (stream and text results), capped per cell and in all, in `result`."""
    parts, dropped = [], 0
    for cell in cells:
        index, line = cell.metadata["index"], _first_line(cell.source)
        texts = []
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                texts.append(out.get("text", ""))
            elif out.output_type in ("execute_result", "display_data"):
                texts.append(str(out.get("data", {}).get("text/plain", "")) + "\n")
            elif out.output_type == "error":
                result["errors"].append({"cell": index, "line": line, "ename": str(out.get("ename", "")),
                                         "evalue": str(out.get("evalue", ""))[:500]})
        text = "".join(texts)
        parts.append(f"\n── ô {index}: {line}\n{text[:CELL_OUTPUT_CHARS]}")
        dropped += max(0, len(text) - CELL_OUTPUT_CHARS)
    log = "".join(parts)
    result["log"], result["dropped"] = log[:LOG_CHARS], dropped + max(0, len(log) - LOG_CHARS)


def _kill_group(pgid: int) -> None:
    if hasattr(os, "killpg") and pgid and pgid > 1 and pgid != os.getpgid(0):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def worker_main(job_path: str) -> int:
    """The worker process: set the limits, run the cells, write the result next to the job."""
    job = json.loads(Path(job_path).read_text(encoding="utf-8"))
    from tools import run

    warning = run.set_limits(job["memory_mb"])
    result = run_cells(job)
    result["warning"] = warning
    spent = os.times()  # the worker's and its kernel's (reaped by now): a sandbox does not pass them on
    result["cpu"] = round(spent.user + spent.system + spent.children_user + spent.children_system, 2)
    Path(job["result_file"]).write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
    return 0


# --------------------------------------------------------------------------- the sandbox (bubblewrap)


SANDBOX_MODES = ("auto", "required", "off")
SANDBOX_HOME = "/home/hocvien"  # the kernel's own empty HOME inside the sandbox
SANDBOX_SMALL_MB = 256  # size of the sandbox's own /tmp, HOME and /dev/shm (tmpfs: they live in memory)
DISK_MB = 1024  # default size of a submission's writable folder inside the sandbox (--disk-mb)
INSTALL_BWRAP = "sudo apt-get install bubblewrap"
_SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")  # programs and libraries, read-only
_ETC = ("alternatives", "ca-certificates", "ca-certificates.conf", "crypto-policies", "debian_version", "fonts",
        "gai.conf", "group", "host.conf", "hostname", "hosts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
        "locale.alias", "locale.conf", "localtime", "lsb-release", "matplotlibrc", "mime.types", "nsswitch.conf",
        "os-release", "passwd", "pki", "protocols", "resolv.conf", "services", "ssl", "timezone", "xdg")
_DEVICES = ("/dev/nvidia*", "/dev/kfd", "/dev/dri")  # GPUs (NVIDIA, AMD), passed through when the machine has them
_SANDBOX_FILES = ("job.json", "checks.jsonl", "result.json")  # all a sandboxed worker shares with the grader
_SUB_DIRS = ("work", "tmp", "runtime", "ipython", "no-wheels")  # a submission's own folders (kernel_env names them)


def _inside(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


@dataclass(frozen=True)
class Sandbox:
    """How each submission's worker (and the kernel it starts) runs under bubblewrap: what ``command`` seals off is
    what docs/INSTRUCTORS.md's "Sandbox" lists; only the job, the check log and the result file are shared."""

    bwrap: str
    read_only: tuple[str, ...]  # host paths seen at the same place, read-only
    hidden: tuple[str, ...] = ()  # paths inside those that must look empty (submissions, results, other temp folders)
    disk_mb: int = DISK_MB
    sized: bool = True  # this bwrap knows --size (0.7+); without it a tmpfs may grow to half the memory

    def _tmpfs(self, path: str, mb: int) -> list[str]:
        return [*(["--size", str(mb * 2**20)] if self.sized else []), "--tmpfs", path]

    def command(self, root: Path, argv: list[str]) -> list[str]:
        """Return the bwrap command that runs `argv` sealed off, `root` (the submission's temp folder) its only own."""
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        for name in _SYSTEM:
            path = "/" + name
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        for name in _ETC:
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        args += ["--proc", "/proc", "--dev", "/dev", "--ro-bind-try", "/sys", "/sys"]
        for pattern in _DEVICES:
            for device in sorted(Path("/").glob(pattern.lstrip("/"))):
                args += ["--dev-bind-try", str(device), str(device)]
        args += [*self._tmpfs("/tmp", SANDBOX_SMALL_MB), *self._tmpfs(SANDBOX_HOME, SANDBOX_SMALL_MB),
                 *self._tmpfs("/dev/shm", SANDBOX_SMALL_MB)]
        for path in self.read_only:
            args += ["--ro-bind", path, path]
        for hidden in self.hidden:  # an empty folder instead, then what must stay visible inside it again
            args += [*self._tmpfs(hidden, 1)]
            for path in self.read_only:
                if path != hidden and _inside(path, hidden):
                    args += ["--ro-bind", path, path]
        where = str(root)
        args += self._tmpfs(where, self.disk_mb)
        for sub_dir in _SUB_DIRS:
            args += ["--dir", f"{where}/{sub_dir}"]
        args += ["--ro-bind", f"{where}/job.json", f"{where}/job.json"]
        for name in _SANDBOX_FILES[1:]:
            args += ["--bind", f"{where}/{name}", f"{where}/{name}"]
        for path in (*self.hidden, "/"):  # the sandbox's own root and the empty folders: nothing to write there
            args += ["--remount-ro", path]
        return [*args, "--chdir", f"{where}/work", "--", *argv]


def _read_only_paths(environ: Mapping[str, str], python_paths: Iterable[str], home: str) -> tuple[str, ...]:
    """Return the host folders a sandboxed kernel needs read-only: this repository, Python and its packages."""
    candidates = [str(ROOT), sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *python_paths,
                  *[p for name in ("PYTHONPATH", "LD_LIBRARY_PATH") for p in environ.get(name, "").split(os.pathsep)],
                  environ.get("CUDA_HOME", ""), environ.get("CUDA_PATH", ""), environ.get("VIRTUAL_ENV", ""),
                  environ.get("CONDA_PREFIX", "")]
    found = set()
    for path in candidates:
        if not path or not os.path.isabs(path) or not os.path.exists(path):
            continue
        for variant in (os.path.normpath(path), os.path.realpath(path)):
            if os.path.isfile(variant):  # a zipped standard library: its folder
                variant = os.path.dirname(variant)
            # never the file system's root, the system folders (already there) or a folder holding the HOME
            if variant == "/" or _inside(home, variant) or any(_inside(variant, "/" + d) for d in (*_SYSTEM, "etc")):
                continue
            found.add(variant)
    keep: list[str] = []
    for path in sorted(found, key=lambda p: (p.count("/"), p)):
        if not any(_inside(path, kept) for kept in keep):
            keep.append(path)
    return tuple(sorted(keep))


def _probe(sandbox: Sandbox) -> str | None:
    """Start a trivial Python in the sandbox; return why it cannot start, or None when it runs."""
    root = Path(tempfile.mkdtemp(prefix="bai14-grade-probe-"))
    try:
        for name in _SANDBOX_FILES:
            (root / name).write_text("", encoding="utf-8")
        proc = subprocess.run(sandbox.command(root, [sys.executable, "-c", "import encodings"]),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"[:300]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if proc.returncode == 0:
        return None
    lines = [line.strip() for line in (proc.stderr or "").splitlines() if line.strip()]
    return (lines[-1] if lines else f"mã thoát {proc.returncode}")[:300]


def prepare_sandbox(mode: str, disk_mb: int, hidden: Iterable[Path] = (), which=shutil.which,
                    platform: str = sys.platform) -> tuple[Sandbox | None, str]:
    """Return the sandbox to grade in (None: none, where `mode` "auto" allows it) and the one line that says so;
    `hidden` are folders a kernel must not see inside the read-only ones (the submissions, the results)."""
    if mode not in SANDBOX_MODES:
        raise GradeError(f"sandbox phải là một trong {', '.join(SANDBOX_MODES)}, không phải {mode!r}")
    if mode == "off":
        return None, ("🔓 Không sandbox (--sandbox off): code của học viên chạy với quyền của bạn, thấy được file của "
                      "bạn và mạng.")
    bwrap = which("bwrap") if platform.startswith("linux") else None
    why = None
    if not platform.startswith("linux"):
        why = "sandbox bubblewrap chỉ có trên Linux"
    elif bwrap is None:
        why = f"máy này chưa có bubblewrap (bwrap); cài: {INSTALL_BWRAP}"
    else:
        try:
            sized = "--size" in subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.TimeoutExpired):
            sized = False
        home = os.path.realpath(os.path.expanduser("~"))
        read_only = _read_only_paths(os.environ, sys.path, home)
        masks = {os.path.realpath(p) for p in (*hidden, home, tempfile.gettempdir())}
        masks = tuple(sorted(p for p in masks if os.path.isdir(p) and p not in read_only
                             and any(_inside(p, ro) for ro in read_only)))
        sandbox = Sandbox(bwrap, read_only, masks, int(disk_mb), sized)
        failed = _probe(sandbox)
        if failed is None:
            size = f"ghi tối đa {disk_mb} MiB" if sized else "bwrap này không giới hạn được dung lượng ghi"
            return sandbox, (f"🔒 Sandbox bubblewrap: mỗi notebook không có mạng, không thấy thư mục nhà của bạn, "
                             f"repo chỉ đọc, HOME và /tmp riêng, {size}; mọi tiến trình của nó dừng khi chấm xong.")
        why = (f"bwrap không chạy được ({failed}); nếu máy tắt user namespace: sudo sysctl "
               "kernel.unprivileged_userns_clone=1 (Debian) hoặc kernel.apparmor_restrict_unprivileged_userns=0 "
               "(Ubuntu 24.04), hoặc chấm bằng root")
    if mode == "required":
        raise GradeError(f"--sandbox required nhưng không có sandbox: {why}")
    return None, f"⚠️ Không có sandbox ({why}): chấm như --sandbox off, code của học viên chạy với quyền của bạn."


# --------------------------------------------------------------------------- supervising one submission


_ACTIVE: dict[str, list] = {}  # temp folder → [worker process, kernel pid file], so Ctrl+C can clean up
_ACTIVE_LOCK = threading.Lock()


def kernel_env(root: Path, threads: int, environ: Mapping[str, str] = os.environ,
               sandboxed: bool = False) -> dict[str, str]:
    """Return the environment of a grading kernel: a few of this shell's variables (no secrets; in the sandbox its
    own HOME, none of this shell's folders), lessons_lib on PYTHONPATH, no download, temp files in `root`."""
    env = {name: environ[name] for name in _KEEP_ENV if name in environ}
    if sandboxed:
        for name in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
            env.pop(name, None)
        env["HOME"] = SANDBOX_HOME
    paths = [str(ROOT), *[p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    tmp = str(root / "tmp")
    env.update({
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)),
        "TMPDIR": tmp, "TEMP": tmp, "TMP": tmp,
        "JUPYTER_RUNTIME_DIR": str(root / "runtime"), "IPYTHONDIR": str(root / "ipython"),
        "LESSONS_GRADE_LOG": str(root / "checks.jsonl"), "LESSONS_WHEEL_DIR": str(root / "no-wheels"),
        "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "GIT_ALLOW_PROTOCOL": "file",
        "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
        "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
    })
    return env


def run_submission(sub: Submission, timeout: float, memory_mb: int, threads: int,
                   sandbox: Sandbox | None = None) -> tuple[dict | None, list[dict]]:
    """Run one submission in its own worker, kernel and temp folder (removed, their processes killed, whatever
    happens; in the sandbox the folder is its tmpfs but for the shared files); return (run result or None, checks)."""
    root = Path(tempfile.mkdtemp(prefix="bai14-grade-"))
    if sandbox is None:
        for sub_dir in _SUB_DIRS:
            (root / sub_dir).mkdir()
    else:
        for name in _SANDBOX_FILES[1:]:
            (root / name).write_text("", encoding="utf-8")
    code_cells = [[i, cell_text(cell)] for i, cell in enumerate(sub.nb["cells"], start=1)
                  if cell.get("cell_type") == "code"]
    job = {"cells": code_cells, "timeout": timeout, "memory_mb": memory_mb,
           "pid_file": str(root / "kernel.pid"), "result_file": str(root / "result.json")}
    (root / "job.json").write_text(json.dumps(job), encoding="utf-8")
    proc = None
    try:
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", str(root / "job.json")]
        if sandbox is not None:
            command = sandbox.command(root, command)
        proc = subprocess.Popen(command, cwd=root if sandbox else root / "work",
                                env=kernel_env(root, threads, sandboxed=sandbox is not None),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        with _ACTIVE_LOCK:  # in the sandbox the kernel's pid is one of its own namespace: never signalled from here
            _ACTIVE[str(root)] = [proc, None if sandbox else root / "kernel.pid"]
        try:
            proc.wait(timeout=timeout + KERNEL_START_S + 30)
        except subprocess.TimeoutExpired:
            pass
        try:
            result = json.loads((root / "result.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            result = None  # the worker was killed or stopped before writing it
        return result, read_checks(root / "checks.jsonl")
    finally:
        if proc is not None:
            _stop(proc, None if sandbox else root / "kernel.pid")
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        with _ACTIVE_LOCK:
            _ACTIVE.pop(str(root), None)
        shutil.rmtree(root, ignore_errors=True)


def _stop(proc, pid_file: Path | None) -> None:
    """Kill the worker's process group and, outside the sandbox, the kernel's (its own session)."""
    _kill_group(proc.pid)
    try:
        _kill_group(int(pid_file.read_text(encoding="utf-8") or 0) if pid_file else 0)
    except (OSError, ValueError):
        pass


def read_checks(path: Path) -> list[dict]:
    """Return the check results a kernel logged (one JSON object a line; a broken line is skipped)."""
    out = []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("key"), str) and item.get("status") in _FROM_FEEDBACK:
            out.append(item)
    return out


# --------------------------------------------------------------------------- from results to rows


def _stop_text(stop: dict, timeout: float, memory_mb: int) -> str:
    where = f"ô {stop['cell']} ({stop['detail']})" if stop.get("cell") else ""
    if stop["reason"] == "timeout":
        return f"quá thời gian {timeout:g} s ở {where}: vòng lặp không dừng, hoặc code quá chậm"
    if stop["reason"] == "died":
        code = stop.get("exit")
        how = f"tín hiệu {-code}" if isinstance(code, int) and code < 0 else f"mã thoát {code}"
        why = (" (SIGKILL: hệ điều hành giết tiến trình khi máy hết bộ nhớ, hoặc chính code gửi tín hiệu này)"
               if code in (-9, 137) else " (SIGSEGV: crash trong code C/CUDA)" if code in (-11, 139) else "")
        return f"kernel dừng đột ngột ở {where}, {how}{why}"
    return f"kernel không khởi động được: {stop.get('detail', '')}"


def _error_text(error: dict, memory_mb: int) -> str:
    text = f"ô {error['cell']} ({error['line']}) báo lỗi {error['ename']}: {error['evalue']}".rstrip(": ")
    if error["ename"] == "MemoryError" or "can't allocate memory" in error["evalue"] \
            or "DefaultCPUAllocator" in error["evalue"]:
        text += f" — hết bộ nhớ (giới hạn khi chấm: {memory_mb} MiB)"
    return text


def rows_for(sub: Submission, result: dict | None, checks: list[dict], lessons: Mapping[str, Lesson],
             timeout: float, memory_mb: int) -> list[dict]:
    """Return the table rows of one submission: one per task of its lesson, then one for the notebook as a whole."""
    base = {"learner": sub.learner, "file": sub.path.name, "lesson": sub.lesson or "?"}
    if sub.problem:
        return [{**base, "task": NOTEBOOK_TASK, "title": "", "status": "error", "message": sub.problem}]
    lesson = lessons[sub.lesson]
    last = {c["key"]: c for c in checks if c.get("group") == lesson.group}
    code = [(i, cell_text(cell)) for i, cell in enumerate(sub.nb["cells"], start=1) if cell.get("cell_type") == "code"]
    errors = {e["cell"]: e for e in (result or {}).get("errors", [])}
    stop = {"reason": "lost", "cell": None} if result is None else result["stopped"]
    rows = []
    for key, title in lesson.tasks.items():
        row = {**base, "task": key, "title": title}
        cell = next((i for i, text in code if re.search(rf"\b{re.escape(key)}\.check\(", text)), None)
        if key in last:
            record = last[key]
            row.update(status=_FROM_FEEDBACK[record["status"]],
                       message="\n".join([*record.get("lines", []), *record.get("notes", [])]))
        elif cell is not None and cell in errors:
            row.update(status="error", message="ô chấm bài báo lỗi trước khi chấm: " + _error_text(errors[cell],
                                                                                                memory_mb))
        elif stop and (cell is None or stop.get("cell") is None or cell >= stop["cell"]):
            why = "kết quả bị mất: tiến trình chấm bị dừng" if stop["reason"] == "lost" else \
                _stop_text(stop, timeout, memory_mb)
            row.update(status="error", message="notebook dừng trước khi tới bài này: " + why)
        elif cell is None:
            row.update(status="not_done", message=f"không có ô nào gọi {key}.check(...)")
        else:
            row.update(status="not_done", message=f"ô {cell} có {key}.check(...) nhưng lệnh đó không chạy")
        rows.append(row)
    if result is None:
        status, parts = "error", [f"tiến trình chấm dừng mà không báo kết quả (quá {timeout:g} s + khởi động?)"]
    else:
        parts = [_stop_text(stop, timeout, memory_mb)] if stop else []
        parts += [_error_text(e, memory_mb) for e in result["errors"][:5]]
        if len(result["errors"]) > 5:
            parts.append(f"… và {len(result['errors']) - 5} ô lỗi nữa")
        status = "error" if parts else "ran"
        if not parts:
            parts.append(f"chạy hết {result['cells_run']} ô code, không ô nào lỗi, {result['seconds']:g} s")
        if result.get("dropped"):
            parts.append(f"(output dài: chỉ giữ {LOG_CHARS // 1000} nghìn ký tự đầu, bỏ {result['dropped']:,} ký tự)")
        if result.get("warning"):
            parts.append(result["warning"])
    rows.append({**base, "task": NOTEBOOK_TASK, "title": "", "status": status, "message": "\n".join(parts)})
    return rows


# --------------------------------------------------------------------------- writing the table


def write_csv(rows: Iterable[dict], path: Path) -> None:
    """Write the rows as CSV (UTF-8 with BOM, so spreadsheets show Vietnamese right)."""
    with open(path, "w", encoding="utf-8-sig", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_HEADER)
        for r in rows:
            writer.writerow([r["learner"], r["file"], r["lesson"], r["task"], r["title"], LABELS[r["status"]],
                             r["status"], r["message"]])


def write_html(rows: list[dict], path: Path, seconds: float, cpu: float) -> None:
    """Write an HTML page: a summary per learner and lesson, then every row with the checker's message."""
    e = html.escape
    summary: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        summary.setdefault((r["learner"], r["lesson"]), []).append(r)
    lines = ["<!doctype html><meta charset='utf-8'><title>Kết quả chấm bài</title><style>",
             "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:2em}",
             "td,th{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}",
             "td.msg{white-space:pre-wrap;font-family:monospace;font-size:90%;max-width:60em}",
             ".passed{background:#e6f6e6}.wrong{background:#fde8e8}.error{background:#fbe3c9}",
             ".not_done{background:#f3f3f3}</style><h1>Kết quả chấm bài</h1>",
             f"<p>{len({k[0] for k in summary})} học viên, {len(summary)} bài nộp, chấm trong {seconds:.0f} s "
             f"({cpu:.0f} s CPU). Mỗi notebook chạy từ trên xuống (như “Chạy tất cả”) bằng bộ chấm của khoá; output "
             "cũ trong file bị bỏ qua.</p>", "<h2>Tóm tắt</h2><table><tr><th>Học viên</th><th>Bài</th><th>Đạt</th>"
             "<th>Nhiệm vụ</th><th>Notebook</th></tr>"]
    for (learner, lesson), items in sorted(summary.items()):
        tasks = [r for r in items if r["task"] != NOTEBOOK_TASK]
        whole = next(r["status"] for r in items if r["task"] == NOTEBOOK_TASK)  # every file has this row
        cells = " ".join(f"<span class='{r['status']}' title='{e(r['title'])}'>{e(r['task'])} "
                         f"{e(LABELS[r['status']].split()[0])}</span>" for r in tasks)
        lines.append(f"<tr><td>{e(learner)}</td><td>{e(lesson)}</td><td>{sum(r['status'] == 'passed' for r in tasks)}"
                     f"/{len(tasks)}</td><td>{cells}</td><td class='{whole}'>{e(LABELS[whole])}</td></tr>")
    lines.append("</table><h2>Chi tiết</h2><table><tr>" + "".join(f"<th>{e(h)}</th>" for h in CSV_HEADER if h != "mã") + "</tr>")
    for r in rows:
        cells = [r["learner"], r["file"], r["lesson"], r["task"], r["title"], LABELS[r["status"]]]
        lines.append(f"<tr class='{r['status']}'>" + "".join(f"<td>{e(c)}</td>" for c in cells)
                     + f"<td class='msg'>{e(r['message'])}</td></tr>")
    path.write_text("\n".join([*lines, "</table>"]) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------- the command


def grade(folder: Path, out: Path, timeout: float = 120, memory_mb: int = 4096, jobs: int = 1,
          sandbox: str = "auto", disk_mb: int = DISK_MB) -> list[dict]:
    """Grade every file under `folder` as the command's options say; write grades.csv, grades.html and logs/ into
    `out` (left out of `folder` when inside it); return the rows."""
    if not folder.is_dir():
        raise GradeError(f"thư mục bài nộp không tồn tại: {folder}")
    for name, value, low in (("timeout", timeout, 1), ("memory_mb", memory_mb, 256), ("jobs", jobs, 1),
                             ("disk_mb", disk_mb, 16)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
            raise GradeError(f"{name} phải là một số ≥ {low}, không phải {value!r}")
    started, cpu_started = time.monotonic(), time.process_time()
    lessons = load_lessons()
    folder, out = folder.resolve(), out.resolve()
    box, line = prepare_sandbox(sandbox, int(disk_mb), hidden=(folder, out))
    subs = [read_submission(path, folder, lessons) for path in find_files(folder, exclude=out)]
    print(f"Chấm {len(subs)} file trong {folder} ({jobs} notebook cùng lúc, tối đa {timeout:g} s và "
          f"{memory_mb} MiB mỗi notebook)\n{line}", flush=True)
    threads = max(1, _cpus() // int(jobs))
    logs: dict[int, str] = {}
    worker_cpu: list[float] = []  # each worker's and its kernel's, as it reports them (a sandbox passes on none)
    done = [0]
    lock = threading.Lock()

    def one(index: int) -> list[dict]:
        sub = subs[index]
        t0 = time.monotonic()
        result, checks = (None, []) if sub.problem else run_submission(sub, timeout, int(memory_mb), threads, box)
        if result:
            logs[index] = result.pop("log", "")
            worker_cpu.append(result.get("cpu", 0))
        rows = rows_for(sub, result, checks, lessons, timeout, int(memory_mb))
        passed = sum(r["status"] == "passed" for r in rows)
        tasks = sum(r["task"] != NOTEBOOK_TASK for r in rows)
        with lock:
            done[0] += 1
            print(f"  [{done[0]}/{len(subs)}] {sub.learner} · {sub.path.name} · {sub.lesson or '?'}: "
                  f"đạt {passed}/{tasks} · {LABELS[rows[-1]['status']]} · {time.monotonic() - t0:.1f} s", flush=True)
        return rows

    pool = ThreadPoolExecutor(max_workers=int(jobs))
    try:
        per_file = list(pool.map(one, range(len(subs))))
    except BaseException:  # Ctrl+C: stop every running notebook now; each thread then removes its folder
        with _ACTIVE_LOCK:
            active = list(_ACTIVE.values())
        for proc, pid_file in active:
            _stop(proc, pid_file)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
    rows = [row for file_rows in per_file for row in file_rows]
    out.mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    for i, text in logs.items():
        slug = re.sub(r"[^\w.-]+", "_", f"{i + 1:03d}_{subs[i].learner}_{subs[i].path.stem}")[:80]
        (out / "logs" / f"{slug}.txt").write_text(text, encoding="utf-8")
    seconds, cpu = time.monotonic() - started, time.process_time() - cpu_started + sum(worker_cpu)
    write_csv(rows, out / "grades.csv")
    write_html(rows, out / "grades.html", seconds, cpu)
    print(f"Xong: {out / 'grades.csv'} · {out / 'grades.html'}\nCả lớp: {len(subs)} file, {seconds:.0f} s thời gian "
          f"thực, {cpu:.0f} s CPU ({'trong sandbox' if box else 'không sandbox'}).")
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) == 2 and argv[0] == "--worker":
        return worker_main(argv[1])
    parser = argparse.ArgumentParser(
        prog="bash tools/course.sh grade",
        description="Chấm cả lớp: chạy từng notebook học viên nộp bằng bộ chấm của khoá, ghi grades.csv và "
                    "grades.html. CẢNH BÁO: lệnh này chạy code của học viên (xem docs/INSTRUCTORS.md, “Chấm bài cả lớp”).")
    parser.add_argument("folder", type=Path, help="thư mục chứa các notebook học viên nộp")
    parser.add_argument("--out", type=Path, default=Path("grades"), help="nơi ghi kết quả (mặc định ./grades)")
    parser.add_argument("--timeout", type=float, default=120, help="giây tối đa cho mỗi notebook (mặc định 120)")
    parser.add_argument("--memory-mb", type=int, default=4096, help="MiB bộ nhớ tối đa mỗi kernel (mặc định 4096)")
    parser.add_argument("--jobs", type=int, default=max(1, _cpus() // 2),
                        help=f"số notebook chấm cùng lúc (mặc định {max(1, _cpus() // 2)}: nửa số nhân CPU)")
    parser.add_argument("--sandbox", choices=SANDBOX_MODES, default="auto",
                        help="auto (mặc định): chạy mỗi notebook trong sandbox bubblewrap nếu máy có (không mạng, "
                             "không thấy thư mục nhà của bạn, repo chỉ đọc), không có thì báo một dòng và chấm như "
                             "off; required: không có sandbox thì không chấm; off: không sandbox")
    parser.add_argument("--disk-mb", type=int, default=DISK_MB,
                        help=f"MiB mỗi notebook được ghi trong sandbox (mặc định {DISK_MB}; nằm trong bộ nhớ)")
    args = parser.parse_args(argv)
    here = Path(os.environ.get("COURSE_CALLER_CWD") or os.getcwd())  # course.sh runs this from the repository
    try:
        grade(here / args.folder, here / args.out, args.timeout, args.memory_mb, args.jobs, sandbox=args.sandbox,
              disk_mb=args.disk_mb)
    except GradeError as exc:
        print(f"grade: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

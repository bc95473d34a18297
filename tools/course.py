"""The course's commands: set up the environment, then open the course in JupyterLab or run the tests.

Standard library only, so any Python 3.10+ runs it before the environment exists; `bash tools/course.sh`
finds such a Python and runs this file (PowerShell: ``py -m tools.course lab``).

Usage: python -m tools.course lab|test|quick|check|site|nox|grade|python [ARGS]: tools/course.sh's header says what
each command does; `python ARGS` runs the environment's python.

Environment variables:
    PYTHON                 (course.sh only) the Python that creates the environment
    COURSE_SYSTEM_TORCH=1  reuse the torch of the Python running this script (a GPU image's CUDA torch): the
                           environment (.venv-system-torch) sees that Python's packages, and only the packages
                           of requirements.txt that Python lacks are installed (torch never)
    COURSE_VENV            the environment's folder (default .venv, or .venv-system-torch)
    COURSE_LAB_IP          the address JupyterLab listens on (default 127.0.0.1: this machine only)
    COURSE_LAB_PORT        its port (default: the first free one from 8888)
    COURSE_NO_BROWSER=1    never open a browser (automatic on Linux without DISPLAY / WAYLAND_DISPLAY)
    COURSE_TEST_WORKERS    test processes for `test` (default 2 without an NVIDIA GPU, 1 with one: GPU cells
                           measure speed and memory, so they run one at a time); pytest's own -n wins
    JUPYTER_TOKEN          the access token (default: a new random one at each start)
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tools import workspace

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "requirements.txt"
PYPROJECT = ROOT / "pyproject.toml"
STAMP = ".course-setup.sha256"
RECIPE = "2"  # bump when the set-up steps change in a way that needs them to run again
SUPPORTED = ((3, 10), (3, 13))  # the Pythons tests/test_requirements_resolve.py proves


USAGE = "usage: bash tools/course.sh lab|test|quick|check|site|nox|grade|python [args]   (PowerShell: py -m tools.course lab)"


class SetupError(RuntimeError):
    """A set-up step failed; the message says what to do."""


# --------------------------------------------------------------------------- where things are


def system_torch_requested(environ=os.environ) -> bool:
    """Return True when COURSE_SYSTEM_TORCH=1 asks to reuse the machine's torch."""
    value = environ.get("COURSE_SYSTEM_TORCH", "")
    if value not in ("", "0", "1"):
        raise SetupError(f"COURSE_SYSTEM_TORCH phải là 1 (dùng torch của máy này) hoặc 0, không phải {value!r}")
    return value == "1"


def venv_dir(system_torch: bool, environ=os.environ, root: Path = ROOT) -> Path:
    """Return the environment's folder: $COURSE_VENV, else .venv (.venv-system-torch when reusing torch)."""
    if environ.get("COURSE_VENV"):
        return Path(environ["COURSE_VENV"]).resolve()
    return root / (".venv-system-torch" if system_torch else ".venv")


def venv_python(venv: Path, os_name: str = os.name) -> Path:
    """Return the environment's python: Scripts/python.exe on Windows (Git Bash too), bin/python elsewhere."""
    return venv / "Scripts" / "python.exe" if os_name == "nt" else venv / "bin" / "python"


def wanted_stamp(system_torch: bool, requirements: Path = REQUIREMENTS, pyproject: Path = PYPROJECT) -> str:
    """Return the digest of everything the set-up depends on; the environment records it when set up."""
    digest = hashlib.sha256(f"recipe {RECIPE}\nsystem_torch {int(system_torch)}\n".encode())
    for path in (requirements, pyproject):
        digest.update(path.read_bytes())
    return digest.hexdigest()


# --------------------------------------------------------------------------- which requirements to install


def requirement_name(line: str) -> str | None:
    """Return the distribution name a requirements line asks for (normalised), or None for blanks/comments."""
    text = line.split("#", 1)[0].strip()
    if not text or text.startswith("-"):
        return None
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", text)
    return re.sub(r"[-_.]+", "-", match.group(0)).lower() if match else None


def _installed(name: str) -> bool:
    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def requirements_to_install(text: str, system_torch: bool, installed=_installed) -> list[str]:
    """Return requirements.txt's lines to install: all, or with `system_torch` those `installed` lacks, never torch."""
    lines = []
    for line in text.splitlines():
        name = requirement_name(line)
        if name is None:
            continue
        if system_torch and (name == "torch" or installed(name)):
            continue
        lines.append(line.split("#", 1)[0].strip())
    return lines


# --------------------------------------------------------------------------- setting up


def _run(cmd: list, what: str, hint: str = "", quiet: bool = False) -> None:
    """Run a set-up step; raise SetupError saying what failed (with its output when `quiet` held it back)."""
    proc = subprocess.run([str(c) for c in cmd], capture_output=quiet, text=True)
    if proc.returncode != 0:
        shown = f"\n{proc.stdout}{proc.stderr}" if quiet else ""
        raise SetupError(f"course.sh: {what} thất bại (mã {proc.returncode}). {hint}{shown}".strip())


def check_python(version_info=sys.version_info) -> str | None:
    """Return a warning when this Python is newer than the checked ones; raise SetupError when it is too old."""
    have = tuple(version_info[:2])
    if have < SUPPORTED[0]:
        raise SetupError(f"course.sh: cần Python 3.10 trở lên, đây là {have[0]}.{have[1]}. Cài Python mới hơn "
                         "(python.org; macOS: brew install python@3.12) rồi chạy lại, hoặc đặt PYTHON=/đường/dẫn.")
    if have > SUPPORTED[1]:
        return (f"⚠️ Python {have[0]}.{have[1]} chưa được kiểm tra (đã kiểm tra 3.10-3.13); nếu cài đặt lỗi, "
                "hãy dùng Python 3.12.")
    return None


def ensure_env(system_torch: bool, environ=os.environ) -> Path:
    """Create or update the course environment when its inputs changed; return its python."""
    venv = venv_dir(system_torch, environ)
    python = venv_python(venv)
    stamp = venv / STAMP
    want = wanted_stamp(system_torch)
    if python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8").strip() == want:
        return python
    warning = check_python()
    if warning:
        print(warning, file=sys.stderr)
    if system_torch and importlib.util.find_spec("torch") is None:
        raise SetupError(f"COURSE_SYSTEM_TORCH=1 nhưng {sys.executable} không có torch. Đặt PYTHON=<python có "
                         "torch CUDA của máy> rồi chạy lại.")
    print(f"⏳ Cài đặt môi trường khoá học trong {venv} (lần đầu vài phút)...", flush=True)
    if not python.exists():
        _run([sys.executable, "-m", "venv", *(["--system-site-packages"] if system_torch else []), venv],
             "tạo môi trường ảo", "Debian/Ubuntu: sudo apt install python3-venv.")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"])  # best effort (offline is fine)
    lines = requirements_to_install(REQUIREMENTS.read_text(encoding="utf-8"), system_torch)
    if lines:
        with tempfile.TemporaryDirectory() as tmp:
            wanted = Path(tmp, "requirements.txt")
            wanted.write_text("\n".join(lines) + "\n", encoding="utf-8")
            _run([python, "-m", "pip", "install", "-q", "-r", wanted], "pip install -r requirements.txt",
                 "Kiểm tra Internet (cần https://pypi.org) và phiên bản Python (3.10-3.13).")
    editable = [python, "-m", "pip", "install", "-q", "--no-deps", "-e", ROOT]
    if subprocess.run([str(c) for c in editable[:5] + ["--no-build-isolation"] + editable[5:]],
                      capture_output=True).returncode != 0:
        _run(editable, "cài lessons_lib", quiet=True)  # setuptools warns a lot
    stamp.write_text(want + "\n", encoding="utf-8")
    return python


def missing_test_packages(exists=os.path.exists, which=shutil.which) -> list[tuple[str, list[str]]]:
    """Return the Debian packages the tests use that this machine lacks: (what they are for, package names).

    Chromium runs the browser test; bubblewrap (`bwrap`) is the grading sandbox the hostile-submission tests
    check (tests/test_grade_sandbox.py). Without them those tests skip.
    """
    missing = []
    if not exists("/usr/bin/chromium"):
        missing.append(("test trình duyệt", ["chromium", "fonts-noto-color-emoji"]))
    if which("bwrap") is None:
        missing.append(("sandbox của lệnh chấm bài", ["bubblewrap"]))
    return missing


def ensure_test_packages(run=subprocess.run) -> None:
    """Install the missing test packages when running as root with apt: one `apt-get update`, then each group."""
    if not (sys.platform.startswith("linux") and hasattr(os, "geteuid") and os.geteuid() == 0
            and shutil.which("apt-get")):
        return
    missing = missing_test_packages()
    if not missing:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    updated = run(["apt-get", "update", "-qq"], env=env).returncode == 0
    for what, packages in missing:
        if not updated or run(["apt-get", "install", "-y", "-qq", *packages], env=env,
                              stdout=subprocess.DEVNULL).returncode != 0:
            print(f"course.sh: không cài được {' '.join(packages)}; {what} sẽ được bỏ qua", file=sys.stderr)


# --------------------------------------------------------------------------- JupyterLab


def headless(environ=os.environ, platform: str = sys.platform) -> bool:
    """Return True when no browser can be opened here (COURSE_NO_BROWSER=1, or Linux without a display)."""
    if environ.get("COURSE_NO_BROWSER") == "1":
        return True
    return platform.startswith("linux") and not (environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"))


def free_port(ip: str = "127.0.0.1", first: int = 8888, tries: int = 100) -> int:
    """Return the first port from `first` that can be bound on `ip`."""
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    for port in range(first, first + tries):
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((ip, port))
            except OSError:
                continue
            return port
    raise SetupError(f"course.sh: không còn cổng trống trong {first}-{first + tries - 1} trên {ip}: đặt COURSE_LAB_PORT")


def lab_url(ip: str, port: int, token: str) -> str:
    """Return the URL that opens the course (with its token) from this machine."""
    host = "127.0.0.1" if ip in ("0.0.0.0", "") else ("localhost" if ip == "::" else ip)
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}/lab?token={token}"


def lab_command(python: Path | str, root_dir: Path | str, ip: str, port: int, uid: int | None,
                no_browser: bool, extra: list[str] = ()) -> list[str]:
    """Return the JupyterLab command: serve `root_dir` on `ip`:`port` only (the printed URL must stay right).

    --allow-root only for uid 0 (None on Windows); `extra` are more JupyterLab arguments from the command line.
    """
    cmd = [str(python), "-m", "jupyterlab", f"--ServerApp.ip={ip}", f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0", f"--ServerApp.root_dir={root_dir}"]
    if uid == 0:
        cmd.append("--allow-root")
    if no_browser:
        cmd.append("--no-browser")
    return cmd + list(extra)


def wait_until_serving(proc: subprocess.Popen, base: str, token: str, timeout: float = 120.0) -> bool:
    """Return True once the server at `base` answers its status API, False when `proc` exits or time runs out."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # 127.0.0.1, never through a proxy
    request = urllib.request.Request(f"{base}/api/status", headers={"Authorization": f"token {token}"})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with opener.open(request, timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:  # URLError too: not listening yet
            pass
        time.sleep(0.2)
    return False


def lab(python: Path, extra: list[str], environ=os.environ) -> int:
    """Refresh the working copy, start JupyterLab, and print how to open it once it answers."""
    report = workspace.sync(ROOT / "notebooks", workspace.WORKSPACE)
    for line in report.messages():
        print(line)
    ip = environ.get("COURSE_LAB_IP", "127.0.0.1")
    port = int(environ["COURSE_LAB_PORT"]) if environ.get("COURSE_LAB_PORT") else free_port(ip)
    token = environ.get("JUPYTER_TOKEN") or secrets.token_hex(24)
    no_browser = headless(environ)
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    url = lab_url(ip, port, token)
    print(f"⏳ Đang khởi động JupyterLab trên cổng {port}...", flush=True)
    proc = subprocess.Popen(lab_command(python, workspace.WORKSPACE, ip, port, uid, no_browser, extra),
                            env={**environ, "JUPYTER_TOKEN": token})
    try:
        if not wait_until_serving(proc, url.split("/lab?", 1)[0], token):
            if proc.poll() is not None:
                return proc.returncode  # JupyterLab said why above
            print("⚠️ JupyterLab chưa trả lời sau 120 s; thử URL dưới đây sau ít phút.")
        rule = "=" * 78
        print(rule)
        print("Khoá học mở tại (dán vào trình duyệt nếu nó không tự mở):")
        print(f"    {url}")
        print(f"Bạn làm việc trên bản chép {workspace.WORKSPACE.name}/ (git bỏ qua); notebooks/ giữ nguyên.")
        if no_browser and ip in ("127.0.0.1", "localhost", "::1"):
            print(f"Máy từ xa? Trên máy của bạn: ssh -L {port}:127.0.0.1:{port} <máy-này>, rồi mở URL trên.")
        print("Dừng: Ctrl+C (hai lần).")
        print(rule, flush=True)
    except KeyboardInterrupt:
        pass  # JupyterLab got the Ctrl+C too and handles it
    while True:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            continue


def test_workers(args: list[str], environ=os.environ, nvidia_gpu: bool | None = None,
                 cpus: int | None = None) -> list[str]:
    """Return the pytest-xdist arguments `test` adds: 3 processes on a machine without an NVIDIA GPU, else none.

    Much of a test waits (kernels starting, torchrun, a browser, time limits), so on 2 cores a third process fills
    those waits (a fresh clone's suite: 472 s with 2 processes, 412 s with 3); each process's torch threads get
    their share of the CPUs (tools/run.py's share_cpus). With ``--dist loadgroup`` the root conftest.py keeps
    each test file in one process (a notebook's cells share its kernel), and files that share a cache or an
    environment (its ``SHARED_GROUPS``) in the same one.
    """
    if any(a.startswith(("-n", "--numprocesses", "--dist")) for a in args) or "no:xdist" in args:
        return []  # the caller chose
    if environ.get("COURSE_TEST_WORKERS"):
        value = environ["COURSE_TEST_WORKERS"]
        if not value.isdigit() or int(value) < 1:
            raise SetupError(f"COURSE_TEST_WORKERS phải là số nguyên >= 1, không phải {value!r}")
        workers = int(value)
    else:
        nvidia_gpu = shutil.which("nvidia-smi") is not None if nvidia_gpu is None else nvidia_gpu
        cpus = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1) \
            if cpus is None else cpus
        workers = 1 if nvidia_gpu or cpus < 2 else 3
    return ["-n", str(workers), "--dist", "loadgroup"] if workers > 1 else []


LESSON_FILE = re.compile(r"(?:course_src|notebooks(?:/solutions)?)/(\d\d)_[^/]*\.(?:md|ipynb)")


def changed_lessons(base: str = "main", root: Path = ROOT, run=subprocess.run) -> list[str]:
    """Return the numbers (NN) of the lessons whose source or notebook differs from `base`, committed or not."""
    def git(*args: str) -> list[str]:
        proc = run(["git", "-C", str(root), *args], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SetupError(f"course.sh quick: git {' '.join(args)} thất bại: {proc.stderr.strip()} "
                             f"(cần một bản clone git có nhánh {base})")
        return proc.stdout.splitlines()

    paths = [*git("diff", "--name-only", f"{base}...HEAD"), *git("diff", "--name-only", "HEAD"),
             *git("ls-files", "--others", "--exclude-standard")]
    return sorted({match.group(1) for path in paths if (match := LESSON_FILE.fullmatch(path))})


def quick(python: Path, args: list[str], lessons: list[str] | None = None, call=subprocess.call) -> int:
    """Run the tests not marked slow, then the changed lessons' notebooks; return the first failure's status."""
    lessons = changed_lessons() if lessons is None else lessons
    print(f"course.sh quick: bài đổi so với main: {', '.join(lessons) or 'không có'}", flush=True)
    status = call([str(python), "-m", "pytest", "-m", "not slow", *test_workers(args), *args])
    if lessons:
        notebooks = call([str(python), "-m", "pytest", "tests/test_rerun.py", "-k",
                          " or ".join(f"{n}_" for n in lessons), *args])
        status = status or notebooks
    return status


def _hand_over(cmd: list[str], env: dict) -> int:
    """Replace this process with `cmd` (POSIX), or run it and return its status (Windows)."""
    if os.name == "nt":
        return subprocess.call(cmd, env=env)
    os.execve(cmd[0], cmd, env)
    return 0  # pragma: no cover - execve does not return


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("lab", "test", "quick", "check", "site", "nox", "grade", "python"):
        print(USAGE, file=sys.stderr)
        return 2
    command, rest = argv[0], argv[1:]
    caller = os.getcwd()  # `grade` reads its folder arguments from where it was started
    os.chdir(ROOT)  # pytest's configuration and relative paths are the repository's, wherever this was started
    try:
        python = ensure_env(system_torch_requested())
        if command == "lab":
            return lab(python, rest)
        if command == "test":
            ensure_test_packages()
            return _hand_over([str(python), "-m", "pytest", *test_workers(rest), *rest], dict(os.environ))
        if command == "quick":
            return quick(python, rest)
        if command == "nox":
            # `python -m nox` from the root, not uv's `nox` script: the noxfile imports tools/, which only -m puts on
            # sys.path (the root); PYTHONPATH would leak the repository's lessons_lib into the rows' environments
            return _hand_over([str(python), "-m", "uv", "run", "--no-project", "--with", "nox", "python", "-m", "nox",
                               *rest], dict(os.environ))
        if command in ("check", "site", "grade"):
            module = {"check": "tools.precourse_check", "site": "tools.build_site", "grade": "tools.grade"}[command]
            env = {**os.environ, **({"COURSE_CALLER_CWD": caller} if command == "grade" else {})}
            return _hand_over([str(python), "-m", module, *rest], env)
        return _hand_over([str(python), *rest], dict(os.environ))
    except SetupError as exc:
        print(exc, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

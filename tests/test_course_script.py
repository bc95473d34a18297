"""tools/course.py and tools/course.sh: which environment, what gets installed, how JupyterLab is started."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools import course

ROOT = Path(__file__).resolve().parent.parent

REQUIREMENTS = (ROOT / "requirements.txt").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- the environment


def test_environment_folder_and_python_per_platform(tmp_path):
    assert course.venv_dir(False, environ={}, root=tmp_path) == tmp_path / ".venv"
    assert course.venv_dir(True, environ={}, root=tmp_path) == tmp_path / ".venv-system-torch"
    assert course.venv_dir(True, environ={"COURSE_VENV": str(tmp_path / "x")}, root=ROOT) == tmp_path / "x"
    assert course.venv_python(Path("v"), os_name="nt") == Path("v/Scripts/python.exe")  # Windows, Git Bash too
    assert course.venv_python(Path("v"), os_name="posix") == Path("v/bin/python")


def test_system_torch_switch_accepts_only_0_or_1():
    assert course.system_torch_requested({"COURSE_SYSTEM_TORCH": "1"}) is True
    assert course.system_torch_requested({}) is False and course.system_torch_requested({"COURSE_SYSTEM_TORCH": "0"}) is False
    with pytest.raises(course.SetupError, match="phải là 1"):
        course.system_torch_requested({"COURSE_SYSTEM_TORCH": "yes"})


def test_stamp_follows_the_inputs_and_the_mode(tmp_path):
    req, pyproject = tmp_path / "r.txt", tmp_path / "p.toml"
    req.write_text("torch==2.13.0\n", encoding="utf-8")
    pyproject.write_text("[project]\n", encoding="utf-8")
    first = course.wanted_stamp(False, req, pyproject)
    assert course.wanted_stamp(False, req, pyproject) == first
    assert course.wanted_stamp(True, req, pyproject) != first
    req.write_text("torch==2.13.1\n", encoding="utf-8")
    assert course.wanted_stamp(False, req, pyproject) != first


def test_every_requirement_is_installed_normally():
    lines = course.requirements_to_install(REQUIREMENTS, system_torch=False, installed=lambda name: True)
    assert "torch==2.13.0" in lines and any(line.startswith("numpy==") for line in lines)
    assert all("#" not in line for line in lines), "comments are dropped"


def test_reusing_the_machines_torch_installs_only_what_it_lacks():
    have = {"numpy", "matplotlib", "ipython", "ipykernel"}
    lines = course.requirements_to_install(REQUIREMENTS, system_torch=True, installed=lambda name: name in have)
    names = {course.requirement_name(line) for line in lines}
    assert "torch" not in names, "never install torch over the machine's own"
    assert not names & have, "keep the machine's packages, built to go with its torch"
    assert {"jupyterlab", "pytest", "uv"} <= names


@pytest.mark.parametrize("line, name", [("torch==2.13.0", "torch"), ('numpy==2.2.6; python_version < "3.11"', "numpy"),
                                        ("Jinja2==3.1.6  # x", "jinja2"), ("# comment", None), ("", None),
                                        ("-r other.txt", None), ("typing_extensions==4", "typing-extensions")])
def test_requirement_name(line, name):
    assert course.requirement_name(line) == name


def test_python_version_floor():
    assert course.check_python((3, 10, 0)) is None and course.check_python((3, 13, 1)) is None
    assert "3.14" in course.check_python((3, 14, 0))
    with pytest.raises(course.SetupError, match="3.10"):
        course.check_python((3, 9, 18))


# --------------------------------------------------------------------------- JupyterLab


def test_test_runs_two_processes_without_an_nvidia_gpu_and_one_with():
    assert course.test_workers([], environ={}, nvidia_gpu=False, cpus=2) == ["-n", "3", "--dist", "loadgroup"]
    assert course.test_workers([], environ={}, nvidia_gpu=False, cpus=16) == ["-n", "3", "--dist", "loadgroup"]
    assert course.test_workers([], environ={}, nvidia_gpu=True, cpus=16) == []  # GPU cells measure: one at a time
    assert course.test_workers([], environ={}, nvidia_gpu=False, cpus=1) == []


def test_test_workers_follow_the_variable_and_yield_to_pytests_own_options():
    assert course.test_workers([], environ={"COURSE_TEST_WORKERS": "4"}, nvidia_gpu=True) == ["-n", "4", "--dist",
                                                                                                "loadgroup"]
    assert course.test_workers([], environ={"COURSE_TEST_WORKERS": "1"}, nvidia_gpu=False, cpus=8) == []
    for args in (["-n", "3"], ["-n3"], ["--numprocesses=auto"], ["--dist", "load"], ["-p", "no:xdist"]):
        assert course.test_workers(["tests", *args], environ={}, nvidia_gpu=False, cpus=8) == [], args
    assert course.test_workers(["--nbval-lax", "-m", "not browser"], environ={}, nvidia_gpu=False, cpus=2)
    for bad in ("0", "two", "-1"):
        with pytest.raises(course.SetupError, match="COURSE_TEST_WORKERS phải là số nguyên"):
            course.test_workers([], environ={"COURSE_TEST_WORKERS": bad})


def test_quick_finds_the_lessons_changed_since_main_committed_staged_or_new(tmp_path):
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
                       cwd=tmp_path, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    for path in ("course_src/01_a.md", "course_src/02_b.md", "notebooks/solutions/03_c_solutions.ipynb",
                 "notebooks/04_d.ipynb", "tools/x.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("0\n", encoding="utf-8")
    git("add", "-A")
    git("commit", "-q", "-m", "main")
    assert course.changed_lessons(root=tmp_path) == []
    git("checkout", "-q", "-b", "work")
    (tmp_path / "course_src/01_a.md").write_text("1\n", encoding="utf-8")
    git("commit", "-q", "-am", "committed")
    (tmp_path / "notebooks/solutions/03_c_solutions.ipynb").write_text("1\n", encoding="utf-8")  # not staged
    (tmp_path / "tools/x.py").write_text("1\n", encoding="utf-8")  # not a lesson
    (tmp_path / "course_src/05_e.md").write_text("new\n", encoding="utf-8")  # untracked
    assert course.changed_lessons(root=tmp_path) == ["01", "03", "05"]
    with pytest.raises(course.SetupError, match="nhánh nope"):
        course.changed_lessons(base="nope", root=tmp_path)


def test_quick_runs_the_fast_tests_then_the_changed_lessons_notebooks(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_TEST_WORKERS", "1")
    calls = []
    assert course.quick(Path("py"), ["-x"], lessons=[], call=lambda cmd: calls.append(cmd) or 0) == 0
    assert calls == [["py", "-m", "pytest", "-m", "not slow", "-x"]] and "không có" in capsys.readouterr().out
    calls.clear()
    status = course.quick(Path("py"), ["-x"], lessons=["02", "11"], call=lambda cmd: calls.append(cmd) or len(calls) - 1)
    assert calls[1] == ["py", "-m", "pytest", "tests/test_rerun.py", "-k", "02_ or 11_", "-x"] and status == 1


def test_lab_command_allows_root_only_for_root_and_skips_the_browser_when_headless():
    as_root = course.lab_command("py", "/w", "127.0.0.1", 8888, uid=0, no_browser=True)
    assert as_root == ["py", "-m", "jupyterlab", "--ServerApp.ip=127.0.0.1", "--ServerApp.port=8888",
                       "--ServerApp.port_retries=0", "--ServerApp.root_dir=/w", "--allow-root", "--no-browser"]
    as_user = course.lab_command("py", "/w", "127.0.0.1", 8888, uid=1000, no_browser=False, extra=["--x"])
    assert "--allow-root" not in as_user and "--no-browser" not in as_user and as_user[-1] == "--x"
    assert "--allow-root" not in course.lab_command("py", "/w", "127.0.0.1", 1, uid=None, no_browser=False)


@pytest.mark.parametrize("environ, platform, expected", [
    ({}, "linux", True), ({"DISPLAY": ":0"}, "linux", False), ({"WAYLAND_DISPLAY": "wayland-0"}, "linux", False),
    ({}, "darwin", False), ({}, "win32", False), ({"DISPLAY": ":0", "COURSE_NO_BROWSER": "1"}, "linux", True),
])
def test_headless_detection(environ, platform, expected):
    assert course.headless(environ, platform) is expected


def test_waiting_for_jupyterlab_ends_when_it_exits():  # answering in time: tests/test_course_lab.py
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    exited.wait()
    assert course.wait_until_serving(exited, f"http://127.0.0.1:{course.free_port()}", "t", timeout=30) is False


def test_lab_url_of_any_and_ipv6_addresses():  # 127.0.0.1, free_port and waiting: tests/test_course_lab.py
    assert course.lab_url("0.0.0.0", 8890, "t") == "http://127.0.0.1:8890/lab?token=t"
    assert course.lab_url("::1", 8890, "t") == "http://[::1]:8890/lab?token=t"


# --------------------------------------------------------------------------- course.sh


def _sh(*args, env_extra=None):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), **(env_extra or {})}
    return subprocess.run(["bash", str(ROOT / "tools" / "course.sh"), *args], capture_output=True, text=True,
                          env=env, timeout=120)


needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on this machine")


@needs_bash
def test_course_sh_runs_course_py_and_says_how_to_use_it():
    proc = _sh("bogus", env_extra={"PYTHON": sys.executable})
    assert proc.returncode == 2 and "usage: bash tools/course.sh lab|test" in proc.stderr


@needs_bash
def test_course_sh_nox_loads_the_noxfile_which_imports_tools():
    proc = _sh("nox", "-l", env_extra={**os.environ, "PYTHON": sys.executable})  # the proxy and certificates uv needs
    assert proc.returncode == 0 and "matrix(py" in proc.stdout, proc.stdout[-1000:] + proc.stderr[-2000:]


@needs_bash
def test_course_sh_refuses_a_python_older_than_3_10(tmp_path):
    old = tmp_path / "python"
    old.write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")  # what the version check sees from Python 3.9
    old.chmod(0o755)
    proc = _sh("test", env_extra={"PYTHON": str(old)})
    assert proc.returncode == 1 and "cũ hơn Python 3.10" in proc.stderr
    only_old = tmp_path / "bin"  # a PATH whose only python3 is the old one
    only_old.mkdir()
    (only_old / "python3").symlink_to(old)
    (only_old / "dirname").symlink_to(shutil.which("dirname"))
    proc = subprocess.run([shutil.which("bash"), str(ROOT / "tools" / "course.sh"), "test"], capture_output=True,
                          text=True, env={"PATH": str(only_old)}, timeout=60)
    assert proc.returncode == 1 and "cần Python 3.10 trở lên" in proc.stderr


@needs_bash
def test_course_sh_is_bash_3_2_compatible():
    text = (ROOT / "tools" / "course.sh").read_text(encoding="utf-8")
    for feature in ("mapfile", "readarray", "${!", ",,}", "^^}", "declare -A", "coproc", "|&", "&>>"):
        assert feature not in text, f"{feature!r} does not exist in bash 3.2 (macOS)"

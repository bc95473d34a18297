"""The setup cell's install logic against a local git repository: with the pinned tag, without it, and with none.

The cell (tools/build_course.py SETUP_TEMPLATE, made with ``setup_cell_source(config, url="file://…")``) runs
without its ``%reload_ext`` line in a throw-away venv (no packages; pip from the course's environment on
PYTHONPATH) with ``PIP_TARGET``: pip installs into a temporary folder, and nothing touches the course's .venv.
The repository holds a tiny installable ``lessons_lib`` (an in-tree build backend: no index, no setuptools):
version 0.0.1 at the commit the tag names, 0.0.2 at the default branch's head.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pip
import pytest
from test_setup_cell import attempts

from tools import build_course

ROOT = Path(__file__).resolve().parent.parent

CONFIG = build_course.load_config()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="the throw-away venv's layout and symlink are POSIX")]
BACKEND = '''\
import os, zipfile
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = open("VERSION").read().strip()
    name = f"lessons_lib-{version}-py3-none-any.whl"
    info = f"lessons_lib-{version}.dist-info"
    files = {"lessons_lib/__init__.py": f"__version__ = {version!r}\\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\\nName: lessons_lib\\nVersion: {version}\\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\\nGenerator: toy\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}
    files[f"{info}/RECORD"] = "".join(f"{path},,\\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)
    return name
'''
PYPROJECT = '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false",
                           "-c", "tag.gpgsign=false", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def make_repo(folder: Path, tag: str | None) -> tuple[Path, str, str]:
    """Return a git repository of a toy lessons_lib, (the tagged commit, the head of its default branch)."""
    folder.mkdir()
    git(folder, "init", "-q", "-b", "main")
    (folder / "backend.py").write_text(BACKEND, encoding="utf-8")
    (folder / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    commits = []
    for version in ("0.0.1", "0.0.2"):
        (folder / "VERSION").write_text(version + "\n", encoding="utf-8")
        git(folder, "add", "-A")
        git(folder, "commit", "-q", "-m", version)
        commits.append(git(folder, "rev-parse", "HEAD"))
        if tag and version == "0.0.1":
            git(folder, "tag", tag)
    return folder, commits[0], commits[1]


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A throw-away venv's python: nothing installed; pip (the course's, read-only) comes in through PYTHONPATH."""
    folder = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder / "venv")], check=True)
    (folder / "pip-only").mkdir()
    (folder / "pip-only" / "pip").symlink_to(Path(pip.__file__).parent)
    return folder


def run_cell(venv: Path, url: str, tmp_path: Path, wheels: Path | None = None) -> tuple[subprocess.CompletedProcess, Path]:
    """Run the setup cell (no %reload_ext) installing from `url`; return the process and where pip installed."""
    code = build_course.setup_cell_source(CONFIG, url=url)
    cell = tmp_path / "cell.py"
    cell.write_text("\n".join(ln for ln in code.splitlines() if not ln.startswith("%")) + "\n", encoding="utf-8")
    target = tmp_path / "site"
    target.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PIP_TARGET=str(target), PYTHONPATH=os.pathsep.join([str(target), str(venv / "pip-only")]),
               PIP_NO_INDEX="1", PIP_CACHE_DIR=str(tmp_path / "cache"), PIP_DISABLE_PIP_VERSION_CHECK="1",
               LESSONS_WHEEL_DIR=str(wheels or tmp_path / "no-wheels"), GIT_TERMINAL_PROMPT="0")
    proc = subprocess.run([str(venv / "venv" / "bin" / "python"), str(cell)], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    return proc, target


def installed(target: Path) -> tuple[str, dict]:
    """Return the version of lessons_lib pip put in `target` and its direct_url.json."""
    (info,) = target.glob("lessons_lib-*.dist-info")
    return info.name.removesuffix(".dist-info").split("-")[1], json.loads((info / "direct_url.json").read_text())


def test_with_the_tag_the_cell_installs_the_pinned_ref(venv, tmp_path):
    repo, tagged, _ = make_repo(tmp_path / "repo", tag=CONFIG.ref)
    proc, target = run_cell(venv, repo.as_uri(), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert attempts(proc.stdout) == [f"git+{repo.as_uri()}@{CONFIG.ref}"] and "⚠️" not in proc.stdout
    version, origin = installed(target)
    assert (version, origin["vcs_info"]["commit_id"]) == ("0.0.1", tagged)


def test_without_the_tag_the_cell_installs_the_default_branch_and_says_which_commit(venv, tmp_path):
    repo, _, head = make_repo(tmp_path / "repo", tag=None)
    proc, target = run_cell(venv, repo.as_uri(), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert attempts(proc.stdout) == [f"git+{repo.as_uri()}@{CONFIG.ref}", f"git+{repo.as_uri()}"]
    said = [ln for ln in proc.stdout.splitlines() if ln.startswith("⚠️")]
    assert said == [f"⚠️ Không cài được bản {CONFIG.ref}, nên đã cài nhánh mặc định của kho, commit {head[:12]}"]
    version, origin = installed(target)
    assert (version, origin["vcs_info"]["commit_id"]) == ("0.0.2", head)
    assert "❌" not in proc.stdout and not proc.stderr.strip(), proc.stderr


def test_without_a_repository_the_cell_falls_back_to_the_attached_wheel(venv, tmp_path, monkeypatch):
    folder = tmp_path / "input" / "course-wheel"
    folder.mkdir(parents=True)
    (folder / "VERSION").write_text("0.0.3\n", encoding="utf-8")
    monkeypatch.chdir(folder)  # the toy backend reads its VERSION there
    backend: dict = {}
    exec(BACKEND, backend)
    wheel = folder / backend["build_wheel"](str(folder))
    url = (tmp_path / "no-such-repo").as_uri()
    proc, target = run_cell(venv, url, tmp_path, wheels=tmp_path / "input")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert attempts(proc.stdout) == [f"git+{url}@{CONFIG.ref}", f"git+{url}", str(wheel)]
    assert "⚠️" not in proc.stdout and "❌" not in proc.stdout
    assert installed(target)[1]["url"] == wheel.as_uri()


def test_without_a_repository_or_a_wheel_the_cell_stops_with_the_two_ways_out(venv, tmp_path):
    url = (tmp_path / "no-such-repo").as_uri()
    proc, target = run_cell(venv, url, tmp_path)
    assert proc.returncode == 1 and "Dừng lại: thiếu lessons_lib." in proc.stderr
    assert attempts(proc.stdout) == [f"git+{url}@{CONFIG.ref}", f"git+{url}"]
    assert "❌ Không cài được lessons_lib" in proc.stdout and "⚠️" not in proc.stdout
    assert "Settings → Internet → On" in proc.stdout and "xác minh số điện thoại" in proc.stdout, "way out 1: Internet on"
    assert "lessons_lib-*.whl" in proc.stdout and "Add Input" in proc.stdout, "way out 2: attach the wheel"
    assert not list(target.iterdir()), "nothing installed"
    assert "Traceback" not in proc.stderr

"""The notebooks' setup cell, run for real where lessons_lib is missing and there is no network.

The cell is taken from a generated notebook and run by IPython 7.34 in a Colab row of the version matrix
(`nox -s colab`: its own environment, BAI14_COLAB_ROW=1, the row's wheel in BAI14_WHEEL) after lessons_lib is
uninstalled there, as on a fresh Colab/Kaggle runtime; elsewhere those tests skip. "No network"
is made by pointing http_proxy/https_proxy (which both pip and git obey) at a closed local port: the cell's
first attempts, `pip install git+https://github.com/...` at the pinned ref then at the default branch, fail at once,
as on a Kaggle notebook with Internet off. tests/test_setup_fallback.py runs the same logic against a local git
repository (with the tag, without it, none) anywhere.
`LESSONS_WHEEL_DIR` points the wheel lookup at a temporary folder instead of /kaggle/input.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tools import build_course, colab_pins, course

ROOT = Path(__file__).resolve().parent.parent

NOTEBOOKS = sorted((ROOT / "notebooks").rglob("*.ipynb"))
MAX_SETUP_LINES = 21
_DRIVER = """
import json, sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
result = shell.run_cell(open(sys.argv[1], encoding="utf-8").read())
error = result.error_before_exec or result.error_in_exec
print("CELL_RESULT", json.dumps({"error": type(error).__name__ if error else None,
                                  "loaded": sorted(shell.extension_manager.loaded)}), flush=True)
if error is None:
    shell.run_cell("%%gpu\\nprint('GPU BODY RAN')")
"""


def _setup_cell() -> str:
    nb = json.loads(NOTEBOOKS[0].read_text(encoding="utf-8"))
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code" and "Ô cài đặt" in "".join(c["source"])]
    assert len(cells) == 1, f"{NOTEBOOKS[0].name} must have exactly one setup cell"
    return cells[0]


def run_setup_cell_offline(python: Path, wheel_dir: Path, tmp_path: Path) -> tuple[str, dict, float]:
    """Run the setup cell in IPython under `python` with no network; return stdout, the cell result, seconds."""
    cell = tmp_path / "setup_cell.py"
    cell.write_text(_setup_cell(), encoding="utf-8")
    dead = f"http://127.0.0.1:{course.free_port()}"  # nothing listens there
    env = {k: v for k, v in os.environ.items()
           if k.lower() != "no_proxy" and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(LESSONS_WHEEL_DIR=str(wheel_dir), http_proxy=dead, https_proxy=dead, HTTP_PROXY=dead,
               HTTPS_PROXY=dead, ALL_PROXY=dead, GIT_TERMINAL_PROMPT="0")
    start = time.perf_counter()
    proc = subprocess.run([str(python), "-c", _DRIVER, str(cell)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=600)
    seconds = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines() if line.startswith("CELL_RESULT")]
    assert proc.returncode == 0 and len(lines) == 1, f"the driver failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout, json.loads(lines[0].split(" ", 1)[1]), seconds


def attempts(stdout: str) -> list[str]:
    """Return what the cell tried to install from, in order."""
    return [line.split(" từ ", 1)[1].strip() for line in stdout.splitlines() if line.startswith("⏳ Đang cài lessons_lib từ")]


def installed(python: Path) -> dict[str, str]:
    """Return {name: version} of what is installed for `python` (a fresh process: no stale metadata)."""
    return colab_pins.read_installed(subprocess.run([str(python), "-c", colab_pins.LIST_INSTALLED], capture_output=True,
                                                    text=True, check=True, cwd=Path.home()).stdout)


def origin(python: Path) -> dict:
    """Return pip's direct_url.json record of how lessons_lib is installed for `python`."""
    code = "import importlib.metadata as m; print(m.distribution('lessons_lib').read_text('direct_url.json'))"
    return json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True,
                                     cwd=Path.home()).stdout)


@pytest.fixture
def bare_colab_env():
    """This Colab row's environment with lessons_lib uninstalled (the row's wheel reinstalled afterwards)."""
    if os.environ.get("BAI14_COLAB_ROW") != "1":
        pytest.skip("runs in a Colab row of the matrix: nox -s colab")
    python, pip = Path(sys.executable), [sys.executable, "-m", "pip", "-q"]
    subprocess.run([*pip, "uninstall", "-y", "lessons_lib"], check=True, cwd=Path.home())
    yield python, installed(python)
    subprocess.run([*pip, "uninstall", "-y", "lessons_lib"], cwd=Path.home())
    subprocess.run([*pip, "install", "--no-deps", os.environ["BAI14_WHEEL"]], check=True, cwd=Path.home())


# --------------------------------------------------------------------------- the cell's text


def test_setup_cell_is_short():  # every notebook holds it: tests/test_course_build.py's lint
    assert len(build_course.setup_cell_source(build_course.load_config()).splitlines()) <= MAX_SETUP_LINES


def test_setup_cell_installs_the_pinned_release_and_nothing_else():  # noxfile.py installs with the same SETUP_PIP
    assert not {"-e", "--upgrade", "-U"} & set(build_course.SETUP_PIP), "no editable install, no upgrades"
    config = build_course.load_config()
    cell = build_course.setup_cell_source(config)
    assert f'repo = "git+https://github.com/{config.repo}"' in cell, "install from [tool.course]'s repo"
    assert f'[repo + "@{config.ref}", repo, *sorted(' in cell, "its pinned ref first, then its default branch"
    assert 'os.environ.get("LESSONS_WHEEL_DIR", "/kaggle/input")' in cell and "recursive=True" in cell


@pytest.mark.parametrize("ref", ["v0.2.0", "0123456789abcdef0123456789abcdef01234567"])
def test_check_ref_accepts_the_release_tag_or_a_commit(ref):
    assert build_course.check_ref(ref, "0.2.0") == ref


@pytest.mark.parametrize("ref, why", [("main", "v0.2.0"), ("v0.1.0", "v0.2.0"), ("0.2.0", "v0.2.0"),
                                      ("0123456789abcdef", "40-hex"), ("0123456789ABCDEF0123456789ABCDEF01234567", "40-hex")])
def test_check_ref_refuses_branches_other_versions_and_short_commits(ref, why):
    with pytest.raises(ValueError, match=why):
        build_course.check_ref(ref, "0.2.0")


def test_package_version_needs_a_version_line(tmp_path):
    init = tmp_path / "__init__.py"
    init.write_text('"""No version here."""\n', encoding="utf-8")
    with pytest.raises(ValueError, match="__version__"):
        build_course.package_version(init)


def test_load_config_refuses_a_moving_branch(tmp_path):
    (tmp_path / "lessons_lib").mkdir()
    (tmp_path / "lessons_lib" / "__init__.py").write_text('__version__ = "1.2.3"\n', encoding="utf-8")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.course]\nrepo = "o/r"\nbranch = "main"\nref = "main"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="v1.2.3"):
        build_course.load_config(pyproject)
    pyproject.write_text('[tool.course]\nrepo = "o/r"\nbranch = "main"\nref = "v1.2.3"\n', encoding="utf-8")
    assert build_course.load_config(pyproject).ref == "v1.2.3"


# --------------------------------------------------------------------------- the cell, run offline


@pytest.mark.colab_env
def test_offline_the_cell_installs_the_newest_working_wheel_it_finds(bare_colab_env, tmp_path):
    python, before = bare_colab_env
    wheel = Path(os.environ["BAI14_WHEEL"])
    inputs = tmp_path / "input"
    # Kaggle datasets nest files in folders; two broken "wheels" newer than the real one must be tried first
    # (newest version first, 0.10 after 0.9 numerically, whatever the folder names), then the real one.
    for folder, name in (("a-broken", "lessons_lib-99.10.0-py3-none-any.whl"),
                         ("b-broken", "lessons_lib-99.9.0-py3-none-any.whl")):
        (inputs / folder).mkdir(parents=True)
        (inputs / folder / name).write_bytes(b"not a wheel")
    real = inputs / "z-course-wheel" / "v1" / wheel.name
    real.parent.mkdir(parents=True)
    shutil.copy2(wheel, real)

    stdout, result, seconds = run_setup_cell_offline(python, inputs, tmp_path)

    config = build_course.load_config()
    assert attempts(stdout) == [f"git+https://github.com/{config.repo}@{config.ref}",
                                f"git+https://github.com/{config.repo}", str(inputs / "a-broken" / "lessons_lib-99.10.0-py3-none-any.whl"),
                                str(inputs / "b-broken" / "lessons_lib-99.9.0-py3-none-any.whl"), str(real)]
    assert result["error"] is None and "❌" not in stdout, stdout
    assert "lessons_lib.notebook" in result["loaded"]
    assert "GPU BODY RAN" not in stdout and "Bỏ qua ô này" in stdout, "the %%gpu marker must work on IPython 7.34"
    after = installed(python)
    assert set(after) - set(before) == {"lessons-lib"} and all(after[k] == v for k, v in before.items()), \
        "the setup cell must install lessons_lib and change nothing else"
    assert origin(python)["url"] == real.as_uri()
    assert seconds < 180, f"the offline setup cell took {seconds:.0f} s"

"""The course in Colab's conditions: Colab's pinned notebook stack, lessons_lib installed as the setup cell
does, and every notebook run top to bottom there with a kernel that is that environment's python.

The environment (envs/colab-pins.txt, Python 3.11, the tested torch) is built by tools/colab_env.py the first
time (a few minutes) and cached under ~/.cache/bai14-course/. Skip those tests with `-m "not colab_env"`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import torch

from lessons_lib.errors import explain

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import colab_env  # noqa: E402

colab = pytest.mark.colab_env  # the tests that build or use the environment
NOTEBOOKS = colab_env.all_notebooks()
# What the kernel reports about itself, checked against the pins file.
KERNEL_STACK = ("ipython", "ipykernel", "ipywidgets", "jupyter_client", "matplotlib", "torch")


class _NotebookTimes:
    """Collects each notebook's wall time and prints them at the end of the pytest run."""

    name = "colab_env_notebook_times"

    def __init__(self) -> None:
        self.ready_s: float | None = None
        self.rows: list[tuple[str, float, bool, list]] = []

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.rows and self.ready_s is None:
            return
        terminalreporter.section("Colab-pinned environment (envs/colab-pins.txt)")
        if self.ready_s is not None:
            terminalreporter.write_line(f"environment ready (built or cached) in {self.ready_s:.1f} s")
        for name, wall, ok, stderr in self.rows:
            terminalreporter.write_line(f"{name:<58} {wall:6.1f} s  {'ok' if ok else 'FAILED'}")
            for index, line in stderr:  # what a learner on Colab would see in red: worth a look
                terminalreporter.write_line(f"    stderr in cell {index}: {line[:100]}")
        if self.rows:
            total = sum(row[1] for row in self.rows)
            terminalreporter.write_line(f"notebooks: {total:.1f} s for {len(self.rows)}")


@pytest.fixture(scope="module")
def times(request) -> _NotebookTimes:
    manager = request.config.pluginmanager
    plugin = manager.get_plugin(_NotebookTimes.name)
    if plugin is None:
        plugin = _NotebookTimes()
        manager.register(plugin, _NotebookTimes.name)
    return plugin


@pytest.fixture(scope="module")
def colab_python(times) -> Path:
    start = time.perf_counter()
    python = colab_env.ensure_env(log=lambda line: print(line, file=sys.stderr))
    times.ready_s = time.perf_counter() - start
    return python


# --------------------------------------------------------------------------- the pins file (no environment needed)


def test_pins_file_pins_the_colab_notebook_stack():
    pins = colab_env.read_pins()
    assert pins["ipython"] == "7.34.0" and pins["ipykernel"] == "6.17.1"
    assert pins["ipywidgets"] == "7.7.1" and pins["widgetsnbextension"] == "3.6.10"
    assert pins["jupyter-client"] == "7.4.9" and pins["matplotlib"] == "3.10.0"
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    tested_torch = next(line.split("==")[1].strip() for line in requirements.splitlines() if line.startswith("torch=="))
    assert pins["torch"].split("+")[0] == tested_torch.split("+")[0], "the Colab-pinned env must use the tested torch"
    head = colab_env.PINS.read_text(encoding="utf-8")[:1500]
    assert "googlecolab/backend-info" in head and "retrieved 20" in head, "the pins file must name source and date"


@pytest.mark.parametrize("pinned, installed, ok", [
    ("2.13.0", "2.13.0+cpu", True), ("2.13.0", "2.13.0", True), ("2.13.0+cpu", "2.13.0+cpu", True),
    ("2.13.0+cpu", "2.13.0", False), ("2.13.0", "2.13.1+cpu", False), ("2.13.0", None, False),
    ("2.13.0+cpu", "2.13.0+cu128", False)])
def test_pin_matches_follows_pep440_local_labels(pinned, installed, ok):
    assert colab_env.pin_matches(pinned, installed) is ok


def test_read_pins_rejects_lines_that_do_not_pin(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("# comment\nJinja2==3.1.6  # note\n\ntorch==2.13.0+cpu\n", encoding="utf-8")
    assert colab_env.read_pins(good) == {"jinja2": "3.1.6", "torch": "2.13.0+cpu"}
    for bad_line, message in (("numpy>=2", "name==version"), ("numpy", "name==version"),
                              ("numpy==2.0.2\nNumPy==2.0.2", "pinned twice")):
        bad = tmp_path / "bad.txt"
        bad.write_text(bad_line + "\n", encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            colab_env.read_pins(bad)


def test_normalize_follows_pep503():
    assert colab_env.normalize("Jinja2") == "jinja2"
    assert colab_env.normalize("jupyter_client") == colab_env.normalize("Jupyter.Client") == "jupyter-client"
    with pytest.raises(ValueError, match="distribution name"):
        colab_env.normalize("  ")
    with pytest.raises(TypeError, match="distribution name"):
        colab_env.normalize(None)


def test_cache_dir_and_child_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("BAI14_CACHE", str(tmp_path / "cache"))
    assert colab_env.cache_dir() == tmp_path / "cache"
    assert colab_env.neutral_cwd() == tmp_path / "cache" / "cwd" and (tmp_path / "cache" / "cwd").is_dir()
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("VIRTUAL_ENV", str(ROOT / ".venv"))
    env = colab_env.clean_environ(EXTRA="1")
    assert "PYTHONPATH" not in env and "VIRTUAL_ENV" not in env and env["EXTRA"] == "1"


def test_find_python_says_what_to_do_without_a_matching_python(monkeypatch):
    monkeypatch.setattr(colab_env, "PYTHON_VERSION", (3, 99))
    monkeypatch.setenv("BAI14_COLAB_PYTHON", sys.executable)
    colab_env.find_python.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="BAI14_COLAB_PYTHON"):
            colab_env.find_python()
    finally:
        colab_env.find_python.cache_clear()


def test_find_python_takes_the_version_to_find():
    colab_env.find_python.cache_clear()
    try:
        here = colab_env.find_python(sys.version_info[:2])
        probe = subprocess.run([here, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True)
        assert probe.stdout.strip() == str(tuple(sys.version_info[:2]))
        with pytest.raises(RuntimeError, match=r"no Python 3\.99 found.*pyenv install 3\.99"):
            colab_env.find_python((3, 99))
    finally:
        colab_env.find_python.cache_clear()


@pytest.mark.parametrize("repeat", [0, "2", True])
def test_run_notebook_rejects_a_bad_repeat(repeat):
    with pytest.raises(ValueError, match="repeat must be an int >= 1"):
        colab_env.run_notebook(sys.executable, NOTEBOOKS[0], repeat=repeat)


@pytest.mark.parametrize("environ", [["COLAB_GPU"], {"COLAB_GPU": 0}])
def test_run_notebook_rejects_an_environ_that_is_not_str_to_str(environ):
    with pytest.raises(TypeError, match="environ must be a dict of str to str"):
        colab_env.run_notebook(sys.executable, NOTEBOOKS[0], environ=environ)


def test_colab_runtime_env_makes_the_course_see_colab(monkeypatch):
    from lessons_lib.platforms import detect_platform

    for name, value in colab_env.COLAB_RUNTIME_ENV.items():
        monkeypatch.setenv(name, value)
    assert detect_platform() == "colab" and colab_env.COLAB_RUNTIME_ENV["COLAB_GPU"] == "", "a CPU runtime"
    assert "replica" in colab_env.COLAB_RUNTIME_ENV["COLAB_RELEASE_TAG"], "never passed off as a real Colab release"


def test_run_notebook_rejects_what_is_not_a_notebook(tmp_path):
    with pytest.raises(ValueError, match=r"existing \.ipynb"):
        colab_env.run_notebook(sys.executable, tmp_path / "missing.ipynb")
    (tmp_path / "x.txt").write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match=r"existing \.ipynb"):
        colab_env.run_notebook(sys.executable, tmp_path / "x.txt")


# --------------------------------------------------------------------------- the environment itself


@colab
def test_environment_holds_exactly_the_pinned_packages(colab_python):
    installed = colab_env.installed_versions(colab_python)
    installed.pop("lessons-lib", None)
    pins = colab_env.read_pins()
    drift = {name: (pins.get(name), installed.get(name)) for name in sorted(set(pins) | set(installed))
             if name not in pins or not colab_env.pin_matches(pins[name], installed.get(name))}
    assert not drift, f"pins file vs environment (pinned, installed): {drift}"
    check = subprocess.run([str(colab_python), "-m", "pip", "check"], capture_output=True, text=True,
                           cwd=colab_env.neutral_cwd(), env=colab_env.clean_environ())
    assert check.returncode == 0, f"the pinned packages' requirements conflict:\n{check.stdout}{check.stderr}"


@colab
def test_lessons_lib_is_installed_from_a_wheel_not_editable(colab_python):
    origin = colab_env.lessons_lib_origin(colab_python)
    assert origin is not None, "lessons_lib is not installed in the Colab-pinned environment"
    assert origin.get("url", "").endswith(".whl") and "archive_info" in origin, f"installed from {origin}"
    assert not origin.get("dir_info", {}).get("editable", False)


@colab
def test_installing_lessons_lib_installs_or_upgrades_nothing_else(colab_python):
    wheel = colab_env.cached_wheel()
    with colab_env.locked():
        colab_env.uninstall_lessons_lib(colab_python)
        try:
            record = colab_env.install_like_setup_cell(colab_python, wheel)
        finally:
            if not colab_env.lessons_lib_installed(colab_python):
                colab_env.install_like_setup_cell(colab_python, wheel)
    with pytest.raises(ValueError, match="already installed"):
        colab_env.install_like_setup_cell(colab_python, wheel)  # it measures from a lessons_lib-free state only
    assert record["planned"] == ["lessons-lib"], f"pip's dry run plans more than lessons_lib: {record['planned']}"
    assert list(record["changed"]) == ["lessons-lib"], f"installing lessons_lib changed: {record['changed']}"
    assert record["changed"]["lessons-lib"][0] is None
    assert len(record["before"]) > 50 and record["before"]["torch"] == record["after"]["torch"]


# The notebooks learners open on Colab. A solutions notebook is its lesson plus answer code that uses the same APIs;
# it runs under nbval and twice per kernel in the regular environment, and on Colab's package set in the version
# matrix (tools/version_matrix.py), so running it here too would cost ~100 s of every test command for little.
LEARNER_NOTEBOOKS = [p for p in NOTEBOOKS if "solutions" not in p.relative_to(ROOT / "notebooks").parts]


@colab
@pytest.mark.parametrize("notebook", LEARNER_NOTEBOOKS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_notebook_runs_top_to_bottom_in_colab_env(colab_python, times, notebook):
    result = colab_env.run_notebook(colab_python, notebook)
    times.rows.append((notebook.relative_to(ROOT).as_posix(), result["wall_s"], result["error"] is None,
                       result["stderr"]))
    assert result["error"] is None, f"{notebook.name} failed in the Colab-pinned environment:\n{result['error']}"
    probe = result["probe"]
    assert probe is not None, "the kernel did not report itself after the last cell"
    assert probe["executable"] == str(colab_python), "the kernel must be the Colab-pinned environment's python"
    site_packages = str(colab_python.parent.parent / "lib")
    assert probe["lessons_lib"].startswith(site_packages), f"the kernel imported {probe['lessons_lib']}, not the wheel"
    pins = colab_env.read_pins()
    for package in KERNEL_STACK:
        assert colab_env.pin_matches(pins[colab_env.normalize(package)], probe[package]), \
            f"kernel runs {package} {probe[package]}"


_FEATURE_CELLS = [
    ("from lessons_lib import i18n\ni18n.set_language('vi')", []),
    ("%reload_ext lessons_lib.notebook", []),  # the setup cell's last line, run twice as learners do
    ("%reload_ext lessons_lib.notebook", []),
    ("%%gpu\nprint('GPU BODY RAN')", []),
    ("%%gpu 2\nprint('GPU BODY RAN')", []),
    ("import torch\ntorch.ones(2, device='meta') + torch.ones(2)", ["raises-exception"]),
    ("import ipywidgets as w\nfrom lessons_lib.quiz import FEEDBACK_CLASS, choice\n"
     "q = choice('2 + 2 = ?', ['3', '4'], 1, '2 + 2 = 4.')\nbox = q.widget()\n"
     "walk = lambda x: [x] + [d for c in getattr(x, 'children', ()) for d in walk(c)]\n"
     "feedback = next(x for x in walk(box) if FEEDBACK_CLASS in x._dom_classes)\n"
     "for b in [x for x in walk(box) if isinstance(x, w.Button)]:\n"
     "    b._handle_button_msg(None, {'event': 'click'}, [])\n"
     "    print('CLICK', b.button_style, feedback.value)", []),
    ("q", []),
]


@colab
def test_lessons_lib_features_work_on_colabs_ipython_and_ipywidgets(colab_python, tmp_path):
    """%%gpu, the hint under a traceback and the quiz buttons, in a kernel of IPython 7.34 / ipywidgets 7.7.1."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src, metadata={"tags": tags}) for src, tags in _FEATURE_CELLS]
    source, executed = tmp_path / "features.ipynb", tmp_path / "features.out.ipynb"
    nbformat.write(nb, source)
    result = colab_env.run_notebook(colab_python, source, save_to=executed)
    assert result["error"] is None, result["error"]
    cells = nbformat.read(executed, as_version=4).cells

    def stdout(i):
        return "".join(o.get("text", "") for o in cells[i].outputs if o.get("name") == "stdout")

    for i in (1, 2):  # a re-run of the setup cell's %reload_ext prints the banner again, no "already loaded"
        assert "torch" in stdout(i) and "already loaded" not in stdout(i), stdout(i)
    for i in (3, 4):
        assert "GPU BODY RAN" not in stdout(i) and "Bỏ qua ô này" in stdout(i), stdout(i)
    with pytest.raises(RuntimeError) as caught:
        torch.ones(2, device="meta") + torch.ones(2)
    hint = explain(caught.value)
    assert hint, "explain() must know the meta/CPU device mismatch"
    errors = [o for o in cells[5].outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "RuntimeError", "the traceback must stay and stop Run all"
    assert hint in stdout(5), f"the hint under the traceback is missing:\n{stdout(5)}"
    clicks = [line for line in stdout(6).splitlines() if line.startswith("CLICK")]
    assert len(clicks) == 2 and clicks[0].startswith("CLICK danger ❌") and clicks[1].startswith("CLICK success ✅")
    shown = [o for o in cells[7].outputs if o.output_type in ("display_data", "execute_result")]
    assert shown and "application/vnd.jupyter.widget-view+json" in shown[0].data, "the quiz must show as a widget"

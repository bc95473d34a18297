"""The version matrix (tools/version_matrix.py): fast tests with fakes, and the real run behind a switch.

The real run builds one environment per combination (several GB each, minutes the first time) and runs every
notebook and the unit tests there. Those tests carry the marker `matrix` and are skipped unless BAI14_MATRIX=1,
so no `-m` expression of the default test command can pull them in:
    BAI14_MATRIX=1 .venv/bin/python -m pytest tests/test_version_matrix.py -m matrix
(BAI14_MATRIX_COMBOS=py3.12-torch2.11.0,... picks combinations; `bash tools/course.sh matrix` is the same run
as a command, with a results file and table.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (the version matrix runs it): pytest brings tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import version_matrix as vm  # noqa: E402

RUN_MATRIX = os.environ.get("BAI14_MATRIX") == "1"


# --------------------------------------------------------------------------- combinations


def test_combinations_cover_colab_the_declared_floor_and_the_newest():
    ids = [combo.id for combo in vm.COMBOS]
    assert len(ids) == len(set(ids))
    assert "py3.12-torch2.11.0" in ids, "Colab today: Python 3.12 with torch 2.11"
    assert "py3.12-torch2.8.0" in ids and "py3.13-torch2.14.1" in ids
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    floor = next(dep for dep in project["dependencies"] if dep.startswith("torch"))
    floor_version = floor.split(">=")[1].strip()
    python_floor = project["requires-python"].split(">=")[1].strip()
    oldest = min(vm.COMBOS, key=lambda c: vm.Version(c.torch))
    assert oldest.torch.startswith(floor_version + "."), f"the oldest torch run must be the declared floor {floor}"
    assert all(vm.Version(c.python) >= vm.Version(python_floor) for c in vm.COMBOS)
    assert any(c.python == python_floor for c in vm.COMBOS), f"the declared Python floor {python_floor} must run"


def test_the_colab_rows_run_as_on_colab_and_the_others_do_not():
    colab = {combo.id for combo in vm.COMBOS if combo.colab}
    assert colab == {"py3.12-torch2.11.0", "py3.12-torch2.8.0"}


@pytest.mark.parametrize("facts, kind", [
    ({"cuda": "13.0", "hip": None, "cuda_available": False}, "cuda-no-gpu"),
    ({"cuda": None, "hip": None, "cuda_available": False, "mps_available": False}, "cpu-build"),
    ({"cuda": "12.6", "cuda_available": True}, "cuda"),
    ({"cuda": None, "cuda_available": False, "mps_available": True}, "mps"),
])
def test_machine_kind_of_a_rows_torch(facts, kind):
    assert vm.machine_kind(facts) == kind


def _fake_run(outputs, error=None, seen=None):
    def run_notebook(python, path, repeat=1, save_to=None, environ=None):
        import nbformat

        if seen is not None:
            seen.append(environ)
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(device)", outputs=outputs)])
        nb.cells[0].metadata["course"] = {"expect": [[["cuda-no-gpu"], "device: cpu"]]}
        nbformat.write(nb, save_to)
        return {"notebook": str(ROOT / "notebooks" / "01.ipynb"), "wall_s": 1.0, "error": error, "stderr": []}
    return run_notebook


def test_a_row_fails_a_notebook_whose_outputs_break_the_lessons_promise(monkeypatch):
    import nbformat

    seen = []
    good = [nbformat.v4.new_output("stream", name="stdout", text="device: cpu\n")]
    monkeypatch.setattr(vm.colab_env, "run_notebook", _fake_run(good, seen=seen))
    row = vm.run_checked_notebook("python", ROOT / "notebooks" / "01.ipynb", 2, "cuda-no-gpu", colab=True)
    assert row["ok"] and row["problems"] == [] and row["notebook"] == "notebooks/01.ipynb"
    bad = [nbformat.v4.new_output("stream", name="stdout", text="device: cuda\n"),
           nbformat.v4.new_output("stream", name="stderr", text="W1201 00:00:00.0 1 x.py:1] No CUDA runtime\n")]
    monkeypatch.setattr(vm.colab_env, "run_notebook", _fake_run(bad, seen=seen))
    row = vm.run_checked_notebook("python", ROOT / "notebooks" / "01.ipynb", 2, "cuda-no-gpu", colab=False)
    assert not row["ok"] and row["error"] is None and len(row["problems"]) == 2
    assert seen == [vm.colab_env.COLAB_RUNTIME_ENV, None], "only a Colab row gets Colab's environment variables"
    monkeypatch.setattr(vm.colab_env, "run_notebook", _fake_run(bad, error="ZeroDivisionError"))
    row = vm.run_checked_notebook("python", ROOT / "notebooks" / "01.ipynb", 1, "cuda-no-gpu", colab=False)
    assert not row["ok"] and row["problems"] == [], "a notebook that raised is reported by its error"


def test_combo_validates_and_names_itself():
    combo = vm.Combo("3.12", "2.11.0", "Colab")
    assert combo.id == "py3.12-torch2.11.0" and combo.python_version == (3, 12)
    with pytest.raises(ValueError, match="like '3.12'"):
        vm.Combo("312", "2.11.0", "x")
    with pytest.raises(ValueError, match="like '2.11.0'"):
        vm.Combo("3.12", "latest", "x")


def test_find_combos_picks_by_id_in_matrix_order():
    assert vm.find_combos(None) == list(vm.COMBOS) == vm.find_combos([])
    picked = vm.find_combos(["py3.13-torch2.14.1", "py3.12-torch2.11.0"])
    assert [c.id for c in picked] == ["py3.12-torch2.11.0", "py3.13-torch2.14.1"]
    with pytest.raises(ValueError, match="choose among: py3.12-torch2.11.0"):
        vm.find_combos(["py3.9-torch1.0"])


# --------------------------------------------------------------------------- pins, pip isolation, keys


def test_isolate_pip_drops_local_sources_and_config_but_keeps_how_to_connect():
    environ = {"PIP_FIND_LINKS": "/opt/wheels", "PIP_CONSTRAINT": "/etc/c.txt", "PIP_INDEX_URL": "http://x",
               "PIP_CERT": "/etc/ssl/ca.pem", "PIP_DEFAULT_TIMEOUT": "180", "HOME": "/root"}
    removed = vm.isolate_pip(environ)
    assert removed == ["PIP_CONSTRAINT", "PIP_FIND_LINKS", "PIP_INDEX_URL"]
    assert environ == {"PIP_CERT": "/etc/ssl/ca.pem", "PIP_DEFAULT_TIMEOUT": "180", "HOME": "/root",
                       "PIP_CONFIG_FILE": os.devnull}


def test_tool_pins_come_from_requirements(tmp_path):
    tools = vm.tool_pins()
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    assert set(tools) == {"pytest", "nbval"} and f"pytest=={tools['pytest']}" in requirements
    bad = tmp_path / "requirements.txt"
    bad.write_text("pytest==9.0\n", encoding="utf-8")
    with pytest.raises(ValueError, match="must pin nbval"):
        vm.tool_pins(bad)


def test_combo_pins_swap_torch_and_declared_pins():
    pins = {"torch": "2.13.0+cpu", "numpy": "2.0.2", "pip": "24.1.2"}
    swap = vm.Swap("numpy", "2.0.2", "2.1.0", "no cp313 wheel")
    combo = vm.Combo("3.13", "2.14.1", "x", swaps=(swap,))
    assert vm.combo_pins(combo, pins) == {"torch": "2.14.1", "numpy": "2.1.0", "pip": "24.1.2"}
    plain = vm.Combo("3.12", "2.8.0", "x")
    assert vm.combo_pins(plain, pins, [swap]) == {"torch": "2.8.0", "numpy": "2.1.0", "pip": "24.1.2"}
    assert pins["torch"] == "2.13.0+cpu", "the caller's pins are not modified"
    with pytest.raises(ValueError, match="pinned package other than torch"):
        vm.combo_pins(plain, pins, [vm.Swap("scipy", "1", "2", "x")])
    with pytest.raises(ValueError, match="must pin torch"):
        vm.combo_pins(plain, {"numpy": "2.0.2"})


def test_requirements_text_and_key():
    text = vm.requirements_text({"torch": "2.8.0", "numpy": "2.0.2"}, {"pytest": "9.2.0"})
    assert text == "numpy==2.0.2\ntorch==2.8.0\npytest==9.2.0\n"
    with pytest.raises(ValueError, match="numpy"):
        vm.requirements_text({"numpy": "2.0.2"}, {"numpy": "2.1.0"})
    combo = vm.COMBOS[0]
    key = vm.combo_key(combo, "3.12.1 (main)", text)
    assert len(key) == 16 and key == vm.combo_key(combo, "3.12.1 (main)", text)
    assert key != vm.combo_key(combo, "3.12.2 (main)", text)
    assert key != vm.combo_key(combo, "3.12.1 (main)", text.replace("2.0.2", "2.1.0"))
    assert key != vm.combo_key(vm.COMBOS[1], "3.12.1 (main)", text)


# --------------------------------------------------------------------------- wheels


def test_wheel_tags_expand_compressed_tag_sets():
    tags = vm.wheel_tags("markupsafe-3.0.3-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl")
    assert tags == {"cp312-cp312-manylinux2014_x86_64", "cp312-cp312-manylinux_2_17_x86_64"}
    assert vm.wheel_tags("six-1.17.0-py2.py3-none-any.whl") == {"py2-none-any", "py3-none-any"}
    assert vm.wheel_tags("triton-3.0.0-1-cp311-cp311-manylinux2014_x86_64.whl") == {"cp311-cp311-manylinux2014_x86_64"}
    with pytest.raises(ValueError, match="not a wheel"):
        vm.wheel_tags("numpy-2.0.2.tar.gz")


def test_link_wheels_links_what_fits_and_keeps_what_is_there(tmp_path):
    source, dest = tmp_path / "dl" / "py3.12", tmp_path / "dest"
    source.mkdir(parents=True)
    for name in ("six-1.17.0-py2.py3-none-any.whl", "torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl",
                 "torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl"):
        (source / name).write_bytes(b"wheel " + name.encode())
    dest.mkdir()
    (dest / "six-1.17.0-py2.py3-none-any.whl").write_bytes(b"already here")
    tags = {"cp312-cp312-manylinux_2_28_x86_64", "py3-none-any"}
    linked = vm.link_wheels([tmp_path / "dl", tmp_path / "missing"], dest, tags)
    assert linked == ["torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl"]
    assert (dest / linked[0]).stat().st_ino == (source / linked[0]).stat().st_ino, "a hard link, not a copy"
    assert (dest / "six-1.17.0-py2.py3-none-any.whl").read_bytes() == b"already here"
    assert not (dest / "torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl").exists()


_PIP_DOWNLOAD = """Collecting six==1.17.0 (from -r r.txt (line 1))
  File was already downloaded /c/w/six-1.17.0-py2.py3-none-any.whl
Collecting torch==2.8.0 (from -r r.txt (line 2))
  Downloading torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl (887.9 MB)
Saved ./w/torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl
  File was already downloaded /c/w/six-1.17.0-py2.py3-none-any.whl
Successfully downloaded six torch
"""
_NO_WHEEL = """ERROR: Ignored the following yanked versions: 2.4.0
ERROR: Could not find a version that satisfies the requirement numpy==2.0.2 (from versions: 2.1.0rc1, 2.1.0, 2.1.1, 2.3.0rc1)
ERROR: No matching distribution found for numpy==2.0.2
"""
_OFFLINE = """WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError("<pip._vendor.urllib3.connection.HTTPSConnection object>: Failed to establish a new connection: [Errno -3] Temporary failure in name resolution")': /simple/numpy/
ERROR: Could not find a version that satisfies the requirement numpy==2.0.2 (from versions: none)
ERROR: No matching distribution found for numpy==2.0.2
"""


def test_pip_output_parsers():
    assert vm.pip_files(_PIP_DOWNLOAD) == ["six-1.17.0-py2.py3-none-any.whl",
                                          "torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl"]
    assert vm.missing_pins(_NO_WHEEL) == [("numpy", "2.0.2", ["2.1.0rc1", "2.1.0", "2.1.1", "2.3.0rc1"])]
    assert vm.missing_pins(_OFFLINE) == [("numpy", "2.0.2", [])]
    assert vm.closest_release("2.0.2", ["2.1.0rc1", "2.1.1", "2.1.0", "1.26.4", "junk"]) == ("2.1.0", "newer")
    assert vm.closest_release("3.6.1", ["3.2.1", "3.4.2", "3.4.1", "3.7rc1"]) == ("3.4.2", "older")
    assert vm.closest_release("2.0.2", ["2.0.2", "2.3.0rc1"]) is None


def test_download_failure_says_what_was_needed_and_where_from_in_both_languages():
    combo = vm.COMBOS[0]
    needed = Path("/cache/matrix-wheels/x/requirements.txt")
    message = str(vm.download_failed(combo, "https://pypi.org/simple", needed, _OFFLINE))
    for part in ("Không tải được gói", "Cần: các gói trong /cache/matrix-wheels/x/requirements.txt (torch==2.11.0",
                 "Could not download", "Needed: the packages in", "https://pypi.org/simple", "BAI14_MATRIX_WHEELS",
                 "python3.12 -m pip download -d", "Temporary failure in name resolution"):
        assert part in message, part
    other = str(vm.download_failed(combo, "https://pypi.org/simple", needed, "ResolutionImpossible"))
    assert "ResolutionImpossible" in other and "BAI14_MATRIX_WHEELS" not in other


class _FakePip:
    """Stands in for `pip download`: fails once per listed missing pin, then 'saves' what the requirements name."""

    def __init__(self, outputs: list[str]):
        self.outputs, self.calls = list(outputs), []

    def __call__(self, cmd, **kwargs):
        self.calls.append(cmd)
        folder = Path(cmd[cmd.index("-d") + 1])
        requirements = Path(cmd[cmd.index("-r") + 1]).read_text(encoding="utf-8")
        if self.outputs:
            return subprocess.CompletedProcess(cmd, 1, "", self.outputs.pop(0))
        saved = []
        for line in requirements.split():
            name, version = line.split("==")
            wheel = folder / f"{name}-{version}-py3-none-any.whl"
            wheel.write_bytes(b"fake")
            saved.append(f"Saved {wheel}")
        return subprocess.CompletedProcess(cmd, 0, "\n".join(saved) + "\n", "")


def test_ensure_wheels_swaps_a_pin_without_wheel_prunes_and_then_reuses(tmp_path, monkeypatch):
    monkeypatch.setenv("BAI14_CACHE", str(tmp_path / "cache"))
    fake = _FakePip([_NO_WHEEL])
    monkeypatch.setattr(vm.subprocess, "run", fake)
    monkeypatch.setattr(vm, "interpreter_tags", lambda python: ["py3-none-any"])
    source = tmp_path / "dl"
    source.mkdir()
    (source / "unneeded-1.0-py3-none-any.whl").write_bytes(b"x")
    folder = tmp_path / "wheels" / "py3.13-torch2.14.1-key"
    combo = vm.Combo("3.13", "2.14.1", "x")
    pins = {"torch": "2.13.0+cpu", "numpy": "2.0.2"}
    lines = []
    manifest = vm.ensure_wheels(combo, "python3.13", folder, pins, {"pytest": "9.2.0"}, "https://pypi.org/simple",
                                [source], log=lines.append)
    assert manifest["swaps"] == [{"name": "numpy", "pinned": "2.0.2", "version": "2.1.0", "reason":
                                  "numpy 2.0.2 has no wheel for Python 3.13; 2.1.0 is the oldest newer release that has one"}]
    assert sorted(p.name for p in folder.glob("*.whl")) == sorted(manifest["files"]) == [
        "numpy-2.1.0-py3-none-any.whl", "pytest-9.2.0-py3-none-any.whl", "torch-2.14.1-py3-none-any.whl"]
    assert (folder / "requirements.txt").read_text(encoding="utf-8") == "numpy==2.1.0\ntorch==2.14.1\npytest==9.2.0\n"
    assert any("swap: numpy 2.0.2 -> 2.1.0" in line for line in lines)
    assert len(fake.calls) == 2 and "--only-binary" in fake.calls[0] and "https://pypi.org/simple" in fake.calls[0]
    again = vm.ensure_wheels(combo, "python3.13", folder, pins, {"pytest": "9.2.0"}, "https://pypi.org/simple", [source])
    assert again == manifest and len(fake.calls) == 2, "a complete wheel folder is reused without pip"


def test_ensure_wheels_without_network_raises_the_clear_message(tmp_path, monkeypatch):
    monkeypatch.setenv("BAI14_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(vm.subprocess, "run", _FakePip([_OFFLINE]))
    monkeypatch.setattr(vm, "interpreter_tags", lambda python: ["py3-none-any"])
    with pytest.raises(vm.MatrixError, match="BAI14_MATRIX_WHEELS") as caught:
        vm.ensure_wheels(vm.COMBOS[0], "python3.12", tmp_path / "w", {"torch": "2.13.0", "numpy": "2.0.2"},
                         {"pytest": "9.2.0"}, "https://pypi.org/simple", [])
    assert "torch==2.11.0" in str(caught.value) and str(tmp_path / "w" / "requirements.txt") in str(caught.value)
    assert not (tmp_path / "w" / "manifest.json").exists()


def test_ensure_wheels_refuses_to_swap_torch(tmp_path, monkeypatch):
    monkeypatch.setenv("BAI14_CACHE", str(tmp_path / "cache"))
    no_torch = _NO_WHEEL.replace("numpy==2.0.2", "torch==2.4.1")
    monkeypatch.setattr(vm.subprocess, "run", _FakePip([no_torch]))
    monkeypatch.setattr(vm, "interpreter_tags", lambda python: ["py3-none-any"])
    with pytest.raises(vm.MatrixError, match="torch==2.4.1 has no wheel for Python 3.13"):
        vm.ensure_wheels(vm.Combo("3.13", "2.4.1", "x"), "python3.13", tmp_path / "w",
                         {"torch": "2.13.0", "numpy": "2.0.2"}, {"pytest": "9.2.0"}, "https://pypi.org/simple", [])


# --------------------------------------------------------------------------- results


def test_installed_drift_and_build_name():
    assert vm.installed_drift({"numpy": "2.0.2", "pip": "24.1.2"}, {"numpy": "2.0.2", "pip": "24.2"}) == {
        "pip": ("24.1.2", "24.2")}
    assert vm.installed_drift({"ipython": "7.34.0"}, {}) == {"ipython": ("7.34.0", None)}
    assert vm.build_name({"cuda": "13.0", "hip": None}) == "CUDA 13.0"
    assert vm.build_name({"cuda": None, "hip": "6.4"}) == "ROCm 6.4"
    assert vm.build_name({"cuda": None, "hip": None}) == "CPU"


def test_parse_junit_counts_and_names_failures():
    xml = ('<testsuites><testsuite tests="5" failures="1" errors="1" skipped="1">'
           '<testcase classname="tests.test_a" name="test_ok"/>'
           '<testcase classname="tests.test_a" name="test_bad"><failure message="assert 1 == 2&#10;more">tb</failure></testcase>'
           '<testcase classname="tests.test_b" name="test_err"><error message="">ImportError: x</error></testcase>'
           '</testsuite></testsuites>')
    counts = vm.parse_junit(xml)
    assert {k: counts[k] for k in ("passed", "failed", "errors", "skipped")} == {
        "passed": 2, "failed": 1, "errors": 1, "skipped": 1}
    assert counts["failures"] == ["tests.test_a::test_bad: assert 1 == 2 | more", "tests.test_b::test_err: ImportError: x"]


def _record(combo_id="py3.12-torch2.11.0", ok=True, swaps=(), checked=True):
    checks = {"output_checks": True, "kind": "cuda-no-gpu", "colab_environ": combo_id.startswith("py3.12")} if checked else {}
    return {"id": combo_id, "who": "Colab", "date": "2026-12-01", "ok": ok, "repeat": 2, "cpus": 2, **checks,
            "checkout": {"commit": "abc123def456", "uncommitted": ["notebooks/03.ipynb"] if swaps else []},
            "python": "3.12.1", "torch": "2.11.0+cu130", "build": "CUDA 13.0", "cuda_available": False,
            "swaps": list(swaps), "lessons_lib_install": {"ok": True},
            "notebooks": [{"notebook": "notebooks/01.ipynb", "ok": True, "wall_s": 20.4},
                          {"notebook": "notebooks/02.ipynb", "ok": ok, "wall_s": 10.0}],
            "unit_tests": {"passed": 700, "failed": 0 if ok else 2, "errors": 0, "skipped": 9, "wall_s": 120.2},
            "loadavg": [3.2, 5.9], "wall_s": 300}


def test_markdown_table_shows_each_combination_and_how_it_was_measured():
    swap = {"name": "numpy", "pinned": "2.0.2", "version": "2.1.0", "reason": "r"}
    data = {"combos": {"py3.12-torch2.11.0": _record(),
                       "py3.13-torch2.14.1": _record("py3.13-torch2.14.1", ok=False, swaps=[swap]),
                       "py3.10-torch2.14.1": _record("py3.10-torch2.14.1", checked=False),
                       "py3.11-torch2.4.1": {"id": "py3.11-torch2.4.1", "who": "floor", "error": "no network\nmore"}}}
    table = vm.markdown_table(data)
    header, rule, *rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert header.startswith("| Python | torch (bản build) |") and rule.startswith("| --- |") and len(rows) == 4
    assert "đầu ra đúng lời bài" in header
    assert rows[0] == ("| 3.12.1 | 2.11.0+cu130 (CUDA 13.0, không có driver) | Colab (2026-06), runtime CPU | 2/2 "
                       "(như Colab) | 700 / 0 / 9 | 30 s · 120 s | — |"), "the label comes from COMBOS, the numbers from the run"
    assert "1/2 ❌ |" in rows[1] and "700 / 2 / 9 ❌" in rows[1] and "numpy 2.0.2 → 2.1.0" in rows[1]
    assert "2/2 (chỉ kiểm không lỗi, chưa kiểm đầu ra)" in rows[2], "a record from before the output checks says so"
    assert "**lỗi:** no network |" in rows[3]
    assert "`tools/output_checks.py`" in table and "(ở đây `cuda-no-gpu`)" in table and "COLAB_RELEASE_TAG" in table
    assert "2026-12-01" in table and "2 lõi" in table and "3–6" in table and "2 lần" in table
    assert "(commit `?`, `abc123def456` cộng thay đổi chưa commit ở `notebooks/03.ipynb`)" in table
    assert "test_ruff_finds_no_syntax_newer_than_python310" in table, "what the matrix leaves out is said"
    with pytest.raises(TypeError, match="combos"):
        vm.markdown_table([])


def test_checkout_state_names_the_commit_and_uncommitted_files(tmp_path):
    state = vm.checkout_state()
    assert state["commit"] and len(state["commit"]) == 12 and isinstance(state["uncommitted"], list)
    assert vm.checkout_state(tmp_path) == {"commit": None, "uncommitted": []}, "no git: nothing to name"


def test_results_merge_per_combination_in_matrix_order(tmp_path):
    path = tmp_path / "results.json"
    assert vm.load_results(path) == {"combos": {}}
    vm.save_results([_record("py3.13-torch2.14.1")], path)
    data = vm.save_results([_record("py3.12-torch2.11.0"), _record("py3.13-torch2.14.1", ok=False)], path)
    assert list(data["combos"]) == ["py3.12-torch2.11.0", "py3.13-torch2.14.1"]
    assert data["combos"]["py3.13-torch2.14.1"]["ok"] is False and vm.load_results(path) == data
    path.write_text("[]", encoding="utf-8")
    with pytest.raises(ValueError, match="combos"):
        vm.load_results(path)


def test_replace_readme_table_needs_both_markers():
    text = f"intro\n{vm.TABLE_START}\nold\n{vm.TABLE_END}\nrest\n"
    assert vm.replace_readme_table(text, "| new |") == f"intro\n{vm.TABLE_START}\n| new |\n{vm.TABLE_END}\nrest\n"
    with pytest.raises(ValueError, match="markers"):
        vm.replace_readme_table("no markers here", "| new |")


def test_readme_table_is_the_committed_results():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    expected = vm.replace_readme_table(readme, vm.markdown_table(vm.load_results(vm.RESULTS)))
    assert readme == expected, "README's version table is stale: run `python tools/version_matrix.py table --readme`"
    data = vm.load_results(vm.RESULTS)
    assert set(data["combos"]) == {combo.id for combo in vm.COMBOS}, "the results must cover every combination"
    assert all(record["ok"] for record in data["combos"].values()), "the README shows only a run that passed"


def test_main_list_table_and_run_with_a_fake_combination(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BAI14_CACHE", str(tmp_path / "cache"))
    assert vm.main(["list"]) == 0
    assert "py3.12-torch2.11.0" in capsys.readouterr().out
    results = tmp_path / "results.json"
    isolated = []
    monkeypatch.setattr(vm, "isolate_pip", lambda environ: isolated.append(True) or [])
    runs = []

    def fake_run(combo, **kwargs):
        runs.append((combo.id, kwargs["repeat"], kwargs["unit_tests"]))
        return _record(combo.id, ok=combo.id != "py3.12-torch2.8.0")

    monkeypatch.setattr(vm, "run_combo", fake_run)
    assert vm.main(["--combo", "py3.12-torch2.11.0", "--repeat", "1", "--results", str(results)]) == 0
    assert isolated and runs == [("py3.12-torch2.11.0", 1, True)]
    assert vm.main(["run", "--combo", "py3.12-torch2.8.0", "--no-unit-tests", "--results", str(results)]) == 1
    assert runs[-1] == ("py3.12-torch2.8.0", 2, False)
    capsys.readouterr()
    assert vm.main(["table", "--results", str(results)]) == 0
    out = capsys.readouterr().out
    assert out.count("2.11.0+cu130") == 2 and "1/2 ❌" in out
    with pytest.raises(SystemExit):
        vm.main(["--combo", "py2.7-torch0.1"])


# --------------------------------------------------------------------------- the real run (BAI14_MATRIX=1)


def _chosen() -> list:
    wanted = [name for name in os.environ.get("BAI14_MATRIX_COMBOS", "").split(",") if name]
    return vm.find_combos(wanted)


@pytest.mark.matrix
@pytest.mark.skipif(not RUN_MATRIX, reason="the real version matrix runs only with BAI14_MATRIX=1 (slow)")
@pytest.mark.parametrize("combo", _chosen(), ids=lambda c: c.id)
def test_every_notebook_and_unit_test_passes_in_the_combination(combo, monkeypatch):
    monkeypatch.setattr(os, "environ", dict(os.environ))
    vm.isolate_pip(os.environ)
    record = vm.run_combo(combo, repeat=int(os.environ.get("BAI14_MATRIX_REPEAT", "2")), log=print)
    assert "error" not in record, record.get("error")
    assert record["lessons_lib_install"]["ok"], f"installing lessons_lib changed: {record['lessons_lib_install']}"
    failed = [row for row in record["notebooks"] if not row["ok"]]
    assert not failed, "\n\n".join(f"{row['notebook']}:\n" + (row["error"] or "\n".join(row["problems"]))
                                     for row in failed)
    tests = record["unit_tests"]
    assert tests["failed"] + tests["errors"] == 0, "\n".join(tests["failures"])
    banner, report, gpu_cell = (cell["shows"] for cell in record["learner_view"])
    assert record["torch"].split("+")[0] == combo.torch and record["python"].startswith(combo.python + ".")
    assert "torch " + record["torch"] in banner and "Kết luận:" in report
    if not record["cuda_available"]:
        assert "Bỏ qua ô này" in gpu_cell and "GPU BODY RAN" not in gpu_cell
        assert "[stderr]" not in banner + report + gpu_cell, "a learner without GPU sees no warning in red"


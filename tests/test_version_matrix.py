"""The version matrix's rows, record and table (tools/version_matrix.py); `nox -s matrix` runs the rows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.version import Version

from tools import version_matrix as vm

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (a matrix row runs it): pytest brings tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_combinations_are_distinct_and_run_the_declared_floors():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    floor = next(dep for dep in project["dependencies"] if dep.startswith("torch"))
    floor_version = floor.split(">=")[1].strip()
    python_floor = project["requires-python"].split(">=")[1].strip()
    oldest = min(vm.COMBOS, key=lambda c: Version(c.torch))
    assert oldest.torch.startswith(floor_version + "."), f"the oldest torch run must be the declared floor {floor}"
    assert all(Version(c.python) >= Version(python_floor) for c in vm.COMBOS)
    assert any(c.python == python_floor for c in vm.COMBOS), f"the declared Python floor {python_floor} must run"


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


COLAB, CPU, KAGGLE, FLOOR, NEWEST, PY310 = (combo.id for combo in vm.COMBOS)


def _record(combo_id=COLAB, ok=True, swaps=(), checked=True, platform=None):
    platform = platform or ("colab" if combo_id == COLAB else None)
    checks = {"output_checks": True, "kind": "cuda-no-gpu", "platform": platform} if checked else {}
    return {"id": combo_id, "who": "Colab", "date": "2026-12-01", "ok": ok, "repeat": 2, "cpus": 2, **checks,
            "checkout": {"commit": "abc123def456", "uncommitted": ["notebooks/03.ipynb"] if swaps else []},
            "python": "3.12.1", "torch": "2.11.0+cu130", "build": "CUDA 13.0", "cuda_available": False,
            "swaps": list(swaps), "lessons_lib_install": {"ok": True},
            "notebooks": [{"notebook": "notebooks/01.ipynb", "ok": True, "wall_s": 20.4},
                          {"notebook": "notebooks/02.ipynb", "ok": ok, "wall_s": 10.0}],
            "unit_tests": {"passed": 700, "failed": 0 if ok else 2, "errors": 0, "skipped": 9, "wall_s": 120.2},
            "loadavg": [3.2, 5.9], "wall_s": 300}


def test_the_rows_stand_for_the_platforms_and_their_notebook_stacks():
    rows = {combo.id: combo for combo in vm.COMBOS}
    assert list(rows) == ["py3.13-torch2.11.0", "py3.11-torch2.13.0-cpu", "py3.12-torch2.10.0-kaggle",
                          "py3.11-torch2.4.1", "py3.13-torch2.14.1", "py3.10-torch2.14.1"]
    colab, cpu, kaggle = rows[COLAB], rows[CPU], rows[KAGGLE]
    assert (colab.platform, colab.kind, colab.stack, colab.find_links) == ("colab", "cuda-no-gpu", "colab", None)
    assert (cpu.platform, cpu.kind, cpu.stack, cpu.torch) == ("colab", "cpu-build", "colab", "2.13.0+cpu")
    assert cpu.find_links and "2.13.0+cpu" in cpu.who and "2.11.0+cpu" in cpu.who, "the label says which build, and why"
    assert (kaggle.platform, kaggle.stack, kaggle.kind) == ("kaggle", "kaggle", "cuda-no-gpu")
    assert kaggle.environ == vm.KAGGLE_RUNTIME_ENV and colab.environ == vm.COLAB_RUNTIME_ENV
    assert not any(c.platform or c.find_links for c in vm.COMBOS[3:]), "the version rows: no platform, PyPI's torch"
    from tools import colab_pins

    for combo in vm.COMBOS:  # a platform row runs its platform's Python (X.Y) and, from PyPI, its torch release
        image = colab_pins.describe(combo.pins_file)
        if combo.platform and not combo.find_links:
            assert image["python"].startswith(combo.python + ".") and image["torch"].startswith(combo.torch + "+")
            assert colab_pins.read_pins(combo.pins_file)["torch"] == combo.torch, combo.id
    assert bool(colab_pins.describe(kaggle.pins_file)["kaggle_base"]) and colab_pins.describe()["kaggle_base"] is None


@pytest.mark.parametrize("platform", sorted(vm.PLATFORM_ENV))
def test_each_platforms_runtime_env_makes_the_course_see_that_platform(monkeypatch, platform):
    from lessons_lib.platforms import detect_platform

    for name in (*vm.COLAB_RUNTIME_ENV, *vm.KAGGLE_RUNTIME_ENV):
        monkeypatch.delenv(name, raising=False)
    for name, value in vm.PLATFORM_ENV[platform].items():
        monkeypatch.setenv(name, value)
    assert detect_platform() == platform


def test_markdown_table_shows_every_row_run_or_not_and_how_it_was_measured():
    swap = {"name": "numpy", "pinned": "2.0.2", "version": "2.1.0", "reason": "r"}
    image = {"stack": "kaggle", "colab_commit": "0f0755b80800f62863b81348b000c97417f87bbd", "colab_date": "2026-05-14",
             "kaggle_commit": "78aaa43f8cc8e6b01bbaa5a56c39b4a2f61a8277", "kaggle_date": "2026-08-12"}
    data = {"combos": {COLAB: _record(),
                       KAGGLE: dict(_record(KAGGLE, platform="kaggle"), image=image),
                       NEWEST: _record(NEWEST, ok=False, swaps=[swap]),
                       PY310: _record(PY310, checked=False),
                       FLOOR: {"id": FLOOR, "who": "floor", "error": "no network\nmore"}}}
    table = vm.markdown_table(data)
    header, rule, *rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert header.startswith("| Python | torch (bản build) | hàng này là ai | bộ gói notebook (ảnh gốc) |")
    assert rule.startswith("| --- |") and len(rows) == len(vm.COMBOS), "every row of COMBOS, in order"
    assert "đầu ra đúng lời bài" in header
    who = vm.COMBOS[0].who
    assert rows[0] == (f"| 3.12.1 | 2.11.0+cu130 (CUDA 13.0, không có driver) | {who} | Colab (ảnh không ghi: chạy "
                       "trước khi bản ghi có ảnh) | 2/2 (như Colab) | 700 / 0 / 9 | 30 s · 120 s | — |"), \
        "the label comes from COMBOS, the numbers from the run"
    assert rows[1].startswith(f"| 3.11 | 2.13.0+cpu | {vm.COMBOS[1].who} | Colab `") and \
        f'chưa chạy (`nox -s "matrix({CPU})"`)' in rows[1], "a row not yet run: its label, its stack, how to run it"
    assert "| Kaggle `78aaa43` (2026-08-12) trên ảnh Colab `0f0755b` (2026-05-14) | 2/2 (như Kaggle) |" in rows[2]
    assert "**lỗi:** no network |" in rows[3]
    assert "1/2 ❌ |" in rows[4] and "700 / 2 / 9 ❌" in rows[4] and "numpy 2.0.2 → 2.1.0" in rows[4]
    assert "2/2 (chỉ kiểm không lỗi, chưa kiểm đầu ra)" in rows[5], "a record from before the output checks says so"
    assert "`tools/output_checks.py`" in table and "(ở đây `cuda-no-gpu`)" in table and "COLAB_RELEASE_TAG" in table
    assert "KAGGLE_KERNEL_RUN_TYPE" in table
    assert "2026-12-01" in table and "2 lõi" in table and "3–6" in table and "2 lần" in table
    assert "(commit `?`, `abc123def456` cộng thay đổi chưa commit ở `notebooks/03.ipynb`)" in table
    assert "test_ruff_finds_no_syntax_newer_than_python310" in table, "what the matrix leaves out is said"
    notes = [line for line in table.splitlines() if line.startswith("- `envs/")]
    assert len(notes) == 2 and "googlecolab/backend-info commit `" in notes[0], "the image of each stack"
    assert "Kaggle/docker-python commit `" in notes[1] and "`FROM` ảnh Colab `release-colab-external-images_" in notes[1]


def test_checkout_state_names_the_commit_and_uncommitted_files(tmp_path):
    state = vm.checkout_state()
    assert state["commit"] and len(state["commit"]) == 12 and isinstance(state["uncommitted"], list)
    assert vm.checkout_state(tmp_path) == {"commit": None, "uncommitted": []}, "no git: nothing to name"


def test_results_merge_per_combination_in_matrix_order(tmp_path):
    path = tmp_path / "results.json"
    assert vm.load_results(path) == {"combos": {}}
    vm.save_results([_record(NEWEST)], path)
    data = vm.save_results([_record(COLAB), _record(NEWEST, ok=False)], path)
    assert list(data["combos"]) == [COLAB, NEWEST]
    assert data["combos"][NEWEST]["ok"] is False and vm.load_results(path) == data


def test_replace_table_needs_both_markers():  # a good page: test_the_page_table_is_the_committed_results
    for text in ("no markers here", f"{vm.TABLE_END} {vm.TABLE_START}"):
        with pytest.raises(ValueError, match=f"{re.escape(vm.TABLE_START)} … {re.escape(vm.TABLE_END)}"):
            vm.replace_table(text, "| new |")


def test_the_page_table_is_the_committed_results():
    page = vm.PAGE.read_text(encoding="utf-8")
    expected = vm.replace_table(page, vm.markdown_table(vm.load_results(vm.RESULTS)))
    assert page == expected, f"{vm.PAGE.name}'s version table is stale: run `nox -s table`"
    data = vm.load_results(vm.RESULTS)
    assert set(data["combos"]) <= {combo.id for combo in vm.COMBOS}, "a record of a row no longer in COMBOS: drop it"
    assert all(record["ok"] for record in data["combos"].values()), "the page shows only a run that passed"


def test_notebook_rows_fail_a_notebook_that_raised_or_broke_the_lessons_promise():
    one, two, three = (f"notebooks/{name}.ipynb" for name in ("01_device_basics", "02_moving_tensors",
                                                              "solutions/03_device_mismatch_errors_solutions"))

    def case(notebook: str, test: str, time: str, inner: str = "") -> str:
        cls = "tests.test_rerun." + vm.rerun_class(ROOT / notebook)
        return f'<testcase classname="{cls}" name="test_{test}" time="{time}">{inner}</testcase>'

    xml = ('<testsuites><testsuite tests="7" failures="2" errors="0" skipped="1">'
           + case(one, "runs_twice_in_one_kernel", "20.5") + case(one, "outputs_keep_the_lessons_promises", "0.1")
           + case(two, "runs_twice_in_one_kernel", "3")
           + case(two, "outputs_keep_the_lessons_promises", "0.1",
                  '<failure message="AssertionError: notebooks/02.ipynb ran, but (2):&#10;  - cell 3: expect device: '
                  'cpu&#10;  - cell 4: stderr W1201 No CUDA runtime&#10;assert not [...]">tb</failure>')
           + case(three, "runs_twice_in_one_kernel", "1", '<failure message="ZeroDivisionError: division by zero">tb</failure>')
           + case(three, "outputs_keep_the_lessons_promises", "0", '<skipped message="does not run"/>')
           + '<testcase classname="tests.test_rerun" name="test_the_course_has_notebooks" time="0"/>'
           '</testsuite></testsuites>')
    rows = {row["notebook"]: row for row in vm.notebook_rows(xml)}
    assert list(rows) == [one, two, three]
    assert rows[one] == {"notebook": one, "ok": True, "wall_s": 20.6, "error": None, "problems": []}
    assert not rows[two]["ok"] and rows[two]["error"] is None
    assert rows[two]["problems"] == ["cell 3: expect device: cpu", "cell 4: stderr W1201 No CUDA runtime"]
    assert not rows[three]["ok"] and "ZeroDivisionError" in rows[three]["error"]
    assert rows[three]["problems"] == [], "a notebook that raised is reported by its error"


def test_each_swap_replaces_a_pin_of_its_stack_other_than_torch():
    from tools import colab_pins

    for combo in vm.COMBOS:
        pins = colab_pins.read_pins(combo.pins_file)
        assert all(name in pins and name != "torch" and version != pins[name]
                   for name, version in combo.swaps.items()), combo.id


def test_the_tool_modules_the_noxfile_imports_load_where_only_nox_is_installed():
    # `course.sh nox` runs nox from `uv tool run nox`: the standard library and nox, nothing of the course's
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in ("nbformat", "nbclient", "torch", "lessons_lib"))
    code = f"import sys; {blocked}; from tools import colab_pins, output_checks, verified, version_matrix"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)

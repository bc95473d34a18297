"""tools/grade.py: a class's notebooks graded with the course's checkers, whatever the submissions do.

The slow tests build a folder of submissions from the generated notebooks of lesson 02 (the lightest), one for each
thing a submission can do to the grader (make_class says which), grade them in one run of the command with two
jobs (in the sandbox where bwrap runs; BAI14_GRADE_TEST_SANDBOX=off grades them without it), and check every row, its
message, and that nothing is left behind. Its time limit counts seconds of an idle machine (tests/_grading.py), so a
machine busy with other work does not fail it. Hostile submissions: tests/test_grade_sandbox.py.
"""

from __future__ import annotations

import copy
import csv
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _grading import run_grader

from lessons_lib.exercises import _core
from tools import grade

ROOT = Path(__file__).resolve().parent.parent
L1, L2 = "01_device_basics", "02_moving_tensors"
NBK = grade.NOTEBOOK_TASK


def notebook(lesson: str, solved: bool = False) -> dict:
    path = ROOT / "notebooks" / (f"solutions/{lesson}_solutions.ipynb" if solved else f"{lesson}.ipynb")
    return json.loads(path.read_text(encoding="utf-8"))


def code_cell(source: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "id": os.urandom(4).hex(), "metadata": {},
            "outputs": [], "source": source}


def index_of(nb: dict, needle: str) -> int:
    return next(i for i, c in enumerate(nb["cells"]) if needle in grade.cell_text(c))


def with_cell(nb: dict, after: str, source: str) -> dict:
    nb = copy.deepcopy(nb)
    nb["cells"].insert(index_of(nb, after) + 1, code_cell(source))
    return nb


# --------------------------------------------------------------------------- the check log (lessons_lib)


def _feedback(status="pass"):
    return _core.Feedback("task1", "Bài 14.2 · Nhiệm vụ 1", status, ("dòng 1",), ("ghi chú",))


def test_record_check_appends_one_json_line_per_check_where_the_variable_names_a_file(tmp_path):
    log = tmp_path / "checks.jsonl"
    assert _core.record_check("lesson02", _feedback(), {_core.GRADE_LOG_ENV: str(log)}) is True
    assert _core.record_check("lesson02", _feedback("fail"), {_core.GRADE_LOG_ENV: str(log)}) is True
    assert grade.read_checks(log) == [
        {"group": "lesson02", "key": "task1", "title": "Bài 14.2 · Nhiệm vụ 1", "status": status,
         "lines": ["dòng 1"], "notes": ["ghi chú"]} for status in ("pass", "fail")]
    assert _core.record_check("lesson02", _feedback(), {}) is False
    assert _core.record_check("lesson02", _feedback(), {_core.GRADE_LOG_ENV: str(tmp_path / "no" / "x")}) is False
    assert not (tmp_path / "no").exists()


def test_record_check_rejects_wrong_types():
    with pytest.raises(TypeError, match="group"):
        _core.record_check(2, _feedback(), {})
    with pytest.raises(TypeError, match="feedback"):
        _core.record_check("lesson02", "✅ đạt", {})


def test_read_checks_skips_broken_lines_and_a_missing_file(tmp_path):
    log = tmp_path / "checks.jsonl"
    log.write_text('{"key": "task1", "status": "pass"}\nnot json\n{"key": 3, "status": "pass"}\n'
                   '{"key": "task2", "status": "maybe"}\n', encoding="utf-8")
    assert grade.read_checks(log) == [{"key": "task1", "status": "pass"}]
    assert grade.read_checks(tmp_path / "absent.jsonl") == []


# --------------------------------------------------------------------------- recognising lessons and learners


@pytest.fixture(scope="module")
def lessons():
    return grade.load_lessons()


def test_lessons_know_their_checked_tasks(lessons):
    for name, group in ((L1, "lesson01"), (L2, "lesson02"), ("10_exercises", "lesson10")):  # the lessons' own tasks
        importlib.import_module(f"lessons_lib.exercises.{group}")  # its tasks register on import
        assert lessons[name].group == group
        assert lessons[name].tasks == {key: exercise.title for key, exercise in _core.GROUPS[group].items()}, name


def test_identify_by_content_not_by_file_name(lessons):
    assert grade.identify(notebook(L2), lessons) == L2
    assert grade.identify(notebook(L1, solved=True), lessons) == L1
    colab = notebook(L2, solved=True)  # Colab-style: no cell ids, every code cell edited; the Markdown still says which
    for cell in colab["cells"]:
        cell.pop("id", None)
        if cell["cell_type"] == "code":
            cell["source"] = "# sửa\n" + grade.cell_text(cell)
    assert grade.identify(colab, lessons) == L2
    title_only = {"cells": [{"cell_type": "markdown", "source": "# Bài 14.2 · tự viết lại"}, code_cell("1")]}
    assert grade.identify(title_only, lessons) == L2
    assert grade.identify({"cells": [code_cell("print('xin chào')")]}, lessons) is None


@pytest.mark.parametrize("rel, lesson, want", [
    ("Trần Thị B/bai1.ipynb", L1, "Trần Thị B"),
    ("an-02_moving_tensors.ipynb", L2, "an"),
    ("Copy of Lan - 02_moving_tensors_solutions (1).ipynb", L2, "Lan"),
    ("02_moving_tensors.ipynb", L2, "02_moving_tensors"),
    ("ghi_chu.txt", None, "ghi_chu.txt"),
])
def test_learner_name_from_folder_or_file_name(tmp_path, rel, lesson, want):
    assert grade.learner_name(tmp_path / rel, tmp_path, lesson) == want


# --------------------------------------------------------------------------- rows from a run (no kernel)


def test_rows_of_a_lost_run_keep_this_lessons_logged_checks_only(lessons):  # the worker itself killed
    checks = [{"group": "lesson02", "key": "task1", "status": "pass", "lines": ["tốt"], "notes": []},
              {"group": "lesson09", "key": "task2", "status": "pass", "lines": [], "notes": []}]  # other lesson
    sub = grade.Submission(Path("x.ipynb"), "an", notebook(L2, solved=True), L2)
    lost = grade.rows_for(sub, None, checks, lessons, 60, 1000)
    others = len(lessons[L2].tasks) - 1  # every task but task1, then the notebook's own row
    assert [r["status"] for r in lost] == ["passed"] + ["error"] * (others + 1) and lost[0]["message"] == "tốt"
    assert "kết quả bị mất" in lost[1]["message"]


def test_a_deleted_check_cell_is_not_done(lessons):
    nb = copy.deepcopy(notebook(L2, solved=True))
    del nb["cells"][index_of(nb, "task1.check(")]
    result = {"errors": [], "stopped": None, "cells_run": 30, "seconds": 9.0, "dropped": 0, "warning": None}
    [task1, *_] = grade.rows_for(grade.Submission(Path("x.ipynb"), "an", nb, L2), result, [], lessons, 60, 1000)
    assert task1["status"] == "not_done" and "task1.check" in task1["message"]


@pytest.mark.parametrize("kwargs, message", [
    ({"folder": Path("khong_co_thu_muc_nay")}, "không tồn tại"), ({"timeout": 0}, "timeout"),
    ({"memory_mb": 10}, "memory_mb"), ({"jobs": True}, "jobs"), ({"disk_mb": 1}, "disk_mb"),
    ({"sandbox": "yes"}, "auto, required, off"),
])
def test_grade_rejects_bad_arguments(tmp_path, kwargs, message):
    with pytest.raises(grade.GradeError, match=message):
        grade.grade(**{"folder": tmp_path, "out": tmp_path / "out", **kwargs})


def test_course_sh_grade_reads_relative_folders_from_where_the_instructor_typed_it(monkeypatch, tmp_path):
    from tools import course

    seen = {}

    def hand_over(cmd, env):  # what course.sh starts (from the repository: course.main went there), with its env
        assert cmd[:3] == ["/env/python", "-m", "tools.grade"] and Path.cwd() == ROOT
        monkeypatch.setenv("COURSE_CALLER_CWD", env["COURSE_CALLER_CWD"])
        return grade.main(cmd[3:])

    monkeypatch.setattr(course, "ensure_env", lambda system_torch: Path("/env/python"))
    monkeypatch.setattr(course, "_hand_over", hand_over)
    monkeypatch.setattr(grade, "grade", lambda folder, out, *args, **kwargs: seen.update(folder=folder, out=out,
                                                                                       **kwargs))
    monkeypatch.chdir(tmp_path)
    assert course.main(["grade", "bai_nop", "--out", "ket_qua", "--jobs", "2"]) == 0
    assert seen == {"folder": tmp_path / "bai_nop", "out": tmp_path / "ket_qua", "sandbox": "auto",
                    "disk_mb": grade.DISK_MB}


# --------------------------------------------------------------------------- a whole class, graded for real


def make_class(folder: Path) -> dict[str, dict[str, tuple[str, ...]]]:
    """Write the submissions; return, per file and row, the code it must get and words its message must hold."""
    want: dict[str, dict[str, tuple[str, ...]]] = {}

    def add(rel, content, **rows):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        (folder / rel).write_text(text, encoding="utf-8")
        want[rel] = {NBK if task == "nb" else task: (row,) if isinstance(row, str) else row for task, row in rows.items()}

    solved, task1 = notebook(L2, solved=True), "task1.check("
    colab = copy.deepcopy(solved)  # solved, as Colab downloads it: no cell ids, nbformat 4.4, Colab metadata,
    md = [i for i, c in enumerate(colab["cells"]) if c["cell_type"] == "markdown"]  # Markdown cells moved around
    for a, b in zip(md[1::2], md[2::2], strict=False):
        colab["cells"][a], colab["cells"][b] = colab["cells"][b], colab["cells"][a]
    colab["nbformat_minor"] = 4
    colab["metadata"]["colab"] = {"name": "Bản sao của bài 2", "provenance": []}
    for cell in colab["cells"]:
        cell["metadata"] = {"id": cell.pop("id")}
    colab["cells"].insert(3, {"cell_type": "markdown", "metadata": {}, "source": "Ghi chú của em: xong bài 2."})
    add("Copy of bài cuối (1).ipynb", colab, task1="passed", task2="passed", nb="ran")  # named by its file
    wrong = notebook(L2)  # task 1 wrong; task 2 blank, run before with an output that claims it passed: run afresh
    wrong["cells"][index_of(wrong, task1)]["source"] = (
        "from lessons_lib.exercises.lesson02 import task1\n\ndef add_noise(x, std=0.1):\n"
        "    return x + std * torch.randn(x.shape)   # nhiễu tạo trên CPU\n\ntask1.check(add_noise)")
    for cell in wrong["cells"]:
        if cell["cell_type"] == "code":
            cell["execution_count"] = 7
            if "task2.check(" in grade.cell_text(cell):
                cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "✅ Nhiệm vụ 2 — đạt.\n"}]
    add("chi/nop.ipynb", wrong, task1=("wrong", "randn_like"), task2="not_done", nb="ran")
    broken = with_cell(with_cell(solved, "# Ô cài đặt", "def hong(:\n    pass"), "task2.check(",
                       "ten = input('Tên em?')")  # a cell that errs does not stop the ones after it
    cell = broken["cells"][index_of(broken, "task2.check(")]
    cell["source"] = 'raise ValueError("em sửa hỏng ô này")\n' + grade.cell_text(cell)
    add("giang/loi.ipynb", broken, task1="passed", task2=("error", "ValueError: em sửa hỏng ô này"),
        nb=("error", "SyntaxError", "StdinNotImplementedError"))
    add("hai/vonglap.ipynb", with_cell(solved, task1, "while True:\n    pass"), task1="passed",
        task2=("error", "quá thời gian 45 s"), nb=("error", "quá thời gian 45 s", "while True"))
    hog = copy.deepcopy(solved)
    hog["cells"].append(code_cell("hog = []\nwhile True:\n    hog.append(torch.ones(2**25))   # 128 MiB mỗi lần"))
    add("khanh/bonho.ipynb", hog, task1="passed", task2="passed", nb=("error", "hết bộ nhớ (giới hạn khi chấm: 1500 MiB)"))
    add("vinh/crash.ipynb", with_cell(solved, task1, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"),
        task1="passed", task2=("error", "kernel dừng đột ngột"), nb=("error", "SIGKILL"))  # task 1 logged before
    noisy = with_cell(solved, "# Ô cài đặt", "for _ in range(300):\n    print('x' * 100_000)")  # ~30 million characters
    noisy["cells"].append(code_cell("import os, shutil\nopen('rac.txt', 'w').write('x')\nshutil.rmtree(os.getcwd())"))
    add("tam/in_nhieu.ipynb", noisy, task1="passed", task2="passed", nb=("ran", "bỏ 2"))  # and removes its folder
    setup = notebook(L2)  # setup cell forced to install: blocked, no download while grading
    cell = setup["cells"][index_of(setup, "# Ô cài đặt")]
    cell["source"] = grade.cell_text(cell).replace('if importlib.util.find_spec("lessons_lib") is None:', "if True:")
    add("bao/cai_dat.ipynb", setup, task1="not_done", task2="not_done", nb=("error", "SystemExit"))
    add("lan/baitap.ipynb", "đây không phải JSON", nb=("error", "không đọc được"))
    add("minh/ghi_chu.txt", "em nộp bằng file chữ", nb=("error", "không phải notebook"))
    add("xuan/trang.ipynb", {"cells": [code_cell("print('xin chào')")], "metadata": {}, "nbformat": 4,
                             "nbformat_minor": 5}, nb=("error", "không nhận ra"))
    add(".ipynb_checkpoints/an-checkpoint.ipynb", solved)  # hidden: not a submission
    return want


def _folder_state(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _repo_state() -> set[str]:
    proc = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    # build/ is where the other test processes keep the executed notebooks and the site while this one grades
    return {line for line in proc.stdout.splitlines()
            if "__pycache__" not in line and ".ruff_cache" not in line and not line[3:].lstrip('"').startswith("build/")}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if sys.platform == "win32":
        pytest.skip("grading stops submissions by POSIX process group and limits them with setrlimit")
    base = tmp_path_factory.mktemp("grade-class")
    folder, out, tmp = base / "bai_nop", base / "ket_qua", base / "tmp"
    tmp.mkdir()
    want = make_class(folder)
    before_repo, before_tmp = _repo_state(), {p.name for p in Path("/tmp").glob("bai14-grade-*")}
    before_folder = _folder_state(folder)
    env = {**os.environ, "TMPDIR": str(tmp), "TEMP": str(tmp), "TMP": str(tmp), "SECRET_TOKEN": "không-được-lộ"}
    sandbox = os.environ.get("BAI14_GRADE_TEST_SANDBOX", "auto")  # off: the same class without the sandbox
    run = run_grader([sys.executable, "-m", "tools.grade", str(folder), "--out", str(out), "--jobs", "2",
                      "--timeout", "45", "--memory-mb", "1500", "--sandbox", sandbox], env, ROOT)
    print(f"graded {len(want)} files in {run.wall_s:.0f} s ({run.idle_s:.0f} s of an idle machine; the "
          f"command: {run.reported}, load {os.getloadavg()[0]:.1f})\n{run.stdout}\n{run.stderr}")
    assert run.returncode == 0, run.stdout + run.stderr
    with open(out / "grades.csv", encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {"want": want, "rows": rows, "out": out, "tmp": tmp, "folder": folder, "run": run, "sandbox": sandbox,
            "before_repo": before_repo, "before_folder": before_folder, "before_tmp": before_tmp}


@pytest.mark.slow
def test_every_submission_gets_the_result_and_message_it_deserves(graded):
    wrong = {}
    for rel, want in graded["want"].items():
        got = {r["nhiệm vụ"]: r for r in graded["rows"] if r["file"] == Path(rel).name
               and (len(Path(rel).parts) == 1 or r["học viên"] == Path(rel).parts[0])}
        if {task: row["mã"] for task, row in got.items()} != {task: row[0] for task, row in want.items()} or any(
                words not in got[task]["thông báo"] for task, (_, *says) in want.items() for words in says):
            wrong[rel] = ({task: (row["mã"], row["thông báo"]) for task, row in got.items()}, want)
    assert not wrong, wrong
    assert {r["học viên"] for r in graded["rows"] if r["file"].startswith("Copy of")} == {"bài cuối"}


@pytest.mark.slow
def test_no_submission_installs_or_sees_secrets(graded):
    logs = {p.name: p.read_text(encoding="utf-8") for p in (graded["out"] / "logs").iterdir()}
    assert len(logs) == sum(len(rows) > 1 for rows in graded["want"].values())  # every notebook that ran: its output
    forced = next(text for name, text in logs.items() if "cai_dat" in name)
    assert "Không cài được lessons_lib" in forced  # the forced install found nothing to download
    assert all(len(text) <= grade.LOG_CHARS for text in logs.values())
    assert not any("không-được-lộ" in text for text in logs.values())


@pytest.mark.slow
def test_html_page_lists_everyone_escaped(graded):
    page = (graded["out"] / "grades.html").read_text(encoding="utf-8")
    assert "bài cuối" in page and "<script" not in page
    for rel, want in graded["want"].items():
        assert not want or Path(rel).name in page


@pytest.mark.slow
def test_nothing_is_left_behind(graded):
    assert list(graded["tmp"].iterdir()) == []
    assert {p.name for p in Path("/tmp").glob("bai14-grade-*")} <= graded["before_tmp"]
    assert _repo_state() == graded["before_repo"]
    assert _folder_state(graded["folder"]) == graded["before_folder"]  # the submissions themselves untouched


@pytest.mark.slow
def test_the_last_line_reports_the_class_wall_and_cpu_time(graded):
    wall, cpu = graded["run"].reported  # "Cả lớp: 11 file, 183 s thời gian thực, 95 s CPU (trong sandbox)."
    assert 0 < wall <= graded["run"].wall_s + 1 and cpu > 20  # 9 notebooks ran, each a few seconds of CPU
    sandboxed = graded["sandbox"] != "off" and grade.prepare_sandbox("auto", 64)[0] is not None
    assert ("🔒 Sandbox bubblewrap" in graded["run"].stdout) == sandboxed
    assert ("(trong sandbox)" in graded["run"].stdout.splitlines()[-1]) == sandboxed

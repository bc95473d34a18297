"""tools/grade.py: a class's notebooks graded with the course's checkers, whatever the submissions do.

The slow test builds a folder of 21 realistic submissions from the generated notebooks of lesson 02 (the lightest)
(solved, half solved, blank, wrong, raising, looping, exhausting memory, crashing the kernel, deleting its folder,
printing megabytes, renamed, reordered, with stale outputs, Colab-style without cell ids, not notebooks at all),
grades them in one run of the command with two jobs (in the sandbox where bwrap runs; BAI14_GRADE_TEST_SANDBOX=off
grades them without it), and checks every row and that nothing is left behind. Its time limit counts seconds of an
idle machine (tests/_grading.py), so a machine busy with other work does not fail it. Hostile submissions:
tests/test_grade_sandbox.py.
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


NB = ROOT / "notebooks"


def learner(lesson: str) -> dict:
    return json.loads((NB / f"{lesson}.ipynb").read_text(encoding="utf-8"))


def solved(lesson: str) -> dict:
    return json.loads((NB / "solutions" / f"{lesson}_solutions.ipynb").read_text(encoding="utf-8"))


def code_cell(source: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "id": os.urandom(4).hex(), "metadata": {},
            "outputs": [], "source": source}


def index_of(nb: dict, needle: str) -> int:
    return next(i for i, c in enumerate(nb["cells"]) if needle in grade.cell_text(c))


def with_cell(nb: dict, after: str, source: str) -> dict:
    nb = copy.deepcopy(nb)
    nb["cells"].insert(index_of(nb, after) + 1, code_cell(source))
    return nb


L1, L2 = "01_device_basics", "02_moving_tensors"


# --------------------------------------------------------------------------- the check log (lessons_lib)


def _feedback(status="pass"):
    return _core.Feedback("task1", "Bài 14.2 · Nhiệm vụ 1", status, ("dòng 1",), ("ghi chú",))


def test_record_check_appends_one_json_line_per_check(tmp_path):
    log = tmp_path / "checks.jsonl"
    env = {_core.GRADE_LOG_ENV: str(log)}
    assert _core.record_check("lesson02", _feedback(), env) is True
    assert _core.record_check("lesson02", _feedback("fail"), env) is True
    items = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [i["status"] for i in items] == ["pass", "fail"]
    assert items[0] == {"group": "lesson02", "key": "task1", "title": "Bài 14.2 · Nhiệm vụ 1", "status": "pass",
                        "lines": ["dòng 1"], "notes": ["ghi chú"]}
    assert grade.read_checks(log) == items


def test_record_check_without_the_variable_or_with_a_bad_path_writes_nothing(tmp_path):
    assert _core.record_check("lesson02", _feedback(), {}) is False
    assert _core.record_check("lesson02", _feedback(), {_core.GRADE_LOG_ENV: str(tmp_path / "no" / "x")}) is False
    assert not (tmp_path / "no").exists()


def test_record_check_rejects_wrong_types():
    with pytest.raises(TypeError, match="group must be a str"):
        _core.record_check(2, _feedback(), {})
    with pytest.raises(TypeError, match="feedback must be the Feedback"):
        _core.record_check("lesson02", "✅ đạt", {})


def test_check_writes_to_the_log_the_learner_sees_nothing_of(tmp_path, monkeypatch, capsys):
    from lessons_lib.exercises.lesson02 import task1

    monkeypatch.setenv(_core.GRADE_LOG_ENV, str(tmp_path / "log.jsonl"))
    task1.check(lambda x, std=0.1: None)
    printed = capsys.readouterr().out
    [item] = grade.read_checks(tmp_path / "log.jsonl")
    assert (item["group"], item["key"], item["status"]) == ("lesson02", "task1", "missing")
    assert item["lines"][0] in printed and "LESSONS_GRADE_LOG" not in printed


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
        assert sorted(lessons[name].tasks) == sorted(_core.GROUPS[group]), name
        assert lessons[name].module == f"lessons_lib.exercises.{group}"
    info = grade.task_info(lessons)
    assert info[L2][0] == "lesson02" and info["10_exercises"][0] == "lesson10"
    assert info[L2][1]["task1"].startswith("Bài 14.2") and info["10_exercises"][1]["task3"] == _core.GROUPS["lesson10"]["task3"].title


def test_identify_by_content_not_by_file_name(lessons):
    assert grade.identify(learner(L2), lessons) == L2
    assert grade.identify(solved(L1), lessons) == L1
    colab = solved(L2)  # Colab-style: no cell ids, every code cell edited; the Markdown still says which lesson
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


def _sub(lessons, nb=None):
    nb = nb or solved(L2)
    return grade.Submission(Path("x.ipynb"), "an", nb, L2)


def test_rows_of_a_lost_run_keep_this_lessons_logged_checks_only(lessons):  # a run that died: vinh/crash
    checks = [{"group": "lesson02", "key": "task1", "status": "pass", "lines": ["tốt"], "notes": []},
              {"group": "lesson09", "key": "task2", "status": "pass", "lines": [], "notes": []}]  # other lesson
    lost = grade.rows_for(_sub(lessons), None, checks, grade.task_info(lessons), 60, 1000)
    others = len(lessons[L2].tasks) - 1  # every task but task1, then the notebook's own row
    assert [r["status"] for r in lost] == ["passed"] + ["error"] * (others + 1) and lost[0]["message"] == "tốt"
    assert "kết quả bị mất" in lost[1]["message"]


def test_rows_of_a_check_cell_that_raised_and_of_a_deleted_check(lessons):
    info = grade.task_info(lessons)
    nb = copy.deepcopy(solved(L2))
    del nb["cells"][index_of(nb, "task1.check(")]
    cell = index_of(nb, "task2.check(") + 1
    result = {"errors": [{"cell": cell, "line": "from …", "ename": "RuntimeError",
                          "evalue": "DefaultCPUAllocator: can't allocate memory"}],
              "stopped": None, "cells_run": 30, "seconds": 9.0, "dropped": 12345, "warning": None}
    rows = {r["task"]: r for r in grade.rows_for(_sub(lessons, nb), result, [], info, 60, 1000)}
    assert rows["task1"]["status"] == "not_done" and "task1.check" in rows["task1"]["message"]
    assert rows["task2"]["status"] == "error" and "giới hạn khi chấm: 1000 MiB" in rows["task2"]["message"]
    assert "12,345" in rows[grade.NOTEBOOK_TASK]["message"]


def test_grade_rejects_bad_arguments(tmp_path):
    with pytest.raises(grade.GradeError, match="không tồn tại"):
        grade.grade(tmp_path / "absent", tmp_path / "out")
    for kwargs, name in (({"timeout": 0}, "timeout"), ({"memory_mb": 10}, "memory_mb"), ({"jobs": True}, "jobs")):
        with pytest.raises(grade.GradeError, match=name):
            grade.grade(tmp_path, tmp_path / "out", **kwargs)


def test_course_sh_grade_hands_over_to_tools_grade(monkeypatch, tmp_path):
    from tools import course

    seen = {}
    monkeypatch.setattr(course, "ensure_env", lambda system_torch: Path("/env/python"))
    monkeypatch.setattr(course, "_hand_over", lambda cmd, env: seen.update(cmd=cmd, env=env) or 0)
    monkeypatch.chdir(tmp_path)
    course.main(["grade", "bai_nop", "--jobs", "2"])
    assert seen["cmd"] == ["/env/python", "-m", "tools.grade", "bai_nop", "--jobs", "2"]
    assert seen["env"]["COURSE_CALLER_CWD"] == str(tmp_path)  # bai_nop is where the instructor typed it


def test_relative_folders_are_read_from_where_course_sh_was_started(tmp_path, monkeypatch):
    seen = {}
    monkeypatch.setattr(grade, "grade", lambda folder, out, *args, **kwargs: seen.update(folder=folder, out=out,
                                                                                       **kwargs))
    monkeypatch.setenv("COURSE_CALLER_CWD", str(tmp_path))
    assert grade.main(["bai_nop", "--out", "ket_qua"]) == 0
    assert seen == {"folder": tmp_path / "bai_nop", "out": tmp_path / "ket_qua", "sandbox": "auto",
                    "disk_mb": grade.DISK_MB}


# --------------------------------------------------------------------------- a whole class, graded for real


def _write(folder: Path, rel: str, nb: dict | str) -> None:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nb if isinstance(nb, str) else json.dumps(nb, ensure_ascii=False), encoding="utf-8")


def make_class(folder: Path) -> dict[str, dict[str, str]]:
    """Write the submissions; return, per file, the result each task (and the whole notebook) must get."""
    nbk = grade.NOTEBOOK_TASK
    want: dict[str, dict[str, str]] = {}

    def add(rel, nb, **statuses):
        _write(folder, rel, nb)
        want[rel] = statuses

    add("an/bai02.ipynb", solved(L2), task1="passed", task2="passed", **{nbk: "ran"})
    add("Copy of bài cuối (1).ipynb", solved(L2), task1="passed", task2="passed", **{nbk: "ran"})  # renamed
    add("binh/02_moving_tensors.ipynb", learner(L2), task1="not_done", task2="not_done", **{nbk: "ran"})
    half = learner(L2)  # task 1 done; run before, with an output that claims task 2 passed: run afresh
    half["cells"][index_of(half, "task1.check(")] = solved(L2)["cells"][index_of(solved(L2), "task1.check(")]
    for cell in half["cells"]:
        if cell["cell_type"] == "code":
            cell["execution_count"] = 7
            if "task2.check(" in grade.cell_text(cell):
                cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "✅ Nhiệm vụ 2 — đạt.\n"}]
    add("chi/nop.ipynb", half, task1="passed", task2="not_done", **{nbk: "ran"})
    wrong = copy.deepcopy(learner(L2))
    wrong["cells"][index_of(wrong, "task1.check(")]["source"] = (
        "from lessons_lib.exercises.lesson02 import task1\n\ndef add_noise(x, std=0.1):\n"
        "    return x + std * torch.randn(x.shape)   # nhiễu tạo trên CPU\n\ntask1.check(add_noise)")
    add("dung/02.ipynb", wrong, task1="wrong", task2="not_done", **{nbk: "ran"})
    raises = copy.deepcopy(solved(L2))
    cell = raises["cells"][index_of(raises, "task2.check(")]
    cell["source"] = 'raise ValueError("em sửa hỏng ô này")\n' + grade.cell_text(cell)
    add("giang/loi.ipynb", raises, task1="passed", task2="error", **{nbk: "error"})
    add("hai/vonglap.ipynb", with_cell(solved(L2), "task1.check(", "while True:\n    pass"),
        task1="passed", task2="error", **{nbk: "error"})
    hog = copy.deepcopy(solved(L2))
    hog["cells"].append(code_cell("hog = []\nwhile True:\n    hog.append(torch.ones(2**25))   # 128 MiB mỗi lần"))
    add("khanh/bonho.ipynb", hog, task1="passed", task2="passed", **{nbk: "error"})
    add("vinh/crash.ipynb", with_cell(solved(L2), "task1.check(", "import os, signal\n"
                                      "os.kill(os.getpid(), signal.SIGKILL)"),
        task1="passed", task2="error", **{nbk: "error"})
    deletes = copy.deepcopy(solved(L2))  # last cell: removes its whole folder (and the files it wrote there)
    deletes["cells"].append(code_cell("import os, shutil\nopen('rac.txt', 'w').write('x')\n"
                                      "shutil.rmtree(os.getcwd())"))
    add("uyen/xoa.ipynb", deletes, task1="passed", task2="passed", **{nbk: "ran"})
    add("tam/in_nhieu.ipynb", with_cell(solved(L2), "# Ô cài đặt", "for _ in range(300):\n    print('x' * 100_000)"),
        task1="passed", task2="passed", **{nbk: "ran"})
    add("yen/cu_phap.ipynb", with_cell(with_cell(solved(L2), "# Ô cài đặt", "def hong(:\n    pass"),
                                       "task2.check(", "ten = input('Tên em?')"),
        task1="passed", task2="passed", **{nbk: "error"})
    moved = copy.deepcopy(solved(L2))  # the task-1 cell dragged to the top, above `import torch`
    moved["cells"].insert(1, moved["cells"].pop(index_of(moved, "task1.check(")))
    add("phuc/sai_thu_tu.ipynb", moved, task1="wrong", task2="passed", **{nbk: "ran"})
    colab = copy.deepcopy(solved(L2))  # as Colab downloads it: no cell ids, nbformat 4.4, Colab metadata,
    md = [i for i, c in enumerate(colab["cells"]) if c["cell_type"] == "markdown"]  # Markdown cells moved around
    for a, b in zip(md[1::2], md[2::2], strict=False):
        colab["cells"][a], colab["cells"][b] = colab["cells"][b], colab["cells"][a]
    colab["nbformat_minor"] = 4
    colab["metadata"]["colab"] = {"name": "Bản sao của bài 2", "provenance": []}
    for cell in colab["cells"]:
        cell["metadata"] = {"id": cell.pop("id")}
    colab["cells"].insert(3, {"cell_type": "markdown", "metadata": {}, "source": "Ghi chú của em: xong bài 2."})
    add("son/colab.ipynb", colab, task1="passed", task2="passed", **{nbk: "ran"})
    setup = copy.deepcopy(learner(L2))  # setup cell forced to install: blocked, no download while grading
    cell = setup["cells"][index_of(setup, "# Ô cài đặt")]
    cell["source"] = grade.cell_text(cell).replace('if importlib.util.find_spec("lessons_lib") is None:', "if True:")
    add("bao/cai_dat.ipynb", setup, task1="not_done", task2="not_done", **{nbk: "error"})
    add("lan/baitap.ipynb", "đây không phải JSON", **{nbk: "error"})
    add("nam/bai.ipynb", {"hello": 1}, **{nbk: "error"})
    add("minh/ghi_chu.txt", "em nộp bằng file chữ", **{nbk: "error"})
    add("dao/rong.ipynb", "", **{nbk: "error"})
    add("gia/bai.py", "print('bài của em')", **{nbk: "error"})
    add("xuan/trang.ipynb", {"cells": [code_cell("print('xin chào')")], "metadata": {}, "nbformat": 4,
                             "nbformat_minor": 5}, **{nbk: "error"})
    _write(folder, ".ipynb_checkpoints/an-checkpoint.ipynb", solved(L2))  # hidden: not a submission
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
    print(f"graded {len(want)} submissions in {run.wall_s:.0f} s ({run.idle_s:.0f} s of an idle machine; the "
          f"command: {run.reported}, load {os.getloadavg()[0]:.1f})\n{run.stdout}\n{run.stderr}")
    assert run.returncode == 0, run.stdout + run.stderr
    with open(out / "grades.csv", encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return {"want": want, "rows": rows, "out": out, "tmp": tmp, "folder": folder, "run": run, "sandbox": sandbox,
            "before_repo": before_repo, "before_folder": before_folder, "before_tmp": before_tmp, "stdout": run.stdout}


def _rows_of(graded, rel):
    return {r["nhiệm vụ"]: r for r in graded["rows"] if (Path(graded["folder"]) / rel).name == r["file"]
            and (len(Path(rel).parts) == 1 or r["học viên"] == Path(rel).parts[0])}


@pytest.mark.slow
def test_every_submission_gets_the_result_it_deserves(graded):
    assert len(graded["want"]) >= 20
    wrong = {}
    for rel, statuses in graded["want"].items():
        got = {task: row["mã"] for task, row in _rows_of(graded, rel).items()}
        if got != statuses:
            wrong[rel] = (got, statuses)
    assert not wrong, wrong
    assert "an-checkpoint.ipynb" not in {r["file"] for r in graded["rows"]}


@pytest.mark.slow
def test_messages_say_what_happened(graded):
    msg = {rel: {t: r["thông báo"] for t, r in _rows_of(graded, rel).items()} for rel in graded["want"]}
    nbk = grade.NOTEBOOK_TASK
    assert "ValueError: em sửa hỏng ô này" in msg["giang/loi.ipynb"]["task2"]
    assert "quá thời gian 45 s" in msg["hai/vonglap.ipynb"][nbk] and "while True" in msg["hai/vonglap.ipynb"][nbk]
    assert "hết bộ nhớ (giới hạn khi chấm: 1500 MiB)" in msg["khanh/bonho.ipynb"][nbk]
    assert "kernel dừng đột ngột" in msg["vinh/crash.ipynb"]["task2"] and "SIGKILL" in msg["vinh/crash.ipynb"][nbk]
    assert "SyntaxError" in msg["yen/cu_phap.ipynb"][nbk] and "StdinNotImplementedError" in msg["yen/cu_phap.ipynb"][nbk]
    assert "bỏ 2" in msg["tam/in_nhieu.ipynb"][nbk]  # ~30 million characters printed, 50 thousand kept
    assert "NameError" in msg["phuc/sai_thu_tu.ipynb"]["task1"]
    assert "không nhận ra" in msg["xuan/trang.ipynb"][nbk] and "không phải notebook" in msg["minh/ghi_chu.txt"][nbk]
    assert "SystemExit" in msg["bao/cai_dat.ipynb"][nbk]
    assert msg["dung/02.ipynb"]["task1"].strip()
    learners = {r["học viên"] for r in graded["rows"]}
    assert {"an", "bài cuối", "minh", "son"} <= learners and "Copy of bài cuối (1)" not in learners


@pytest.mark.slow
def test_no_submission_installs_or_sees_secrets(graded):
    logs = {p.name: p.read_text(encoding="utf-8") for p in (graded["out"] / "logs").iterdir()}
    assert len(logs) == sum(len(s) > 1 for s in graded["want"].values())  # every notebook that ran: its output
    forced = next(text for name, text in logs.items() if "cai_dat" in name)
    assert "Không cài được lessons_lib" in forced  # the forced install found nothing to download
    assert all(len(text) <= grade.LOG_CHARS + 5_000 for text in logs.values())
    assert not any("không-được-lộ" in text for text in logs.values())


@pytest.mark.slow
def test_html_page_lists_everyone_escaped(graded):
    page = (graded["out"] / "grades.html").read_text(encoding="utf-8")
    assert "bài cuối" in page and "<script" not in page
    for rel in graded["want"]:
        assert Path(rel).name.replace("&", "&amp;") in page


@pytest.mark.slow
def test_nothing_is_left_behind(graded):
    assert list(graded["tmp"].iterdir()) == []
    assert {p.name for p in Path("/tmp").glob("bai14-grade-*")} <= graded["before_tmp"]
    assert _repo_state() == graded["before_repo"]
    assert _folder_state(graded["folder"]) == graded["before_folder"]  # the submissions themselves untouched


@pytest.mark.slow
def test_the_last_line_reports_the_class_wall_and_cpu_time(graded):
    wall, cpu = graded["run"].reported  # "Cả lớp: 22 file, 183 s thời gian thực, 95 s CPU (trong sandbox)."
    assert 0 < wall <= graded["run"].wall_s + 1 and cpu > 20  # 15 notebooks ran, each a few seconds of CPU
    sandboxed = graded["sandbox"] != "off" and grade.prepare_sandbox("auto", 64)[0] is not None
    assert ("🔒 Sandbox bubblewrap" in graded["stdout"]) == sandboxed
    assert ("(trong sandbox)" in graded["stdout"].splitlines()[-1]) == sandboxed

"""tools/grade.py's sandbox: hostile submissions graded beside an honest one, with bubblewrap and without it.

Five hostile notebooks (each the first cells of lesson 02, so the grader knows the lesson, then one attack): one
prints a secret planted in the grader's ``~/.ssh``, one connects to a listener this test runs on 127.0.0.1, one
writes into the repository, into /tmp and into the submissions folder, one leaves processes meant to outlive the
kernel, one fills its disk. The grader runs from a copy of the repository (the course root it trusts) with HOME a
temporary folder, so nothing here can touch the real checkout or the real home even where a sandbox fails.

With the sandbox (``--sandbox required``) every attack fails and the honest learner's grades are intact: each one
proves a part of the bwrap command (no network, the grader's HOME unseen, the repository and the submissions read-only,
its own PID namespace, a tmpfs of --disk-mb). With ``--sandbox off`` the same attacks succeed: those tests document
what docs/INSTRUCTORS.md says is not protected (and that the attacks work), and clean up after them (the processes
left running are killed, the files written are removed).
"""

from __future__ import annotations

import csv
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _grading import run_grader

from tools import grade

ROOT = Path(__file__).resolve().parent.parent


L2 = "02_moving_tensors"
FILL_CAP_MB = 200  # the disk-filling notebook stops here by itself: without a sandbox it never fills this machine
DISK_MB = 64  # what the sandbox lets each notebook write (--disk-mb)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="grading needs POSIX process groups")


def _nb(name: str) -> dict:
    return json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))


def _hostile(code: str) -> dict:
    """Return lesson 02's first cells (badge, title, setup, imports: the grader knows the lesson) and `code`."""
    nb = _nb(f"{L2}.ipynb")
    nb["cells"] = nb["cells"][:4] + [{"cell_type": "code", "execution_count": None, "id": secrets.token_hex(4),
                                      "metadata": {}, "outputs": [], "source": code}]
    return nb


# --------------------------------------------------------------------------- unit tests (no kernel)


def test_off_needs_no_bwrap():
    box, line = grade.prepare_sandbox("off", 64, which=lambda name: pytest.fail("looked for bwrap"))
    assert box is None and "--sandbox off" in line


@pytest.mark.parametrize("platform, bwrap, why", [
    ("linux", None, "chưa có bubblewrap"),
    ("darwin", "/usr/bin/bwrap", "chỉ có trên Linux"),
    ("linux", "bwrap: No permissions to creating new namespace", "No permissions to creating new namespace.*userns"),
], ids=["no-bwrap", "not-linux", "no-user-namespaces"])
def test_without_a_working_bwrap_auto_says_why_in_one_line_and_required_refuses(tmp_path, platform, bwrap, why):
    if bwrap and not bwrap.startswith("/"):  # a bwrap that says this and fails, as where user namespaces are disabled
        (tmp_path / "bwrap").write_text(f"#!/bin/sh\n[ \"$1\" = --help ] && exit 0\necho '{bwrap}' >&2\nexit 1\n")
        (tmp_path / "bwrap").chmod(0o755)
        bwrap = str(tmp_path / "bwrap")
    box, line = grade.prepare_sandbox("auto", 64, which=lambda name: bwrap, platform=platform)
    assert box is None and re.search(why, line) and "\n" not in line and "--sandbox off" in line
    with pytest.raises(grade.GradeError, match=f"--sandbox required.*{why}"):
        grade.prepare_sandbox("required", 64, which=lambda name: bwrap, platform=platform)


def test_the_command_refuses_to_grade_without_a_sandbox_when_one_is_required(tmp_path, monkeypatch, capsys):
    import functools

    monkeypatch.setattr(grade, "prepare_sandbox", functools.partial(grade.prepare_sandbox, which=lambda name: None))
    (tmp_path / "bai_nop").mkdir()
    assert grade.main([str(tmp_path / "bai_nop"), "--out", str(tmp_path / "kq"), "--sandbox", "required"]) == 2
    assert "--sandbox required nhưng không có sandbox" in capsys.readouterr().err
    assert not (tmp_path / "kq").exists()


def test_read_only_paths_never_hold_the_home_or_the_whole_machine(tmp_path):
    home = tmp_path / "home"
    (home / ".pyenv").mkdir(parents=True)
    paths = grade._read_only_paths({"PYTHONPATH": os.pathsep.join(["/", str(tmp_path), str(home / ".pyenv"), "rel"])},
                                   [str(home / ".pyenv"), "/usr/lib/python3"], str(home))
    assert str(home / ".pyenv") in paths and str(grade.ROOT) in paths
    assert "/" not in paths and str(tmp_path) not in paths and str(home) not in paths
    assert not any(p.startswith("/usr/") for p in paths)  # /usr is bound whole already


# --------------------------------------------------------------------------- the hostile class, graded for real


def _received(listener: socket.socket) -> list[bytes]:
    """Return what each connection the listener queued sent (the kernel completes connections no one accepted)."""
    listener.settimeout(0.2)
    received = []
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            return received
        with conn:
            conn.settimeout(2)
            received.append(conn.recv(4096))


def _marked_processes(markers: list[str]) -> dict[int, str]:
    """Return the processes whose command line holds one of `markers` (the hostile notebook's sleeps): pid → marker."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        for marker in markers:
            if marker.encode() in args:
                found[int(entry.name)] = marker
    return found


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def _copy_course(repo: Path) -> None:
    """Copy what the grader needs (tools/, lessons_lib, the notebooks) into a repository of its own."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "tools", repo / "tools", ignore=ignore)
    shutil.copytree(ROOT / "lessons_lib", repo / "lessons_lib", ignore=ignore)
    shutil.copytree(ROOT / "notebooks", repo / "notebooks", ignore=ignore)


def make_hostile_class(folder: Path, secret_path: Path, port: int, tmp_file: Path, markers: list[str]) -> None:
    """Write the honest learner and the five hostile notebooks into `folder`."""
    def put(rel, nb):
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")

    put("trung_thuc/bai02.ipynb", _nb(f"solutions/{L2}_solutions.ipynb"))
    put("do_tham/bai02.ipynb", _hostile(f"""\
import os
found = []
for path in (os.path.expanduser("~/.ssh/id_rsa"), {str(secret_path)!r}):
    try:
        found.append(open(path).read().strip())
        print("ĐỌC ĐƯỢC", path, found[-1])
    except OSError as exc:
        print("không đọc được", path, type(exc).__name__)
if found:
    raise RuntimeError("bí mật: " + found[0])"""))
    put("goi_ra_ngoai/bai02.ipynb", _hostile(f"""\
import socket
try:
    with socket.create_connection(("127.0.0.1", {port}), timeout=5) as conn:
        conn.sendall(b"bai14-hostile")
    print("KẾT NỐI ĐƯỢC")
except OSError as exc:
    print("không kết nối được:", type(exc).__name__, exc)"""))
    put("ghi_bay/bai02.ipynb", _hostile(f"""\
import pathlib, lessons_lib
repo = pathlib.Path(lessons_lib.__file__).resolve().parents[1]
for path in (repo / "BI_PHA.txt", repo / "lessons_lib" / "__init__.py", pathlib.Path({str(tmp_file)!r}),
             pathlib.Path({str(folder)!r}) / "trung_thuc" / "BI_PHA.txt"):
    try:
        with open(path, "a") as handle:
            handle.write("# bị phá\\n")
        print("GHI ĐƯỢC", path)
    except OSError as exc:
        print("không ghi được", path, type(exc).__name__)"""))
    put("chay_ngam/bai02.ipynb", _hostile(f"""\
import subprocess
subprocess.Popen(["sleep", {markers[0]!r}], start_new_session=True)
subprocess.run(["sh", "-c", "sleep {markers[1]} >/dev/null 2>&1 &"])   # double fork: its parent is gone
print("để lại hai tiến trình")"""))
    put("lam_day/bai02.ipynb", _hostile(f"""\
written, error = 0, None
try:
    with open("day.bin", "wb") as handle:
        while written < {FILL_CAP_MB}:
            handle.write(b"0" * 2**20)
            handle.flush()
            written += 1
except OSError as exc:
    error = exc
print(f"ghi được {{written}} MiB", "rồi dừng:" if error else "", error or "")
import os
os.remove("day.bin")"""))


@pytest.fixture(scope="module", params=["sandbox", "off"])
def hostile(request, tmp_path_factory):
    """Grade the hostile class once with the sandbox, once without; return what happened."""
    mode = request.param
    if mode == "sandbox" and grade.prepare_sandbox("auto", DISK_MB)[0] is None:
        pytest.skip(grade.prepare_sandbox("auto", DISK_MB)[1])
    base = tmp_path_factory.mktemp(f"hostile-{mode}")
    repo, folder, out, tmp, home = (base / n for n in ("repo", "bai_nop", "ket_qua", "tmp", "home"))
    _copy_course(repo)
    tmp.mkdir()
    token = secrets.token_hex(16)
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(f"-----BEGIN KEY-----\n{token}\n", encoding="utf-8")
    tmp_file = Path("/tmp") / f"bai14-hostile-{secrets.token_hex(8)}.txt"
    markers = [f"{300 + secrets.randbelow(10**6) / 10**6:.6f}" for _ in range(2)]  # `sleep 300.123456`
    listener = socket.create_server(("127.0.0.1", 0))
    make_hostile_class(folder, home / ".ssh" / "id_rsa", listener.getsockname()[1], tmp_file, markers)
    before = {"repo": _tree(repo), "folder": _tree(folder), "home": _tree(home)}
    env = {name: os.environ[name] for name in ("PATH", "LANG", "LC_ALL") if name in os.environ}
    env.update(HOME=str(home), TMPDIR=str(tmp), TEMP=str(tmp), TMP=str(tmp))  # no PYTHONPATH: the copy is the course
    try:
        run = run_grader([sys.executable, "-m", "tools.grade", str(folder), "--out", str(out),
                          "--jobs", "2", "--timeout", "60", "--memory-mb", "1500", "--disk-mb", str(DISK_MB),
                          "--sandbox", "required" if mode == "sandbox" else "off"], env, repo)
        survivors = _marked_processes(markers)
        received = _received(listener)
    finally:
        listener.close()
        for pid in _marked_processes(markers):  # without the sandbox they outlive grading: end them here
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        tmp_file_written = tmp_file.exists()
        tmp_file.unlink(missing_ok=True)
    print(f"{mode}: graded in {run.wall_s:.0f} s (command: {run.reported})\n{run.stdout}\n{run.stderr}")
    assert run.returncode == 0, run.stdout + run.stderr
    with open(out / "grades.csv", encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    logs = {p.name.split("_", 1)[1].split("_bai02")[0]: p.read_text(encoding="utf-8")
            for p in (out / "logs").iterdir()}
    everything = "\n".join([run.stdout, run.stderr, *logs.values(), (out / "grades.csv").read_text(encoding="utf-8-sig"),
                            (out / "grades.html").read_text(encoding="utf-8")])
    return {"mode": mode, "run": run, "rows": rows, "logs": logs, "everything": everything, "token": token,
            "received": received, "survivors": sorted(survivors.values()), "markers": markers, "tmp_file_written": tmp_file_written,
            "before": before, "after": {"repo": _tree(repo), "folder": _tree(folder), "home": _tree(home)},
            "tmp": tmp}


def _sandboxed(hostile) -> bool:
    return hostile["mode"] == "sandbox"


@pytest.mark.slow
def test_the_honest_learner_is_graded_right_beside_them(hostile):
    got = {r["nhiệm vụ"]: r["mã"] for r in hostile["rows"] if r["học viên"] == "trung_thuc"}
    assert got == {"task1": "passed", "task2": "passed", grade.NOTEBOOK_TASK: "ran"}
    for learner in ("do_tham", "goi_ra_ngoai", "ghi_bay", "chay_ngam", "lam_day"):  # each ran, each got its rows
        assert {r["nhiệm vụ"] for r in hostile["rows"] if r["học viên"] == learner} == {
            "task1", "task2", grade.NOTEBOOK_TASK}, learner
    assert hostile["run"].reported is not None


@pytest.mark.slow
def test_the_secret_in_the_graders_home(hostile):
    leaked = hostile["token"] in hostile["everything"]
    if _sandboxed(hostile):
        assert not leaked
        assert hostile["logs"]["do_tham"].count("không đọc được") == 2
    else:  # documents: without the sandbox a learner reads the instructor's files and prints them into the grades
        assert leaked and "ĐỌC ĐƯỢC" in hostile["logs"]["do_tham"]


@pytest.mark.slow
def test_the_listener_on_127_0_0_1(hostile):
    if _sandboxed(hostile):
        assert hostile["received"] == [] and "không kết nối được" in hostile["logs"]["goi_ra_ngoai"]
    else:  # documents: without the sandbox a learner reaches this machine's network (and the Internet)
        assert hostile["received"] == [b"bai14-hostile"]


@pytest.mark.slow
def test_writes_outside_the_submissions_temp_folder(hostile):
    changed = {k for k in hostile["before"] if hostile["before"][k] != hostile["after"][k]}
    if _sandboxed(hostile):
        assert changed == set() and not hostile["tmp_file_written"]
        assert hostile["logs"]["ghi_bay"].count("không ghi được") == 3  # repo ×2, submissions; /tmp: its own
    else:  # documents: the repository, /tmp and the submissions are the learner's to write
        assert {"repo", "folder"} <= changed and hostile["tmp_file_written"]
        assert "BI_PHA.txt" in hostile["after"]["repo"]
    assert list(hostile["tmp"].iterdir()) == []  # the grader's own temp folders: removed either way


@pytest.mark.slow
def test_processes_meant_to_outlive_the_kernel(hostile):
    assert "để lại hai tiến trình" in hostile["logs"]["chay_ngam"]  # both started, in the sandbox too
    if _sandboxed(hostile):
        assert hostile["survivors"] == []
    else:  # documents: without the sandbox one in a session of its own runs on after grading (this test killed it);
        # the one the shell left in the kernel's process group ends with the kernel
        assert hostile["survivors"] == [hostile["markers"][0]]


@pytest.mark.slow
def test_filling_the_disk(hostile):
    log = hostile["logs"]["lam_day"]
    if _sandboxed(hostile):
        assert "rồi dừng" in log and "No space left on device" in log
        assert int(log.split("ghi được ")[1].split()[0]) < DISK_MB
    else:  # documents: without the sandbox only the disk's own size stops it (this notebook stops at 200 MiB)
        assert f"ghi được {FILL_CAP_MB} MiB" in log and "rồi dừng" not in log


def test_the_test_command_installs_bubblewrap_after_one_apt_update(monkeypatch):
    import types

    from tools import course

    sandbox_group = ("sandbox của lệnh chấm bài", ["bubblewrap"])
    assert course.missing_test_packages(exists=lambda path: True, which=lambda name: None) == [sandbox_group]
    assert course.missing_test_packages(exists=lambda path: True, which=lambda name: "/usr/bin/bwrap") == []
    calls = []
    monkeypatch.setattr(course, "missing_test_packages", lambda: [("test trình duyệt", ["chromium"]), sandbox_group])
    monkeypatch.setattr(course.sys, "platform", "linux")
    monkeypatch.setattr(course.os, "geteuid", lambda: 0)
    monkeypatch.setattr(course.shutil, "which", lambda name: "/usr/bin/" + name)
    course.ensure_test_packages(run=lambda cmd, **kwargs: calls.append(cmd) or types.SimpleNamespace(returncode=0))
    assert calls == [["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"],
                     ["apt-get", "install", "-y", "-qq", "bubblewrap"]]
    calls.clear()
    monkeypatch.setattr(course.os, "geteuid", lambda: 1000)  # not root: nothing installed, the tests skip
    course.ensure_test_packages(run=lambda cmd, **kwargs: calls.append(cmd))
    assert calls == []


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "grader-killed"])
@pytest.mark.slow
def test_stopping_the_grader_ends_every_sandboxed_process(tmp_path, how):
    """Ctrl+C stops every notebook and removes its folder; a grader killed outright still takes its sandboxes along."""
    if grade.prepare_sandbox("auto", DISK_MB)[0] is None:
        pytest.skip(grade.prepare_sandbox("auto", DISK_MB)[1])
    marker = f"{300 + secrets.randbelow(10**6) / 10**6:.6f}"
    folder, tmp = tmp_path / "bai_nop", tmp_path / "tmp"
    (folder / "an").mkdir(parents=True)
    tmp.mkdir()
    (folder / "an" / "bai02.ipynb").write_text(json.dumps(_hostile(
        f'import subprocess\nsubprocess.Popen(["sleep", "{marker}"], start_new_session=True)\nwhile True:\n    pass')),
        encoding="utf-8")
    env = {**os.environ, "TMPDIR": str(tmp), "TEMP": str(tmp), "TMP": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-m", "tools.grade", str(folder), "--out",
                             str(tmp_path / "kq"), "--sandbox", "required", "--timeout", "300"], env=env, cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not _marked_processes([marker]) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
        assert _marked_processes([marker]), "the notebook never started its background process"
        proc.send_signal(how)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 10  # the kernel ends the sandbox's PID namespace as bwrap goes
        while _marked_processes([marker]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _marked_processes([marker]) == {}
        if how == signal.SIGINT:
            assert list(tmp.iterdir()) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _marked_processes([marker]):
            os.kill(pid, signal.SIGKILL)

"""`bash tools/course.sh lab` on a fresh copy of the repository serves the course, then shuts down cleanly.

The copy holds what a fresh clone holds (git's tracked and not-ignored files). It reuses the environment this
test runs in (COURSE_VENV) instead of building one, so the test takes seconds: that environment must have been
set up by tools/course.py from the same requirements.txt and pyproject.toml (the README's test command does
that), else the test skips saying so. JupyterLab is started headless (no DISPLAY), as root when the tests run as
root (containers, cloud VMs), and as an unprivileged user through `runuser` where that user can run this
environment's python. The test reads the notebook list through the server's REST API, checks the working copy,
asks the server to shut down, and fails if any process of the launch is left. The URL must work the moment it is
printed: a request sent as soon as the line appears must get an answer, not "connection refused".
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tools import course, workspace

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name == "nt" or shutil.which("bash") is None, reason="needs bash on POSIX")]
UNPRIVILEGED = "nobody"


def fresh_checkout(dest: Path) -> Path:
    """Copy what a fresh clone of this repository holds (tracked and untracked-not-ignored files) into `dest`."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout, cannot tell what a fresh clone holds: {listed.stderr.strip()}")
    for rel in filter(None, listed.stdout.split("\0")):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
    return dest


def _get(url: str, token: str, timeout: float = 5) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""


def _unprivileged_can_run(python: Path) -> str | None:
    """Return None when `runuser -u nobody` can run `python`, else why not."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "the tests do not run as root, so they cannot switch to another user"
    if shutil.which("runuser") is None:
        return "no runuser here"
    probe = subprocess.run(["runuser", "-u", UNPRIVILEGED, "--", str(python), "-c", "pass"], capture_output=True,
                           text=True, timeout=60)
    if probe.returncode != 0:
        return (f"user {UNPRIVILEGED!r} cannot run this environment's python {python} "
                f"({(probe.stderr.strip().splitlines() or ['?'])[-1]}); a venv under a private home cannot be shared")
    return None


@pytest.mark.parametrize("who", ["current-user", "unprivileged-user"])
def test_lab_serves_the_course_from_a_fresh_clone_and_shuts_down(tmp_path, who, course_env_vars):
    python = course.venv_python(Path(sys.prefix))
    if who == "unprivileged-user":
        why_not = _unprivileged_can_run(python)
        if why_not:
            pytest.skip(why_not)
    clone = fresh_checkout(tmp_path / "clone")
    home = tmp_path / "home"
    home.mkdir()
    port, token = course.free_port("127.0.0.1", first=18800), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "COURSE_LAB_IP", "COURSE_NO_BROWSER", "PYTHON")}
    env.update(course_env_vars)
    env.update(COURSE_LAB_PORT=str(port), JUPYTER_TOKEN=token,
               HOME=str(home), JUPYTER_CONFIG_DIR=str(home / "cfg"), JUPYTER_RUNTIME_DIR=str(home / "rt"),
               JUPYTER_DATA_DIR=str(home / "data"), JUPYTERLAB_SETTINGS_DIR=str(home / "lab-settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(home / "lab-workspaces"), PYTHON=sys.executable)
    cmd = ["bash", "tools/course.sh", "lab"]
    if who == "unprivileged-user":
        subprocess.run(["chown", "-R", UNPRIVILEGED, str(clone), str(home)], check=True)
        cmd = ["runuser", "-u", UNPRIVILEGED, "--", "env", *[f"{k}={v}" for k, v in env.items()], *cmd]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    output: list[str] = []
    base = f"http://127.0.0.1:{port}"
    answered_when_printed: list = []  # what the server said to a request sent the moment its URL was printed
    url_printed = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            output.append(line)
            if f"/lab?token={token}" in line and not answered_when_printed:
                try:
                    answered_when_printed.append(_get(f"{base}/api/status", token, timeout=5)[0])
                except (urllib.error.URLError, OSError) as exc:
                    answered_when_printed.append(repr(exc))
                url_printed.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # Wait for the printed URL, not for the server: course.sh prints it only once the server answers, and a
        # test that polled the server itself raced that print on a busy machine.
        assert url_printed.wait(120), f"no URL printed (exit {proc.poll()}):\n{''.join(output)[-3000:]}"
        ready_s = time.perf_counter() - start

        code, body = _get(f"{base}/api/contents", token)
        listed = {item["name"]: item["type"] for item in json.loads(body)["content"]}
        course_notebooks = sorted(p.name for p in (clone / "notebooks").glob("*.ipynb"))
        assert code == 200 and course_notebooks and all(listed.get(n) == "notebook" for n in course_notebooks), listed
        assert listed.get("solutions") == "directory"
        assert _get(f"{base}/lab", token)[0] == 200, "the JupyterLab page itself must be served"
        assert _get(f"{base}/api/contents", "wrong-token")[0] == 403, "the server must require the token"

        printed = "".join(output)
        assert f"{base}/lab?token={token}" in printed, f"the URL with its token must be printed:\n{printed[-2000:]}"
        assert "notebooks_cua_toi/" in printed
        assert answered_when_printed == [200], \
            f"a URL pasted as soon as it is printed must work, got {answered_when_printed}:\n{printed[-2000:]}"
        copy = clone / workspace.WORKSPACE.name
        for name in course_notebooks:
            assert (copy / name).read_bytes() == (clone / "notebooks" / name).read_bytes()
            assert (clone / "notebooks" / name).read_bytes() == (ROOT / "notebooks" / name).read_bytes()

        request = urllib.request.Request(f"{base}/api/shutdown", method="POST",
                                         headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.status in (200, 202, 204)
        assert proc.wait(timeout=60) == 0, "".join(output)[-3000:]
        print(f"\n{who}: served in {ready_s:.1f} s, whole test {time.perf_counter() - start:.1f} s", file=sys.stderr)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    time.sleep(0.5)
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail("processes of the lab launch were still running after the shutdown")

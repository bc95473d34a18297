"""Fixtures for the browser test: a throw-away JupyterLab server and a headless Chromium page.

Everything the server writes (settings, workspaces, checkpoints, kernel files, the notebooks it runs) lives in
one temp folder that is removed afterwards; only the screenshots folder is kept and printed at the end.
Run without a browser: ``pytest -m "not browser"``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tools import course

REPO = Path(__file__).resolve().parents[2]

CHROMIUM = os.environ.get("LESSONS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]
SERVER_START_TIMEOUT_S = 90
VIEWPORT = {"width": 1400, "height": 1400}
# JupyterLab user settings for a quiet, deterministic UI: every cell attached to the DOM (so the error check sees
# all outputs), no news/update toast, no prompt to save the workspace.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
}
_SUMMARY: dict[str, str] = {}


def pytest_terminal_summary(terminalreporter):
    for key, value in _SUMMARY.items():
        terminalreporter.write_line(f"[browser test] {key}: {value}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def e2e_summary() -> dict[str, str]:
    """Lines ("key: value") printed at the end of the run, e.g. how long the site build took."""
    return _SUMMARY


def _missing_browser_reason() -> str | None:
    if not os.access(CHROMIUM, os.X_OK):
        return (f"Chromium không có ở {CHROMIUM}: cài bằng `apt-get install -y chromium` (`bash tools/course.sh "
                "test` tự cài khi chạy bằng root), hoặc đặt LESSONS_CHROMIUM; bỏ qua test này bằng -m 'not browser'")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "thiếu gói playwright (pip install -r requirements.txt); bỏ qua test này bằng -m 'not browser'"
    return None


@pytest.fixture(autouse=True)
def _skip_without_browser(request):
    if request.node.get_closest_marker("browser") is not None:
        reason = _missing_browser_reason()
        if reason:
            pytest.skip(reason)


def _pids_mentioning(text: str) -> list[int]:
    """Return the ids of processes whose command line contains `text` (used with our unique temp path)."""
    pids = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            pids.append(int(entry.name))
    return pids


@dataclass
class Lab:
    """A running JupyterLab: its URL, token, the folder it serves (a temp copy of notebooks/) and its log."""

    base_url: str
    token: str
    root: Path
    log: Path
    process: subprocess.Popen
    started: float = field(default_factory=time.monotonic)

    def mark(self, step: str) -> None:
        """Record how long after the server's start `step` finished (printed at the end of the run)."""
        _SUMMARY[f"t+{time.monotonic() - self.started:5.1f} s"] = step

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}{path}{sep}token={self.token}"

    def api(self, path: str, method: str = "GET") -> bytes:
        request = urllib.request.Request(self.url(path), method=method, data=b"" if method == "POST" else None)
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.read()

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else "(no log)"


def _stop(process: subprocess.Popen, lab: Lab | None, runtime_dir: Path) -> None:
    """Shut JupyterLab down (REST, then SIGTERM/SIGKILL to its process group) and any kernel it left."""
    if lab is not None and process.poll() is None:
        with contextlib.suppress(OSError, urllib.error.URLError):
            lab.api("/api/shutdown", method="POST")
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=15)
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        if process.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=wait)
    # Kernels run in their own sessions; their command line names a connection file in our runtime dir.
    for pid in _pids_mentioning(str(runtime_dir)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def lab():
    """Start JupyterLab on 127.0.0.1 (free port, random token, temp HOME/config/data/runtime, temp notebooks)."""
    if _missing_browser_reason():
        pytest.skip(_missing_browser_reason())
    work = Path(tempfile.mkdtemp(prefix="lessons-e2e-lab-"))
    home, config, data, runtime = (work / name for name in ("home", "config", "data", "runtime"))
    for folder in (home, config, data, runtime):
        folder.mkdir()
    root = work / "notebooks"
    shutil.copytree(REPO / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for plugin, values in LAB_SETTINGS.items():
        path = config / "lab" / "user-settings" / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")
    port, token = course.free_port("127.0.0.1", first=18900), secrets.token_hex(16)
    env = {key: value for key, value in os.environ.items() if not key.startswith(("JUPYTER", "JPY_"))}
    env.update(HOME=str(home), JUPYTER_CONFIG_DIR=str(config), JUPYTER_DATA_DIR=str(data),
               JUPYTER_RUNTIME_DIR=str(runtime), IPYTHONDIR=str(home / ".ipython"), MPLCONFIGDIR=str(home / ".mpl"),
               XDG_CACHE_HOME=str(home / ".cache"), PYTHONDONTWRITEBYTECODE="1",
               JUPYTER_PLATFORM_DIRS="1")
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    command = course.lab_command(sys.executable, root, "127.0.0.1", port, uid, no_browser=True, extra=[
        f"--IdentityProvider.token={token}", "--ServerApp.terminals_enabled=False",
        "--LabApp.extension_manager=readonly", "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"])
    log = work / "jupyterlab.log"
    started = time.monotonic()
    with open(log, "wb") as log_file:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=log_file, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    server = None
    try:
        server = Lab(f"http://127.0.0.1:{port}", token, root, log, process, started)
        if not course.wait_until_serving(process, server.base_url, token, SERVER_START_TIMEOUT_S):
            pytest.fail(f"JupyterLab did not answer within {SERVER_START_TIMEOUT_S} s (exit code "
                        f"{process.poll()}):\n{server.log_tail()}")
        server.mark("JupyterLab server answers")
        yield server
    finally:
        _stop(process, server, runtime)
        _SUMMARY["wall time (JupyterLab start → shut down)"] = f"{time.monotonic() - started:.1f} s"
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def screenshots() -> Path:
    """The folder for screenshots, kept after the run: LESSONS_E2E_SCREENSHOTS, else build/e2e-screenshots/ (git ignores build/)."""
    chosen = os.environ.get("LESSONS_E2E_SCREENSHOTS")
    folder = Path(chosen) if chosen else Path(__file__).resolve().parents[2] / "build" / "e2e-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    _SUMMARY["screenshots"] = str(folder)
    return folder


@pytest.fixture(scope="module")
def browser():
    """A headless Debian Chromium driven by Playwright (no browser download: executable_path)."""
    from playwright.sync_api import sync_playwright

    driver = sync_playwright().start()
    try:
        chromium = driver.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        driver.stop()


@pytest.fixture(scope="module")
def offline_page(browser):
    """Make pages (`origin`, context options) that reach only `origin`; a page's `problems` list console and page
    errors, failed requests, HTTP errors and each request to another host (refused: no CDN, font or badge host)."""
    pages = []

    def make(origin: str, **options):
        page = browser.new_context(locale="vi-VN", **options).new_page()
        page.set_default_timeout(30_000)
        page.problems = problems = []
        page.on("console", lambda msg: problems.append(f"console.{msg.type}: {msg.text}") if msg.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
        page.on("requestfailed", lambda request: problems.append(f"request failed: {request.url} ({request.failure})"))
        page.on("response", lambda response: problems.append(f"HTTP {response.status}: {response.url}")
                if response.status >= 400 else None)

        def route(route):
            if route.request.url.startswith(origin):
                route.continue_()
            else:
                problems.append(f"request to another host: {route.request.url}")
                route.abort()

        page.route("**/*", route)
        pages.append(page)
        return page

    yield make
    for page in pages:
        page.context.close()


@pytest.fixture(scope="module")
def lab_page(lab, offline_page):
    """One JupyterLab page shared by the module's tests; requests to anything but the server are refused."""
    page = offline_page(lab.base_url, viewport=VIEWPORT)
    page.goto(lab.url("/lab?reset"), wait_until="domcontentloaded")
    page.locator("#jp-main-dock-panel").wait_for(state="visible", timeout=90_000)
    page.locator(".jp-DirListing-content").wait_for(state="visible", timeout=60_000)
    lab.mark("JupyterLab loaded in Chromium")
    try:
        yield page
    finally:
        if page.problems:  # reported, not failed on: e.g. the Colab/Kaggle badge images this page may not fetch
            unique = list(dict.fromkeys(m[:160] for m in page.problems))
            _SUMMARY["browser problems"] = f"{len(page.problems)}: " + " | ".join(unique[:3])


@pytest.fixture
def page(lab_page, screenshots, request):
    """The shared page; a screenshot named after the test is saved when the test fails."""
    yield lab_page
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        with contextlib.suppress(Exception):
            lab_page.screenshot(path=str(screenshots / f"FAILED_{request.node.name}.png"), full_page=True)

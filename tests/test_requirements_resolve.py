"""requirements.txt resolves on every platform and Python the README claims, against the public index only.

A real resolver (uv's `pip compile`, with `--python-platform` / `--python-version`) resolves the file for each of
{Linux x86_64, macOS 14+ arm64, Windows x86_64} x {Python 3.10, 3.11, 3.12, 3.13} against https://pypi.org/simple,
wheels only (no compiler needed on the learner's machine). uv reads no pip configuration (`--no-config`, and pip's
files are not uv's), so this machine's local wheel folder and indexes play no part. Negative controls: the pins
of version 0.1.0 (tests/fixtures/requirements-0.1.0.txt, `torch==2.13.0+cpu`, a build only this machine's local
wheel folder holds) fail on all 12 pairs for that reason, and macOS 13 fails because torch 2.13 ships macOS
wheels for 14+ only. The 26 resolutions run concurrently; uv's cache lives in the course cache folder
($BAI14_CACHE or ~/.cache/bai14-course, sub-folder uv), so later runs only revalidate metadata.
When the public index is unreachable, the tests skip with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import colab_env  # noqa: E402

INDEX = "https://pypi.org/simple"
REQUIREMENTS = ROOT / "requirements.txt"
OLD_REQUIREMENTS = ROOT / "tests" / "fixtures" / "requirements-0.1.0.txt"
# uv's names for the platforms the README claims; torch 2.13's Linux wheels are manylinux_2_28.
PLATFORMS = {"linux-x86_64": "x86_64-manylinux_2_28", "macos-arm64": "aarch64-apple-darwin",
             "windows-x86_64": "x86_64-pc-windows-msvc"}
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
MACOS_FLOOR = "14.0"  # torch 2.13.0 publishes macosx_14_0_arm64 wheels only
PAIRS = [(platform, python) for platform in PLATFORMS for python in PYTHONS]


@dataclass(frozen=True)
class Resolution:
    """One `uv pip compile` run: its exit status, what it pinned (name -> version) and its error text."""

    returncode: int
    pins: dict
    stderr: str
    seconds: float


def _uv() -> str:
    try:
        from uv import find_uv_bin
    except ImportError:
        found = shutil.which("uv")
        if found is None:
            pytest.fail("uv is missing: it is in requirements.txt; run `bash tools/course.sh test` to install it")
        return found
    return find_uv_bin()


def _index_reachable() -> str | None:
    """Return None when the public index answers, else why not."""
    try:
        with urllib.request.urlopen(f"{INDEX}/pip/", timeout=10) as response:
            return None if response.status == 200 else f"HTTP {response.status}"
    except (urllib.error.URLError, OSError) as exc:
        return f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"


def resolve(requirements: Path, platform: str, python: str, macos_target: str = MACOS_FLOOR) -> Resolution:
    """Resolve `requirements` with uv for one uv platform name and Python version, against the public index."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env.update(UV_CACHE_DIR=str(colab_env.cache_dir() / "uv"), MACOSX_DEPLOYMENT_TARGET=macos_target,
               UV_NO_PROGRESS="1")
    # --python: uv only needs an interpreter to run, not one of the target version (never download one)
    cmd = [_uv(), "pip", "compile", "--quiet", "--no-config", "--no-header", "--no-annotate",
           "--python", sys.executable, "--no-python-downloads",
           "--index-url", INDEX, "--only-binary", ":all:", "--python-platform", platform,
           "--python-version", python, str(requirements)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    pins = dict(re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", proc.stdout, flags=re.M))
    return Resolution(proc.returncode, {colab_env.normalize(k): v for k, v in pins.items()}, proc.stderr,
                      time.perf_counter() - start)


@pytest.fixture(scope="module")
def resolutions() -> dict:
    """Every resolution this module checks, run concurrently: {(file, platform, python[, macOS]): Resolution}."""
    problem = _index_reachable()
    if problem is not None:
        pytest.skip(f"the public package index {INDEX} is unreachable from here ({problem}); "
                    "the resolver test needs it")
    jobs = {("new", p, v): (REQUIREMENTS, PLATFORMS[p], v) for p, v in PAIRS}
    jobs |= {("old", p, v): (OLD_REQUIREMENTS, PLATFORMS[p], v) for p, v in PAIRS}
    jobs[("new", "macos-arm64", "3.12", "13.0")] = (REQUIREMENTS, PLATFORMS["macos-arm64"], "3.12", "13.0")
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {key: pool.submit(resolve, *args) for key, args in jobs.items()}
        results = {key: future.result() for key, future in futures.items()}
    print(f"\n{len(results)} resolutions in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return results


def _requirement_lines(path: Path) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines()
            if line.split("#", 1)[0].strip()]


# --------------------------------------------------------------------------- the file itself (no network)


def test_every_line_pins_one_version_without_a_local_label():
    for line in _requirement_lines(REQUIREMENTS):
        spec = str(Requirement(line).specifier)
        assert re.fullmatch(r"==[0-9][0-9A-Za-z.]*", spec), \
            f"pin each package to one public version (name==X.Y.Z, no '+local' label): {line!r}"
    assert "torch==2.13.0" in _requirement_lines(REQUIREMENTS), "torch is the tested 2.13.0, with no local label"


def test_the_negative_control_is_the_old_cpu_only_pin():
    assert "torch==2.13.0+cpu" in _requirement_lines(OLD_REQUIREMENTS)


# --------------------------------------------------------------------------- the resolutions


@pytest.mark.parametrize("platform, python", PAIRS, ids=[f"{p}-py{v}" for p, v in PAIRS])
def test_requirements_resolve_from_the_public_index(resolutions, platform, python):
    result = resolutions[("new", platform, python)]
    assert result.returncode == 0, f"requirements.txt does not resolve on {platform} / Python {python}:\n" \
                                   f"{result.stderr}"
    assert result.pins.get("torch") == "2.13.0"
    wanted = {colab_env.normalize(req.name): str(req.specifier).removeprefix("==")
              for req in map(Requirement, _requirement_lines(REQUIREMENTS))
              if req.marker is None or req.marker.evaluate({"python_version": python})}
    assert {name: result.pins.get(name) for name in wanted} == wanted, "the resolver must keep every pin"


@pytest.mark.parametrize("platform, python", PAIRS, ids=[f"{p}-py{v}" for p, v in PAIRS])
def test_the_old_pins_fail_for_want_of_a_cpu_build_on_the_public_index(resolutions, platform, python):
    result = resolutions[("old", platform, python)]
    assert result.returncode != 0, f"the 0.1.0 pins unexpectedly resolve on {platform} / Python {python}"
    assert "no version of torch==2.13.0+cpu" in result.stderr, f"failed for another reason:\n{result.stderr}"


def test_macos_13_is_below_the_floor_the_readme_states(resolutions):
    result = resolutions[("new", "macos-arm64", "3.12", "13.0")]
    assert result.returncode != 0 and "torch" in result.stderr and "macosx_14_0_arm64" in result.stderr, \
        result.stderr


"""The version matrix: run the course on the Python and torch versions learners really have.

For each combination (a Python X.Y and a torch release) it builds a virtualenv holding Colab's notebook stack
(envs/colab-pins.txt) with that torch instead of the pinned one, installs lessons_lib the way the notebooks'
setup cell does (tools/colab_env.py's install_like_setup_cell: a plain `pip install <wheel>`, which must change
nothing else), shows what a learner sees (the banner, environment_report() and a %%gpu cell), runs every
notebook top to bottom (twice in one kernel by default: learners re-run cells), checks each executed notebook's
outputs with tools/output_checks.py (the lesson's `<!-- expect … -->` lines for that kind of machine, and every
warning or error line a learner would see that the prose does not explain: a row with one fails), and runs
lessons_lib's unit tests with that environment's pytest. The Colab rows run their kernels with Colab's environment
variables (colab_env.COLAB_RUNTIME_ENV), so the course takes its Colab paths (skip notices, hints) there. torch comes from the public index, so a Linux run gets PyPI's default build:
a CUDA build that, on a machine without an NVIDIA driver, takes the path of Colab's CPU runtime.

Where a Colab pin has no wheel for a Python (numpy 2.0.2 has none for 3.13), the pin is swapped for the oldest
newer release that has one, and each swap is recorded in the results and the table.

Everything is cached under $BAI14_CACHE (tools/colab_env.py's cache folder):
    matrix-wheels/<combo>-<key>/   every wheel the combination needs, downloaded once (pip download), then
                                   installed offline (--no-index); delete it to download again
    matrix-envs/<combo>-<key>/     the built environment, reused while <key> is unchanged
<key> hashes the recipe, the exact Python, the pins with the combination's torch and the test tools.
pip's own configuration (config files, PIP_FIND_LINKS, PIP_CONSTRAINT...) is ignored: packages come from
--index-url only.

Usage:
    python tools/version_matrix.py [run] [--combo ID ...] [--repeat N] [--readme]   # run (default: every combo)
    python tools/version_matrix.py list                                              # the combinations, cache state
    python tools/version_matrix.py table [--readme]        # print the results table (and rewrite README's)
    bash tools/course.sh matrix [same options]             # the same, after setting up .venv

Environment variables:
    BAI14_CACHE             cache folder (default ~/.cache/bai14-course)
    BAI14_MATRIX_WHEELS     a folder of already-downloaded wheels (searched recursively): matching files are
                            hard-linked (or copied) into matrix-wheels/ before anything is downloaded
    BAI14_MATRIX_INDEX_URL  the package index (default https://pypi.org/simple)
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import MutableMapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

sys.path.insert(0, str(Path(__file__).resolve().parent))
import colab_env  # noqa: E402
import output_checks  # noqa: E402

ROOT = colab_env.ROOT
# Bump when the build recipe below changes in a way that needs fresh environments.
RECIPE = "1"
DEFAULT_INDEX_URL = "https://pypi.org/simple"
RESULTS = ROOT / "docs" / "version-matrix.json"
README = ROOT / "README.md"
TABLE_START, TABLE_END = "<!-- version-matrix:start -->", "<!-- version-matrix:end -->"
# The regular environment's test tools (requirements.txt pins them) that the unit tests need in each environment.
TEST_TOOLS = ("pytest", "nbval")
# pip settings that say how to reach the index, not where packages come from: kept. Every other PIP_* variable
# (PIP_FIND_LINKS, PIP_CONSTRAINT, PIP_INDEX_URL, ...) is dropped, and PIP_CONFIG_FILE=os.devnull makes pip
# read no configuration file.
PIP_ENV_KEPT = ("PIP_CERT", "PIP_CLIENT_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES", "PIP_PROXY",
                "PIP_TRUSTED_HOST", "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_NO_INPUT", "PIP_PROGRESS_BAR")
# Tests that check the repository with the regular environment's tools, not the runtime: left out in each
# environment, with the reason recorded in the results.
# (Reasons in Vietnamese: the README's table lists them.)
UNIT_TEST_LEFT_OUT = {
    "tests/e2e": "JupyterLab + Playwright + Chromium của môi trường thường (marker browser)",
    "tests/test_python310.py::test_ruff_finds_no_syntax_newer_than_python310":
        "ruff của môi trường thường; kiểm tra cú pháp của lessons_lib, không phụ thuộc phiên bản chạy",
    "tests/test_requirements_resolve.py":
        "uv của môi trường thường; giải requirements.txt cho mọi nền tảng, không phụ thuộc phiên bản chạy",
    "tests/test_version_matrix.py::test_readme_table_is_the_committed_results":
        "so README với file kết quả mà chính lần chạy đang ghi",
}
UNIT_TEST_MARKERS = "not colab_env and not browser and not matrix"
_NETWORK_ERRORS = re.compile(r"NewConnectionError|Max retries exceeded|Could not fetch URL|Temporary failure in name"
                             r"|Name or service not known|ProxyError|SSLError|Connection refused|timed out",
                             re.IGNORECASE)
_MISSING = re.compile(r"Could not find a version that satisfies the requirement ([A-Za-z0-9._-]+)==(\S+)"
                      r" \(from versions: ([^)]*)\)")


class MatrixError(RuntimeError):
    """A combination cannot be built or run; the message says why and what to do (Vietnamese, then English)."""


@dataclass(frozen=True)
class Swap:
    """A Colab pin replaced in one combination: `name` pinned at `pinned` becomes `version`, for `reason`."""

    name: str
    pinned: str
    version: str
    reason: str


@dataclass(frozen=True)
class Combo:
    """One combination of the matrix: a Python X.Y, a torch release, and who runs it."""

    python: str
    torch: str
    who: str
    swaps: tuple[Swap, ...] = field(default=())
    colab: bool = False  # a Colab row: its kernels see Colab's environment variables

    def __post_init__(self) -> None:
        if not re.fullmatch(r"3\.\d+", self.python):
            raise ValueError(f"python must be a version like '3.12', got {self.python!r}")
        try:
            Version(self.torch)
        except InvalidVersion:
            raise ValueError(f"torch must be a release like '2.11.0', got {self.torch!r}") from None

    @property
    def id(self) -> str:
        """Return the combination's name, e.g. "py3.12-torch2.11.0"."""
        return f"py{self.python}-torch{self.torch}"

    @property
    def python_version(self) -> tuple[int, int]:
        """Return the Python version as a tuple, e.g. (3, 12)."""
        major, minor = self.python.split(".")
        return int(major), int(minor)


# The combinations the README's table covers (issue 17). The newest torch is the newest this machine's pip
# allows (/etc/xdg/pip caps torch at 2.14.1); PyPI's newest at the time of writing is 2.15.0.
COMBOS = (
    Combo("3.12", "2.11.0", "Colab (2026-06), runtime CPU", colab=True),
    Combo("3.12", "2.8.0", "ảnh Colab/Kaggle cũ hơn", colab=True),
    Combo("3.11", "2.4.1", "cận dưới `torch>=2.4` của pyproject"),
    Combo("3.13", "2.14.1", "torch mới nhất pip ở đây cho phép (PyPI đã có 2.15.0)"),
    Combo("3.10", "2.14.1", "cận dưới `python>=3.10` của pyproject (vd Ubuntu 22.04)"),
)


def find_combos(ids: list[str] | None) -> list[Combo]:
    """Return the combinations named by `ids` (every one when None or empty), in COMBOS order."""
    if not ids:
        return list(COMBOS)
    known = {combo.id: combo for combo in COMBOS}
    unknown = [name for name in ids if name not in known]
    if unknown:
        raise ValueError(f"unknown combination {', '.join(unknown)}; choose among: {', '.join(known)}")
    return [combo for combo in COMBOS if combo.id in ids]


# --------------------------------------------------------------------------- pins and keys


def isolate_pip(environ: MutableMapping[str, str]) -> list[str]:
    """Make pip in `environ` ignore local configuration (files and PIP_* sources); return what was removed."""
    removed = sorted(key for key in environ if key.startswith("PIP_") and key not in PIP_ENV_KEPT)
    for key in removed:
        del environ[key]
    environ["PIP_CONFIG_FILE"] = os.devnull
    return removed


def tool_pins(requirements: Path = ROOT / "requirements.txt") -> dict[str, str]:
    """Return {name: version} of the test tools (TEST_TOOLS) as requirements.txt pins them."""
    found = {}
    for raw in Path(requirements).read_text(encoding="utf-8").splitlines():
        match = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s#;]+)\s*(#.*)?", raw)
        if match and colab_env.normalize(match.group(1)) in TEST_TOOLS:
            found[colab_env.normalize(match.group(1))] = match.group(2)
    missing = [name for name in TEST_TOOLS if name not in found]
    if missing:
        raise ValueError(f"{requirements} must pin {', '.join(missing)} as name==version")
    return found


def combo_pins(combo: Combo, pins: dict[str, str], swaps: tuple[Swap, ...] | list[Swap] = ()) -> dict[str, str]:
    """Return the pins of one combination: `pins` with the combination's torch and every swap applied."""
    if "torch" not in pins:
        raise ValueError("the pins must pin torch (envs/colab-pins.txt does)")
    result = dict(pins, torch=combo.torch)
    for swap in (*combo.swaps, *swaps):
        if swap.name not in result or swap.name == "torch":
            raise ValueError(f"a swap must replace a pinned package other than torch, got {swap.name!r}")
        result[swap.name] = swap.version
    return result


def requirements_text(pins: dict[str, str], tools: dict[str, str]) -> str:
    """Return a requirements file pinning `pins` then the test tools, one `name==version` a line."""
    clash = sorted(set(pins) & set(tools))
    if clash:
        raise ValueError(f"test tools must not be pinned by the pins file too: {', '.join(clash)}")
    return "".join(f"{name}=={version}\n" for name, version in [*sorted(pins.items()), *sorted(tools.items())])


def combo_key(combo: Combo, python_version: str, requirements: str) -> str:
    """Return the cache key of a combination: the recipe, the exact Python and the requirements."""
    text = f"{RECIPE}\n{combo.id}\n{python_version}\n{requirements}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --------------------------------------------------------------------------- wheels


def wheel_tags(filename: str) -> set[str]:
    """Return the tags ("cp312-cp312-manylinux_2_28_x86_64", ...) a wheel file name declares."""
    if not filename.endswith(".whl") or filename.count("-") < 4:
        raise ValueError(f"not a wheel file name (name-version-python-abi-platform.whl): {filename!r}")
    python, abi, platform = filename[:-4].split("-")[-3:]
    return {f"{p}-{a}-{pl}" for p in python.split(".") for a in abi.split(".") for pl in platform.split(".")}


def interpreter_tags(python: Path | str) -> list[str]:
    """Return the wheel tags `python` accepts (from its pip's packaging), most specific first."""
    code = "import json; from pip._vendor.packaging import tags; print(json.dumps([str(t) for t in tags.sys_tags()]))"
    return json.loads(colab_env._run([python, "-c", code]).stdout)


def link_wheels(sources: list[Path], dest: Path, tags: set[str]) -> list[str]:
    """Hard-link (else copy) into `dest` each wheel under `sources` that fits `tags` and `dest` lacks; return names."""
    dest.mkdir(parents=True, exist_ok=True)
    linked = []
    for source in sources:
        if not Path(source).is_dir():
            continue
        for wheel in sorted(Path(source).rglob("*.whl")):
            target = dest / wheel.name
            if target.exists() or wheel.parent == dest or not (wheel_tags(wheel.name) & tags):
                continue
            try:
                os.link(wheel, target)
            except OSError:
                shutil.copy2(wheel, target)
            linked.append(wheel.name)
    return linked


def pip_files(output: str) -> list[str]:
    """Return the wheel names `pip download` reports as saved or already there, in order, without repeats."""
    names = re.findall(r"^\s*(?:Saved|File was already downloaded)\s+(\S+\.whl)\s*$", output, re.MULTILINE)
    return list(dict.fromkeys(Path(name).name for name in names))


def missing_pins(output: str) -> list[tuple[str, str, list[str]]]:
    """Return (name, version, versions that have a wheel here) for each `name==version` pip found no wheel of."""
    return [(colab_env.normalize(name), version, [v.strip() for v in versions.split(",") if v.strip() not in ("", "none")])
            for name, version, versions in _MISSING.findall(output)]


def closest_release(version: str, available: list[str]) -> tuple[str, str] | None:
    """Return (release, "newer" or "older"): the oldest final release in `available` newer than `version`, else
    the newest older one (a Requires-Python limit leaves only older ones); None when `available` has neither."""
    pinned = Version(version)
    releases = []
    for candidate in available:
        try:
            parsed = Version(candidate)
        except InvalidVersion:
            continue
        if not parsed.is_prerelease and not parsed.is_devrelease and parsed != pinned:
            releases.append(parsed)
    newer = [v for v in releases if v > pinned]
    if newer:
        return str(min(newer)), "newer"
    return (str(max(releases)), "older") if releases else None


def download_failed(combo: Combo, index_url: str, requirements: Path, output: str) -> MatrixError:
    """Return the error for a download that failed: what was needed, from where, and what to do."""
    tail = "\n".join(output.strip().splitlines()[-8:])
    if _NETWORK_ERRORS.search(output):
        return MatrixError(
            f"Không tải được gói cho {combo.id} từ {index_url}: không kết nối được (xem dòng pip bên dưới).\n"
            f"Cần: các gói trong {requirements} (torch=={combo.torch} bản mặc định của PyPI, với Linux là bản CUDA "
            f"vài GB; bộ gói notebook của Colab; {', '.join(TEST_TOOLS)}) cho Python {combo.python}.\n"
            f"Cách khắc phục: mở mạng tới {index_url} rồi chạy lại, hoặc đặt BAI14_MATRIX_WHEELS=<thư mục các file "
            f".whl đã tải sẵn> (tải ở máy có mạng: python{combo.python} -m pip download -d <thư mục> -r {requirements.name}).\n"
            f"Could not download the packages of {combo.id} from {index_url}: no connection (see pip's lines below).\n"
            f"Needed: the packages in {requirements} (torch=={combo.torch}, PyPI's default build, on Linux a CUDA "
            f"build of a few GB; Colab's notebook stack; {', '.join(TEST_TOOLS)}) for Python {combo.python}.\n"
            f"Fix: allow access to {index_url} and run again, or set BAI14_MATRIX_WHEELS=<a folder of .whl files "
            f"downloaded beforehand> (on a machine with Internet: python{combo.python} -m pip download -d <folder> "
            f"-r {requirements.name}).\n{tail}")
    return MatrixError(f"pip could not download what {combo.id} needs ({requirements}) from {index_url}:\n{tail}")


def ensure_wheels(combo: Combo, python: Path | str, folder: Path, pins: dict[str, str], tools: dict[str, str],
                  index_url: str, sources: list[Path], log=print) -> dict:
    """Fill `folder` with exactly the wheels the combination needs for `python`; return its manifest.

    Args:
        combo: The combination (its torch and declared swaps apply to `pins`).
        python: A python of the combination's version, with pip (it runs `pip download`).
        folder: The combination's wheel folder.
        pins: The Colab pins; tools: the test tools' pins.
        index_url: Where pip downloads from.
        sources: Folders whose wheels are linked into `folder` first.
        log: Called with one line per step.

    Wheels found under `sources` (a folder of pre-downloaded wheels, other combinations' folders) are linked
    first; pip downloads the rest from `index_url`. A pin without a wheel for this Python is swapped for the
    oldest newer release that has one. The manifest ({"files", "swaps", "requirements"}) is written to
    folder/manifest.json; while it and its files exist, nothing is downloaded again.
    """
    manifest_path = folder / "manifest.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if all((folder / name).exists() for name in manifest["files"]):
            return manifest
    start = time.perf_counter()
    tags = set(interpreter_tags(python))
    linked = link_wheels(sources, folder, tags)
    if linked:
        log(f"  {len(linked)} wheels linked from {', '.join(map(str, sources))}")
    swaps: list[Swap] = []
    for _ in range(len(pins)):
        text = requirements_text(combo_pins(combo, pins, swaps), tools)
        (folder / "requirements.txt").write_text(text, encoding="utf-8")
        log(f"  pip download for Python {combo.python} from {index_url} (only what {folder.name} lacks)")
        proc = subprocess.run([str(python), "-m", "pip", "download", "--only-binary", ":all:", "--index-url", index_url,
                               "-d", str(folder), "-r", str(folder / "requirements.txt")],
                              capture_output=True, text=True, env=colab_env.clean_environ(), cwd=colab_env.neutral_cwd())
        output = proc.stdout + proc.stderr
        if proc.returncode == 0:
            break
        missing = missing_pins(output)
        if not missing or _NETWORK_ERRORS.search(output):
            raise download_failed(combo, index_url, folder / "requirements.txt", output)
        for name, version, available in missing:
            closest = closest_release(version, available)
            if name not in pins or name == "torch" or closest is None:
                raise MatrixError(f"{name}=={version} has no wheel for Python {combo.python} on {index_url} "
                                  f"(wheels exist for: {', '.join(available) or 'none'}); pick another combination "
                                  "or declare a swap in tools/version_matrix.py's COMBOS")
            release, direction = closest
            why = (f"{release} is the oldest newer release that has one" if direction == "newer" else
                   f"no newer release has one either (Requires-Python): {release} is the newest older one")
            swaps.append(Swap(name, version, release, f"{name} {version} has no wheel for Python {combo.python}; {why}"))
            log(f"  swap: {name} {version} -> {release} (no wheel of {version} for Python {combo.python})")
    else:  # pragma: no cover - every pass swaps one more pin
        raise MatrixError(f"pip download kept failing for {combo.id}:\n{output[-3000:]}")
    files = pip_files(output)
    for stale in folder.glob("*.whl"):  # linked but not needed: keep exactly what this combination installs
        if stale.name not in files:
            stale.unlink()
    manifest = {"files": files, "swaps": [asdict(swap) for swap in swaps], "requirements": text,
                "index_url": index_url, "seconds": round(time.perf_counter() - start, 1),
                "date": datetime.date.today().isoformat()}
    manifest_path.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    return manifest


# --------------------------------------------------------------------------- the environment


def installed_drift(expected: dict[str, str], installed: dict[str, str]) -> dict[str, tuple[str, str | None]]:
    """Return {name: (expected, installed)} for each expected package whose installed version differs."""
    return {name: (version, installed.get(name)) for name, version in sorted(expected.items())
            if installed.get(name) != version}


def _locations(combo: Combo) -> tuple[str, Path, Path, str, dict[str, str], dict[str, str]]:
    base_python = colab_env.find_python(combo.python_version)
    version = colab_env._run([base_python, "-c", "import sys; print(sys.version)"]).stdout.strip()
    pins, tools = colab_env.read_pins(), tool_pins()
    requirements = requirements_text(combo_pins(combo, pins), tools)
    key = f"{combo.id}-{combo_key(combo, version, requirements)}"
    cache = colab_env.cache_dir()
    return base_python, cache / "matrix-wheels" / key, cache / "matrix-envs" / key, requirements, pins, tools


def ensure_env(combo: Combo, index_url: str = DEFAULT_INDEX_URL, rebuild: bool = False, log=print) -> dict:
    """Build (or reuse) the environment of `combo`; return {"python", "wheels", "swaps", "built_s", "extras"}.

    The environment holds the combination's pins and test tools, checked with `pip check` and against the pins;
    lessons_lib is not installed here (see install_lessons_lib).
    """
    base_python, wheels, env, requirements, pins, tools = _locations(combo)
    python = colab_env.env_python(env)
    done = env / ".complete.json"
    with colab_env.locked(f"matrix-{combo.id}"):  # one lock per combination: others build or run meanwhile
        if not rebuild and done.exists() and python.exists():
            return json.loads(done.read_text(encoding="utf-8"))
        start = time.perf_counter()
        log(f"{combo.id}: building {env} (first time: several minutes)")
        sources = [Path(p) for p in filter(None, [os.environ.get("BAI14_MATRIX_WHEELS")])]
        sources.append(wheels.parent)
        # pip download needs a pip that runs on this Python: the new environment's own (venv's bundled one).
        shutil.rmtree(env, ignore_errors=True)
        env.parent.mkdir(parents=True, exist_ok=True)
        colab_env._run([base_python, "-m", "venv", env])
        manifest = ensure_wheels(combo, python, wheels, pins, tools, index_url, sources, log)
        swaps = [Swap(**swap) for swap in manifest["swaps"]]
        expected = combo_pins(combo, pins, swaps)
        offline = ["--no-index", "--find-links", wheels]
        log(f"  installing {len(manifest['files'])} wheels offline from {wheels}")
        colab_env._run([python, "-m", "pip", "install", "-q", *offline, f"pip=={expected['pip']}"])
        colab_env._run([python, "-m", "pip", "install", "-q", *offline, "-r", wheels / "requirements.txt"])
        colab_env._run([python, "-m", "pip", "check"])
        installed = colab_env.installed_versions(python)
        drift = installed_drift({**expected, **tools}, installed)
        if drift:
            raise MatrixError(f"{combo.id}: the environment differs from its pins (pinned, installed): {drift}")
        info = {"python": str(python), "wheels": str(wheels), "swaps": manifest["swaps"],
                "built_s": round(time.perf_counter() - start, 1),
                "extras": {name: version for name, version in sorted(installed.items())
                           if name not in expected and name not in tools}}
        done.write_text(json.dumps(info, indent=1), encoding="utf-8")
        for other in env.parent.glob(f"{combo.id}-*"):  # older environments of this combination: GBs each
            if other != env:
                shutil.rmtree(other, ignore_errors=True)
        for other in wheels.parent.glob(f"{combo.id}-*"):
            if other != wheels:
                shutil.rmtree(other, ignore_errors=True)
        log(f"  built in {info['built_s']:.0f} s")
        return info


def install_lessons_lib(python: Path | str, lock: str) -> dict:
    """Install the current lessons_lib wheel as the setup cell does; return {"planned", "changed", "ok"}."""
    with colab_env.locked("colab-env"):  # the wheel cache is shared with the Colab-pinned environment
        wheel = colab_env.cached_wheel()
    with colab_env.locked(lock):
        colab_env.uninstall_lessons_lib(python)
        record = colab_env.install_like_setup_cell(python, wheel)
    changed = {name: list(pair) for name, pair in record["changed"].items()}
    ok = record["planned"] == ["lessons-lib"] and list(changed) == ["lessons-lib"]
    return {"planned": record["planned"], "changed": changed, "ok": ok}


_FACTS = """
import json, platform, sys, torch, lessons_lib
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                  "hip": getattr(torch.version, "hip", None), "cuda_available": torch.cuda.is_available(),
                  "mps_available": bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()),
                  "lessons_lib": lessons_lib.__file__}))
"""


def torch_facts(python: Path | str) -> dict:
    """Return the environment's Python and torch versions, torch's CUDA/HIP build and where lessons_lib is."""
    return json.loads(colab_env._run([python, "-c", _FACTS]).stdout.strip().splitlines()[-1])


def machine_kind(facts: dict) -> str:
    """Return the output checks' kind of machine (cpu-build, cuda-no-gpu, cuda, mps) from torch_facts()."""
    return output_checks.kind_of(bool(facts.get("cuda") or facts.get("hip")), bool(facts.get("cuda_available")),
                                 bool(facts.get("mps_available")))


def build_name(facts: dict) -> str:
    """Return the build of torch in words: "CUDA 13.0", "ROCm 6.4" or "CPU"."""
    if facts.get("cuda"):
        return f"CUDA {facts['cuda']}"
    if facts.get("hip"):
        return f"ROCm {facts['hip']}"
    return "CPU"


# What a learner on Colab sees at the top of a notebook and in a GPU cell: the cells run in a kernel of the
# environment with Colab's environment variables (colab_env.COLAB_RUNTIME_ENV; lessons_lib.platforms.detect_platform
# reads COLAB_RELEASE_TAG), so lessons_lib words its hints as it does on Colab.
LEARNER_VIEW_CELLS = (
    "%load_ext lessons_lib.notebook",
    "from lessons_lib.device import environment_report\nenvironment_report()",
    "%%gpu\nprint('GPU BODY RAN')",
)


def learner_view(python: Path | str) -> list[dict]:
    """Run LEARNER_VIEW_CELLS in a kernel of `python` as on Colab; return each cell's source and the text it shows."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in LEARNER_VIEW_CELLS]
    with tempfile.TemporaryDirectory() as tmp:
        source, executed = Path(tmp, "learner_view.ipynb"), Path(tmp, "executed.ipynb")
        nbformat.write(nb, source)
        result = colab_env.run_notebook(python, source, save_to=executed, environ=colab_env.COLAB_RUNTIME_ENV)
        if result["error"] is not None:
            raise MatrixError(f"the learner-view cells failed:\n{result['error']}")
        cells = nbformat.read(executed, as_version=4).cells
    shown = []
    for cell in cells:
        parts = []
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                parts.append(("[stderr] " if output.get("name") == "stderr" else "") + output.get("text", ""))
            elif "text/plain" in output.get("data", {}):
                parts.append(output["data"]["text/plain"] + "\n")
        shown.append({"source": cell.source, "shows": "".join(parts)})
    return shown


def run_checked_notebook(python: Path | str, path: Path, repeat: int, kind: str, colab: bool) -> dict:
    """Run one notebook in the environment of `python` and check its outputs for `kind`; return its result row.

    The row's "ok" is True only when no cell raised and output_checks.check_outputs found no problem.
    """
    import nbformat

    with tempfile.TemporaryDirectory() as tmp:
        executed = Path(tmp, "executed.ipynb")
        result = colab_env.run_notebook(python, path, repeat=repeat, save_to=executed,
                                        environ=colab_env.COLAB_RUNTIME_ENV if colab else None)
        problems = [] if result["error"] is not None else output_checks.check_outputs(
            nbformat.read(executed, as_version=4), kind)
    name = Path(result["notebook"]).relative_to(ROOT).as_posix()
    return {"notebook": name, "ok": result["error"] is None and not problems, "wall_s": result["wall_s"],
            "error": result["error"], "problems": problems, "stderr": result["stderr"]}


def run_unit_tests(python: Path | str, timeout: int = 3600) -> dict:
    """Run lessons_lib's unit tests (tests/) with the environment's pytest against the installed wheel.

    pytest runs from a neutral folder, so `import lessons_lib` finds the installed wheel, not the checkout.

    Returns:
        {"passed", "failed", "errors", "skipped", "deselected", "wall_s", "failures": [first lines],
        "left_out": {node: reason}}.
    """
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp, "junit.xml")
        cmd = [python, "-m", "pytest", ROOT / "tests", "--rootdir", ROOT, "-c", ROOT / "pyproject.toml",
               "-m", UNIT_TEST_MARKERS, "-q", "-p", "no:cacheprovider", "--junitxml", junit]
        for node in UNIT_TEST_LEFT_OUT:
            cmd += ["--ignore", ROOT / node] if "::" not in node else ["--deselect", node]
        env = colab_env.clean_environ()
        env.pop("BAI14_MATRIX", None)  # never the matrix's own slow tests inside a matrix run
        start = time.perf_counter()
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env,
                              cwd=colab_env.neutral_cwd(), timeout=timeout)
        wall = time.perf_counter() - start
        if not junit.exists():
            raise MatrixError(f"pytest did not run ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        counts = parse_junit(junit.read_text(encoding="utf-8"))
    found = re.search(r"(\d+) deselected", proc.stdout)
    return {**counts, "deselected": int(found.group(1)) if found else 0, "wall_s": round(wall, 1),
            "left_out": dict(UNIT_TEST_LEFT_OUT), "markers": UNIT_TEST_MARKERS}


def parse_junit(text: str) -> dict:
    """Return {"passed", "failed", "errors", "skipped", "failures"} from pytest's JUnit XML report."""
    root = ET.fromstring(text)
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    total = {key: sum(int(suite.get(key, 0)) for suite in suites) for key in ("tests", "failures", "errors", "skipped")}
    failures = []
    for case in root.iter("testcase"):
        for bad in (*case.findall("failure"), *case.findall("error")):
            message = " | ".join(line.strip() for line in (bad.get("message") or bad.text or "").strip().splitlines()[:6])
            failures.append(f"{case.get('classname')}::{case.get('name')}: {message[:600]}")
    return {"passed": total["tests"] - total["failures"] - total["errors"] - total["skipped"],
            "failed": total["failures"], "errors": total["errors"], "skipped": total["skipped"], "failures": failures}


def checkout_state(root: Path = ROOT) -> dict:
    """Return the checkout's commit and its uncommitted changes to what the matrix runs (None/[] without git)."""
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout if proc.returncode == 0 else None

    head = git("rev-parse", "--short=12", "HEAD")
    status = git("status", "--porcelain", "--", "notebooks", "course_src", "lessons_lib", "tests", "tools",
                 "envs", "pyproject.toml") or ""
    return {"commit": head.strip() if head else None,
            "uncommitted": sorted(line[3:].strip() for line in status.splitlines() if line.strip())}


def run_combo(combo: Combo, repeat: int = 2, notebooks: list[Path] | None = None, unit_tests: bool = True,
              rebuild: bool = False, index_url: str = DEFAULT_INDEX_URL, log=print) -> dict:
    """Build or reuse the environment of `combo`, then run everything there; return the result record.

    Args:
        combo: The combination.
        repeat: Runs of every notebook in one kernel (2: learners re-run cells).
        notebooks: The notebooks to run (default: every learner and solutions notebook).
        unit_tests: Also run lessons_lib's unit tests there.
        rebuild: Throw the cached environment away first.
        index_url: The package index for the first download.
        log: Called with one line per step.

    Returns:
        A JSON-ready record; "ok" is True when everything passed.
    """
    start, load_start = time.perf_counter(), os.getloadavg()
    record: dict = {"id": combo.id, "who": combo.who, "date": datetime.date.today().isoformat(), "ok": False,
                    "repeat": repeat, "cpus": os.cpu_count(), "checkout": checkout_state()}
    try:
        info = ensure_env(combo, index_url=index_url, rebuild=rebuild, log=log)
        python = Path(info["python"])
        record.update(swaps=info["swaps"], extras=info["extras"], env_built_s=info["built_s"],
                      env_ready_s=round(time.perf_counter() - start, 1))
        record["lessons_lib_install"] = install_lessons_lib(python, f"matrix-{combo.id}")
        facts = torch_facts(python)
        record.update(python=facts["python"], torch=facts["torch"], build=build_name(facts),
                      cuda_available=facts["cuda_available"], kind=machine_kind(facts), colab_environ=combo.colab,
                      output_checks=True)
        if not facts["lessons_lib"].startswith(str(python.parent.parent)):
            raise MatrixError(f"{combo.id}: lessons_lib is imported from {facts['lessons_lib']}, not the environment")
        log(f"{combo.id}: Python {facts['python']}, torch {facts['torch']} ({record['build']}), "
            f"lessons_lib installed as the setup cell does: {'ok' if record['lessons_lib_install']['ok'] else 'CHANGED ' + str(record['lessons_lib_install']['changed'])}")
        record["learner_view"] = learner_view(python)
        for cell in record["learner_view"]:
            log("  | " + cell["source"].replace("\n", "\n  | ") + "\n" + "".join(f"  > {line}\n" for line in cell["shows"].splitlines()).rstrip())
        record["notebooks"] = []
        for path in notebooks or colab_env.all_notebooks():
            row = run_checked_notebook(python, path, repeat, record["kind"], combo.colab)
            record["notebooks"].append(row)
            status = "ok" if row["ok"] else "ERROR" if row["error"] else f"{len(row['problems'])} OUTPUT PROBLEMS"
            log(f"  {row['notebook']:<52} {row['wall_s']:6.1f} s  {status}"
                + ("" if not row["error"] else "\n    " + "\n    ".join(row["error"].splitlines()[-6:]))
                + "".join(f"\n    - {problem[:300]}" for problem in row["problems"]))
        if unit_tests:
            log(f"  unit tests (tests/, -m '{UNIT_TEST_MARKERS}') with the environment's pytest ...")
            record["unit_tests"] = run_unit_tests(python)
            tests = record["unit_tests"]
            log(f"  unit tests: {tests['passed']} passed, {tests['failed']} failed, {tests['errors']} errors, "
                f"{tests['skipped']} skipped in {tests['wall_s']:.0f} s"
                + "".join(f"\n    {line}" for line in tests["failures"]))
        record["ok"] = (record["lessons_lib_install"]["ok"] and all(row["ok"] for row in record["notebooks"])
                        and (not unit_tests or record["unit_tests"]["failed"] + record["unit_tests"]["errors"] == 0))
    except (MatrixError, RuntimeError, subprocess.SubprocessError, OSError) as exc:
        record["error"] = str(exc)
        log(f"{combo.id}: FAILED\n{exc}")
    record["wall_s"] = round(time.perf_counter() - start, 1)
    record["loadavg"] = [round(load_start[0], 1), round(os.getloadavg()[0], 1)]
    return record


# --------------------------------------------------------------------------- results and the table


def load_results(path: Path = RESULTS) -> dict:
    """Return the results file's content ({"combos": {id: record}}), empty when the file does not exist."""
    path = Path(path)
    if not path.exists():
        return {"combos": {}}
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("combos"), dict):
        raise ValueError(f"{path} is not a version-matrix results file (it needs a 'combos' object)")
    return data


def save_results(records: list[dict], path: Path = RESULTS) -> dict:
    """Merge `records` into the results file (one record per combination id) and return its content."""
    data = load_results(path)
    for record in records:
        data["combos"][record["id"]] = record
    order = {combo.id: i for i, combo in enumerate(COMBOS)}
    data["combos"] = dict(sorted(data["combos"].items(), key=lambda item: (order.get(item[0], len(order)), item[0])))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return data


def _swaps_text(record: dict) -> str:
    swaps = record.get("swaps") or []
    return ", ".join(f"{s['name']} {s['pinned']} → {s['version']}" for s in swaps) or "—"


def markdown_table(data: dict) -> str:
    """Return the Markdown table of a results file's content (Vietnamese, for the README)."""
    if not isinstance(data, dict) or not isinstance(data.get("combos"), dict):
        raise TypeError("data must be a results file's content: a dict with a 'combos' object (see load_results)")
    lines = ["| Python | torch (bản build) | ai dùng | notebook chạy hết, đầu ra đúng lời bài | unit test đạt / trượt / bỏ qua "
             "| thời gian notebook · unit test | gói đổi so với Colab |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    dates, loads, repeats, cpus, commits, uncommitted = set(), [], set(), set(), set(), set()
    labels = {combo.id: combo.who for combo in COMBOS}  # a label, not a measurement: the current one
    for record in data["combos"].values():
        record = dict(record, who=labels.get(record["id"], record.get("who", "")))
        dates.add(record.get("date", "?"))
        commits.add((record.get("checkout") or {}).get("commit") or "?")
        uncommitted.update((record.get("checkout") or {}).get("uncommitted") or [])
        loads += record.get("loadavg", [])
        repeats.add(record.get("repeat"))
        cpus.add(record.get("cpus"))
        if "notebooks" not in record:
            error = (record.get("error") or "?").strip().splitlines()[0][:120]
            lines.append(f"| {record['id']} | | {record.get('who', '')} | **lỗi:** {error} | | | |")
            continue
        notebooks = record["notebooks"]
        passed = sum(row["ok"] for row in notebooks)
        nb_cell = f"{passed}/{len(notebooks)}" + ("" if passed == len(notebooks) else " ❌")
        if not record.get("output_checks"):
            nb_cell += " (chỉ kiểm không lỗi, chưa kiểm đầu ra)"
        elif record.get("colab_environ"):
            nb_cell += " (như Colab)"
        tests = record.get("unit_tests")
        if tests:
            bad = tests["failed"] + tests["errors"]
            test_cell = f"{tests['passed']} / {bad} / {tests['skipped']}" + ("" if bad == 0 else " ❌")
            test_time = f"{tests['wall_s']:.0f} s"
        else:
            test_cell, test_time = "không chạy", "—"
        nb_time = sum(row["wall_s"] for row in notebooks)
        install = record.get("lessons_lib_install", {})
        build = record.get("build", "?")
        if build.startswith("CUDA") and not record.get("cuda_available"):
            build += ", không có driver"
        lines.append(f"| {record.get('python', '?')} | {record.get('torch', '?')} ({build}) | {record.get('who', '')} "
                     f"| {nb_cell} | {test_cell} | {nb_time:.0f} s · {test_time} | {_swaps_text(record)}"
                     + ("" if install.get("ok", True) else " · cài `lessons_lib` làm đổi gói khác ❌") + " |")
    if not data["combos"]:
        lines.append("| (chưa chạy) | | | | | | |")
    repeat = "/".join(str(r) for r in sorted(r for r in repeats if r)) or "?"
    load = f"{min(loads):.0f}–{max(loads):.0f}" if loads else "?"
    core = "/".join(str(c) for c in sorted(c for c in cpus if c)) or "?"
    kinds = sorted({record.get("kind") for record in data["combos"].values() if record.get("kind")})
    kinds_text = f" (ở đây {', '.join(f'`{kind}`' for kind in kinds)})" if kinds else ""
    left_out = "; ".join(f"`{node}` ({why})" for node, why in UNIT_TEST_LEFT_OUT.items())
    checkout = f"commit {', '.join(f'`{c}`' for c in sorted(commits))}" + (
        f" cộng thay đổi chưa commit ở {', '.join(f'`{path}`' for path in sorted(uncommitted))}" if uncommitted else "")
    lines += ["",
              f"Đo bằng `bash tools/course.sh matrix` ({checkout}) ngày {', '.join(sorted(dates))} trên máy {core} lõi không GPU "
              f"(tải trung bình lúc chạy: {load}; thời gian chỉ để so sánh thô). Mỗi notebook (cả bản lời giải) chạy "
              f"{repeat} lần liên tiếp trong cùng một kernel, như khi học viên chạy lại ô. torch lấy từ PyPI: trên Linux "
              "đó là bản CUDA, chạy trên máy không có driver NVIDIA: đường đi của laptop Linux cài torch mặc định, của ảnh "
              "GPU không được cấp GPU và của runtime CPU trên Colab trước 2026-01 (nay Colab cài bản CPU, như môi "
              "trường thường ở đây); các ô `%%gpu` được bỏ qua. Unit test chạy bằng pytest của chính môi trường đó với `lessons_lib` cài từ wheel "
              f"như ô cài đặt; không chạy ở đây: {left_out}. Bộ gói notebook là của Colab (`envs/colab-pins.txt`); cột "
              "cuối ghi gói phải đổi vì không có wheel cho phiên bản Python đó. Một notebook chỉ đạt khi không ô nào lỗi "
              "và đầu ra giữ đúng lời bài (`tools/output_checks.py`): mỗi dòng `<!-- expect … -->` trong bài khớp với "
              f"loại máy của hàng{kinds_text}, và không có dòng cảnh báo hay lỗi nào học viên thấy mà bài không "
              "giải thích (stderr, `FutureWarning`/`DeprecationWarning`, dòng log `W…`/`E…`/`ERROR`), kể cả ở lần chạy "
              "đầu; hàng \"(như Colab)\" chạy kernel với biến môi trường của Colab (`COLAB_RELEASE_TAG`, `COLAB_GPU` "
              "rỗng…), nên các thông báo bỏ qua và gợi ý riêng cho Colab cũng được chạy."]
    return "\n".join(lines)


def replace_readme_table(text: str, table: str) -> str:
    """Return README text with the block between TABLE_START and TABLE_END replaced by `table`."""
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"the README must hold the markers {TABLE_START} ... {TABLE_END} (in that order)")
    return text[:start + len(TABLE_START)] + "\n" + table + "\n" + text[end:]


def write_readme(data: dict, readme: Path = README) -> None:
    """Rewrite README's version-matrix table from results `data`."""
    readme.write_text(replace_readme_table(readme.read_text(encoding="utf-8"), markdown_table(data)), encoding="utf-8")


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv.insert(0, "run")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="build or reuse the environments and run everything there (the default)")
    run.add_argument("--combo", action="append", choices=[c.id for c in COMBOS],
                     help="one combination (repeat the option for several; default: every one)")
    run.add_argument("--repeat", type=int, default=2, help="runs of every notebook in one kernel (default 2)")
    run.add_argument("--notebooks", nargs="+", type=Path, help="only these notebooks (default: all)")
    run.add_argument("--no-unit-tests", action="store_true", help="skip lessons_lib's unit tests")
    run.add_argument("--rebuild", action="store_true", help="rebuild the environments (wheels stay cached)")
    run.add_argument("--index-url", default=os.environ.get("BAI14_MATRIX_INDEX_URL") or DEFAULT_INDEX_URL)
    run.add_argument("--results", type=Path, default=RESULTS, help=f"results file (default {RESULTS.relative_to(ROOT)})")
    run.add_argument("--readme", action="store_true", help="rewrite README's table from the results afterwards")
    table = sub.add_parser("table", help="print the Markdown table of the results file")
    table.add_argument("--results", type=Path, default=RESULTS)
    table.add_argument("--readme", action="store_true", help="also rewrite README's table")
    sub.add_parser("list", help="list the combinations and what is cached")
    args = parser.parse_args(argv)

    if args.command == "list":
        for combo in COMBOS:
            cached = sorted(p.name for p in (colab_env.cache_dir() / "matrix-envs").glob(f"{combo.id}-*"))
            print(f"{combo.id:<22} {combo.who:<40} cached: {', '.join(cached) or 'no'}")
        return 0
    if args.command == "table":
        data = load_results(args.results)
        print(markdown_table(data))
        if args.readme:
            write_readme(data)
        return 0
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    removed = isolate_pip(os.environ)
    print(f"pip isolated from local configuration (PIP_CONFIG_FILE={os.devnull}"
          + (f"; ignored {', '.join(removed)}" if removed else "") + f"); index: {args.index_url}")
    records = []
    for combo in find_combos(args.combo):
        print(f"=== {combo.id} ({combo.who})", flush=True)
        record = run_combo(combo, repeat=args.repeat, notebooks=args.notebooks, unit_tests=not args.no_unit_tests,
                           rebuild=args.rebuild, index_url=args.index_url,
                           log=lambda line: print(line, flush=True))
        records.append(record)
        save_results([record], args.results)  # after each combination: a crash later keeps what ran
        print(f"=== {combo.id}: {'ok' if record['ok'] else 'FAILED'} in {record['wall_s']:.0f} s", flush=True)
    data = load_results(args.results)
    print("\n" + markdown_table(data))
    if args.readme:
        write_readme(data)
    return 0 if all(record["ok"] for record in records) else 1


if __name__ == "__main__":
    sys.exit(main())

"""The maintainer's sessions (nox with the uv backend); `nox -l` lists them, each with its docstring.

A row (`colab`, each `matrix(...)`) gets a fresh environment (uv keeps every downloaded wheel in its cache:
only the first run downloads, ~3 GB per CUDA torch) holding its notebook stack (envs/colab-pins.txt or
envs/kaggle-pins.txt) with the row's torch and swaps, exactly (`pip check`, no pin drifting); a row with
`find_links` takes torch from that folder (the CPU build for Colab's CPU runtime). lessons_lib goes in as the
notebooks' setup cell installs it (pip, the cell's options; nothing else may change). Then: what a learner sees
(banner, environment_report(), a %%gpu cell; the row fails unless its machine kind is the one it declares),
every notebook twice per kernel with its output checks (tests/test_rerun.py; Colab and Kaggle rows with that
platform's environment variables), the unit tests, and on Colab and Kaggle rows the colab_env tests
(tests/test_colab_env.py, tests/test_setup_cell.py); the record is merged into docs/version-matrix.json.
After `--`: `-k EXPR` (only the matching notebooks) or `--no-unit-tests` make a trial run that writes no
record. `nox -s table` then rewrites docs/MAINTAINING.md's tables.
"""

from __future__ import annotations

import argparse
import datetime
import email.parser
import json
import os
import re
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import nox

from tools import EXECUTED_DIR_ENV, build_course, colab_pins, output_checks, verified
from tools import version_matrix as vm

ROOT = Path(__file__).resolve().parent

nox.options.default_venv_backend = "uv"
nox.options.sessions = ["wheel", "resolve"]
# Packages come from the public index only: pip reads no configuration file and no PIP_* source
# (PIP_FIND_LINKS, PIP_CONSTRAINT...); the settings that say how to reach the index stay. uv reads neither.
_PIP_KEPT = ("PIP_CERT", "PIP_CLIENT_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES", "PIP_PROXY",
             "PIP_TRUSTED_HOST", "PIP_DISABLE_PIP_VERSION_CHECK", "PIP_NO_INPUT", "PIP_PROGRESS_BAR")
for _name in [name for name in os.environ if name.startswith("PIP_") and name not in _PIP_KEPT]:
    del os.environ[_name]
os.environ["PIP_CONFIG_FILE"] = os.devnull

INDEX = "https://pypi.org/simple"
COLAB = vm.COMBOS[0]  # Colab's own Python and torch (envs/colab-pins.txt's header), from PyPI
TEST_TOOLS = ("pytest",)  # pinned by requirements.txt; each row's unit tests need it
# uv's names for the platforms the README claims (torch's Linux wheels are manylinux_2_28).
PLATFORMS = {"linux-x86_64": "x86_64-manylinux_2_28", "macos-arm64": "aarch64-apple-darwin",
             "windows-x86_64": "x86_64-pc-windows-msvc"}
RESOLVE_PYTHONS = ("3.10", "3.11", "3.12", "3.13")

# Run in a row's environment: what a learner sees at the top of a notebook and in a GPU cell, then the facts
# of the kernel itself.
_LEARNER_VIEW = r'''
import json, nbclient, nbformat
facts = """import json, platform, sys, torch, lessons_lib
print(json.dumps({"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                  "hip": getattr(torch.version, "hip", None), "cuda_available": torch.cuda.is_available(),
                  "mps_available": bool(getattr(torch.backends, "mps", None)
                                        and torch.backends.mps.is_available()),
                  "prefix": sys.prefix, "lessons_lib": lessons_lib.__file__}))"""
cells = ["%load_ext lessons_lib.notebook",
         "from lessons_lib.device import environment_report\nenvironment_report()",
         "%%gpu\nprint('GPU BODY RAN')", facts]
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
nbclient.NotebookClient(nb, timeout=600, kernel_name="python3").execute()
def shows(cell):
    return "".join(("[stderr] " if o.get("name") == "stderr" else "") + o.text if o.output_type == "stream"
                   else o.get("data", {}).get("text/plain", "") + "\n" for o in cell.outputs)
view = [{"source": cell.source, "shows": shows(cell)} for cell in nb.cells[:3]]
print("LEARNER_VIEW", json.dumps({"facts": json.loads(shows(nb.cells[3])), "view": view}))
'''


@nox.session(python=False)
def wheel(session: nox.Session) -> None:
    """Build the lessons_lib wheel into dist/; check it holds the package and pyproject's metadata."""
    built = _build_wheel(session, ROOT / "dist")
    session.log(f"{built.relative_to(ROOT)} ({built.stat().st_size / 1024:.0f} KiB)")


@nox.session(python=False)
def resolve(session: nox.Session) -> None:
    """Resolve requirements.txt for every platform x Python the README claims, wheels only, from pypi.org.

    Negative controls: the 0.1.0 pins (torch==2.13.0+cpu, a build no public index holds) fail on every pair,
    and macOS 13 fails (torch ships macOS wheels for 14+ only).
    """
    from packaging.requirements import Requirement  # nox's own dependency

    lines = [line.split("#", 1)[0].strip() for line in (ROOT / "requirements.txt").read_text().splitlines()]
    requirements = [Requirement(line) for line in lines if line]
    problems = []
    for platform, python in [(p, v) for p in PLATFORMS for v in RESOLVE_PYTHONS]:
        pins, output = _compile(session, "requirements.txt", PLATFORMS[platform], python)
        wanted = {colab_pins.normalize(r.name): str(r.specifier).removeprefix("==") for r in requirements
                  if r.marker is None or r.marker.evaluate({"python_version": python})}
        got = {name: pins.get(name) for name in wanted}
        if got != wanted:
            problems.append(f"{platform} / Python {python}: {got} != {wanted}\n{output[-2000:]}")
        _, output = _compile(session, "tests/fixtures/requirements-0.1.0.txt", PLATFORMS[platform], python)
        if "no version of torch==2.13.0+cpu" not in output:
            problems.append(f"{platform} / Python {python}: the 0.1.0 pins did not fail for want of "
                            f"torch+cpu\n{output}")
    _, output = _compile(session, "requirements.txt", PLATFORMS["macos-arm64"], "3.12", macos="13.0")
    if "macosx_14_0_arm64" not in output:
        problems.append(f"macOS 13 did not fail for want of a torch wheel:\n{output}")
    if problems:
        session.error("\n\n".join(problems))
    session.log(f"requirements.txt resolves on {len(PLATFORMS) * len(RESOLVE_PYTHONS)} pairs")


@nox.session(python=COLAB.python)
def colab(session: nox.Session) -> None:
    """Run the course in Colab's conditions: the Colab row of the matrix (envs/colab-pins.txt)."""
    _run_row(session, COLAB)


@nox.session
@nox.parametrize("python,combo", [nox.param(c.python, c, id=c.id) for c in vm.COMBOS])
def matrix(session: nox.Session, combo: vm.Combo) -> None:
    """Run the course on one Python + torch row and merge its record into docs/version-matrix.json."""
    _run_row(session, combo)


@nox.session(python=False)
def table(session: nox.Session) -> None:
    """Rewrite docs/MAINTAINING.md's version-matrix table and "verified on" table from docs/version-matrix.json."""
    data, text = vm.load_results(), vm.PAGE.read_text(encoding="utf-8")
    text = vm.replace_table(text, verified.lessons_table(data), verified.VERIFIED_START, verified.VERIFIED_END)
    vm.PAGE.write_text(vm.replace_table(text, vm.markdown_table(data)), encoding="utf-8")


@nox.session(python=False)
def release(session: nox.Session) -> None:
    """`nox -s release -- X.Y.Z`: bump __version__, date its CHANGELOG entry, set the ref, rebuild, commit, tag."""
    if len(session.posargs) != 1 or not re.fullmatch(r"\d+\.\d+\.\d+", session.posargs[0]):
        session.error("usage: nox -s release -- X.Y.Z")
    version, tag = session.posargs[0], f"v{session.posargs[0]}"
    if session.run("git", "status", "--porcelain", silent=True, external=True).strip():
        session.error("commit or stash your changes first: the release commit holds only the release")
    changelog = ROOT / "CHANGELOG.md"
    text = changelog.read_text(encoding="utf-8")
    entry = re.search(rf"^## \[{re.escape(version)}\] - (Unreleased|\d{{4}}-\d\d-\d\d)\n(.*?)(?=^## |\Z)",
                      text, re.M | re.S)
    if entry is None or not re.search(r"^- ", entry.group(2), re.M):
        session.error(f"CHANGELOG.md needs an entry `## [{version}] - Unreleased` listing its changes")
    today = datetime.date.today().isoformat()
    changelog.write_text(text[:entry.start(1)] + today + text[entry.end(1):], encoding="utf-8")
    _replace(ROOT / "lessons_lib" / "__init__.py", r'^__version__ = "[^"]*"', f'__version__ = "{version}"')
    _replace(ROOT / "pyproject.toml", r'^ref = "[^"]*"', f'ref = "{tag}"')
    session.run(sys.executable, "-m", "tools.build_course", external=True)
    session.run("git", "commit", "-qam", f"Release {version}", external=True)
    session.run("git", "tag", "-a", tag, "-m", f"lessons_lib {version}", external=True)
    session.log(f"tagged {tag}; publish it: git push origin main {tag}")


# --------------------------------------------------------------------------- helpers


def _replace(path: Path, pattern: str, new: str) -> None:
    text, count = re.subn(pattern, new, path.read_text(encoding="utf-8"), count=1, flags=re.M)
    if count != 1:
        raise RuntimeError(f"{path.name} has no line matching {pattern!r}")
    path.write_text(text, encoding="utf-8")


def _compile(session: nox.Session, requirements: str, platform: str, python: str,
             macos: str = "14.0") -> tuple[dict[str, str], str]:
    """Return (pins, uv's output) of `uv pip compile` of `requirements` for one platform and Python."""
    output = session.run(
        nox.virtualenv.UV, "pip", "compile", "--quiet", "--no-config", "--no-header", "--no-annotate",
        "--python", sys.executable, "--no-python-downloads", "--index-url", INDEX, "--only-binary", ":all:",
        "--python-platform", platform, "--python-version", python, requirements,
        env={"MACOSX_DEPLOYMENT_TARGET": macos, "UV_NO_PROGRESS": "1"}, silent=True,
        success_codes=[0, 1, 2], external=True)
    pins = dict(re.findall(r"^([A-Za-z0-9._-]+)==(\S+)", output, flags=re.M))
    return {colab_pins.normalize(name): version for name, version in pins.items()}, output


def _build_wheel(session: nox.Session, out_dir: Path) -> Path:
    """Build the wheel with `python -m build` (in uv's tool environment) and check what it holds."""
    import tomllib  # nox itself runs on Python 3.11+

    session.run(nox.virtualenv.UV, "tool", "run", "--from", "build", "pyproject-build", "--wheel",
                "--outdir", str(out_dir), str(ROOT), external=True, silent=True)
    version = build_course.package_version()
    built, info = out_dir / f"lessons_lib-{version}-py3-none-any.whl", f"lessons_lib-{version}.dist-info"
    with zipfile.ZipFile(built) as zf:
        names = set(zf.namelist())
        meta = email.parser.Parser().parsestr(zf.read(f"{info}/METADATA").decode())
    files = {p.relative_to(ROOT).as_posix() for p in (ROOT / "lessons_lib").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    if files - names:
        session.error(f"{built.name} lacks {sorted(files - names)}: list them in [tool.setuptools]")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    if (f"{info}/licenses/LICENSE" not in names or meta["Requires-Python"] != project["requires-python"]
            or sorted(meta.get_all("Requires-Dist") or []) != sorted(project["dependencies"])):
        session.error(f"{built.name}'s metadata differs from pyproject (licence file, Python, dependencies)")
    return built


def _installed(session: nox.Session) -> dict[str, str]:
    # -I: not the current folder on sys.path: a checkout's lessons_lib.egg-info (an editable install) would be found
    return colab_pins.read_installed(session.run("python", "-I", "-c", colab_pins.LIST_INSTALLED, silent=True))


def _install_like_setup_cell(session: nox.Session, wheel: Path, before: dict[str, str]) -> dict:
    """Install `wheel` as the setup cell does; return {"planned", "changed", "ok": nothing else changed}."""
    report = Path(session.env["TMPDIR"]) / "report.json"
    pip = ["python", *build_course.SETUP_PIP]
    session.run(*pip, "--dry-run", "--report", str(report), str(wheel), silent=True)
    planned = sorted(colab_pins.normalize(item["metadata"]["name"])
                     for item in json.loads(report.read_text(encoding="utf-8"))["install"])
    session.run(*pip, str(wheel), silent=True)
    after = _installed(session)
    changed = {name: [before.get(name), after.get(name)] for name in sorted(set(before) | set(after))
               if before.get(name) != after.get(name)}
    return {"planned": planned, "changed": changed,
            "ok": planned == ["lessons-lib"] and list(changed) == ["lessons-lib"]}


def _pytest(session: nox.Session, junit: Path, *args: str, env: dict | None = None) -> str:
    """Run the environment's pytest on the checkout's tests (from a neutral folder); return its JUnit XML."""
    session.run("python", "-m", "pytest", "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"), "-q",
                "-p", "no:cacheprovider", "--junitxml", str(junit), *args, env=env or {},
                success_codes=[0, 1, 5])
    return junit.read_text(encoding="utf-8")


def _links(combo: vm.Combo) -> list[str]:
    return ["--find-links", combo.find_links] if combo.find_links else []


def _build_env(session: nox.Session, combo: vm.Combo, pins_file: Path) -> dict:
    """Install the row's pins (uv installs each name==version or fails); return its swaps, extras, build time."""
    start, pins = time.perf_counter(), colab_pins.read_pins(combo.pins_file)
    expected = {**pins, "torch": combo.torch, **combo.swaps}
    pins_file.write_text("".join(f"{name}=={version}\n" for name, version in expected.items()))
    session.install("--index-url", INDEX, *_links(combo), "--only-binary", ":all:", "-r", str(pins_file))
    installed = _installed(session)
    session.run("python", "-m", "pip", "check", silent=True)
    return {"swaps": [{"name": name, "pinned": pins[name], "version": version,
                       "reason": f"{name} {pins[name]} has no wheel for Python {combo.python}"}
                      for name, version in combo.swaps.items()],
            "extras": {name: v for name, v in sorted(installed.items()) if name not in expected},
            "env_built_s": round(time.perf_counter() - start, 1), "installed": installed,
            "image": {**vm.stack_image(combo.stack), "torch_from": combo.find_links or INDEX}}


def _learner_view(session: nox.Session, combo: vm.Combo, environ: dict) -> dict:
    """Show what a learner sees in the row's kernel; return the record's facts about that kernel."""
    Path("learner_view.py").write_text(_LEARNER_VIEW, encoding="utf-8")
    out = session.run("python", "learner_view.py", env=environ, silent=True)
    seen = json.loads(out.split("LEARNER_VIEW", 1)[1])
    facts = seen["facts"]
    if Path(facts["prefix"]).resolve() != Path(session.virtualenv.location).resolve():
        session.error(f"{combo.id}: the kernel runs in {facts['prefix']}, not the row's environment")
    if not facts["lessons_lib"].startswith(facts["prefix"]):
        session.error(f"{combo.id}: the kernel imports {facts['lessons_lib']}, not the wheel's lessons_lib")
    for cell in seen["view"]:
        session.log(f"{cell['source']}\n  > " + cell["shows"].rstrip().replace("\n", "\n  > "))
    cuda, hip = facts["cuda"], facts["hip"]
    kind = output_checks.kind_of(bool(cuda or hip), facts["cuda_available"], facts["mps_available"])
    if kind != combo.kind:
        session.error(f"{combo.id}: the kernel's machine kind is {kind}, the row stands for {combo.kind}")
    return {"python": facts["python"], "torch": facts["torch"],
            "build": f"CUDA {cuda}" if cuda else f"ROCm {hip}" if hip else "CPU",
            "cuda_available": facts["cuda_available"], "kind": kind, "platform": combo.platform,
            "output_checks": True, "learner_view": seen["view"]}


def _run_row(session: nox.Session, combo: vm.Combo) -> None:
    parser = argparse.ArgumentParser(prog=f"nox -s {session.name} --")
    parser.add_argument("-k", help="only the notebooks whose test id matches (a trial run: no record)")
    parser.add_argument("--no-unit-tests", action="store_true", help="skip the unit tests (a trial run)")
    args = parser.parse_args(session.posargs)
    start, load_start = time.perf_counter(), os.getloadavg()
    # Outside the checkout (nox's own tmp is under .nox/ in it): the tests run from inside this folder, and tests
    # that compare paths with the repository's, or expect no git around them, must not find the checkout there.
    tmp = Path(tempfile.mkdtemp(prefix=f"bai14-{combo.id}-")).resolve()
    session.env["TMPDIR"] = str(tmp)
    record: dict = {"id": combo.id, "who": combo.who, "date": datetime.date.today().isoformat(), "ok": False,
                    "repeat": 2, "cpus": os.cpu_count(), "checkout": vm.checkout_state(),
                    **_build_env(session, combo, tmp / "pins.txt")}
    wheel = _build_wheel(session, tmp / "dist")
    record["lessons_lib_install"] = _install_like_setup_cell(session, wheel, record.pop("installed"))
    requirements = (ROOT / "requirements.txt").read_text(encoding="utf-8")
    session.install("--index-url", INDEX, *_links(combo), "-c", str(tmp / "pins.txt"),
                    *re.findall(rf"^((?:{'|'.join(TEST_TOOLS)})==\S+)", requirements, re.M))
    platform_environ = combo.environ
    tests = ROOT / "tests"
    with session.chdir(tmp):  # never the checkout: its lessons_lib/ would shadow the installed wheel
        record.update(_learner_view(session, combo, platform_environ))
        nb_env = {EXECUTED_DIR_ENV: str(tmp / "executed"), **platform_environ}
        k = ["-k", args.k] if args.k else []
        record["notebooks"] = vm.notebook_rows(
            _pytest(session, tmp / "notebooks.xml", str(tests / "test_rerun.py"), *k, env=nb_env))
        if not args.no_unit_tests:
            left_out = [arg for node in vm.UNIT_TEST_LEFT_OUT
                        for arg in (["--deselect", node] if "::" in node else ["--ignore", str(ROOT / node)])]
            tests_start = time.perf_counter()
            xml = _pytest(session, tmp / "unit.xml", str(tests), "-m", vm.UNIT_TEST_MARKERS, *left_out)
            wall = round(time.perf_counter() - tests_start, 1)
            record["unit_tests"] = {**vm.parse_junit(xml), "wall_s": wall,
                                    "left_out": dict(vm.UNIT_TEST_LEFT_OUT), "markers": vm.UNIT_TEST_MARKERS}
        if combo.platform:  # Colab's or Kaggle's notebook stack: the setup cell and the IPython features for real
            env = {"BAI14_COLAB_ROW": "1", "BAI14_WHEEL": str(wheel)}
            paths = [str(tests / "test_colab_env.py"), str(tests / "test_setup_cell.py")]
            xml = _pytest(session, tmp / "colab.xml", *paths, "-m", "colab_env", env=env)
            record["colab_tests"] = vm.parse_junit(xml)
    record.update(ok=record["lessons_lib_install"]["ok"] and bool(record["notebooks"])
                  and all(row["ok"] for row in record["notebooks"])
                  and not any(record[key]["failed"] + record[key]["errors"] for key in ("unit_tests", "colab_tests")
                              if key in record),
                  wall_s=round(time.perf_counter() - start, 1),
                  loadavg=[round(load_start[0], 1), round(os.getloadavg()[0], 1)])
    for row in record["notebooks"]:
        details = [*(row["error"] or "").splitlines()[-6:], *row["problems"]]
        session.log(f"{row['notebook']:<52} {row['wall_s']:6.1f} s  {'ok' if row['ok'] else 'FAILED'}"
                    + "".join(f"\n    {line}" for line in details))
    for key in ("unit_tests", "colab_tests"):
        if key in record:
            counts = record[key]
            failures = "".join(f"\n    {line}" for line in counts["failures"])
            session.log(f"{key}: {counts['passed']} passed, {counts['failed'] + counts['errors']} failed or errors, "
                        f"{counts['skipped']} skipped{failures}")
    if args.k or args.no_unit_tests:
        session.log(f"trial run: record not written\n{json.dumps(record, ensure_ascii=False)[:3000]}")
    else:
        vm.save_results([record])
    if not record["ok"]:
        session.error(f"{combo.id}: a notebook, a test or the setup-cell install failed (see above)")

"""The Colab-pinned test environment: build it (cached) and run the notebooks in it.

A virtualenv holding exactly the packages of envs/colab-pins.txt (Colab's IPython 7.34, ipykernel 6.17,
ipywidgets 7.7.1, jupyter_client 7.4.9, matplotlib 3.10.0, ... plus the tested torch), built with Python 3.11
under ~/.cache/bai14-course/ and reused while the pins file is unchanged. lessons_lib goes in the way the
notebooks' setup cell installs it: ``pip install <wheel>`` with the setup cell's options (not editable, pip's
default "only if needed" strategy, so nothing already installed is upgraded); it is reinstalled whenever its
sources change. Notebooks run there with nbclient and a kernel that is that environment's python.

Usage:
    python tools/colab_env.py build                 # build or reuse the environment, print its python
    python tools/colab_env.py run [NOTEBOOK ...]    # run notebooks there (default: all), print each one's time
    python tools/colab_env.py build --rebuild       # throw the cached environment away first

Environment variables:
    BAI14_CACHE         cache folder (default ~/.cache/bai14-course)
    BAI14_COLAB_PYTHON  the Python 3.11 that creates the virtualenv (default: python3.11 on PATH, pyenv's, or
                        the Python running this script when it is 3.11)
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PINS = ROOT / "envs" / "colab-pins.txt"
PYTHON_VERSION = (3, 11)  # the only Python with a local CPU build of the tested torch (see the pins file)
# The setup cell's pip options (tests/test_setup_cell.py checks that the generated cell uses exactly these).
SETUP_CELL_PIP_INSTALL = ["install", "-q", "--retries", "1", "--timeout", "10"]
# Bump when the build recipe below changes in a way that needs a fresh environment.
RECIPE = "1"
KERNEL_NAME = "colab-pinned"
PROBE_MARK = "COLAB_ENV_PROBE"
RESULT_MARK = "COLAB_ENV_RESULT"
_PROBE_CELL = (
    "import json as _j, resource as _r, sys as _s\n"
    "import IPython as _I, ipykernel as _k, ipywidgets as _w, jupyter_client as _c, matplotlib as _m, torch as _t\n"
    "import lessons_lib as _l\n"
    f"print({PROBE_MARK!r}, _j.dumps({{'executable': _s.executable, 'python': _s.version.split()[0], "
    "'ipython': _I.__version__, 'ipykernel': _k.__version__, 'ipywidgets': _w.__version__, "
    "'jupyter_client': _c.__version__, 'matplotlib': _m.__version__, 'torch': _t.__version__, "
    "'lessons_lib': _l.__file__, 'peak_rss_kib': _r.getrusage(_r.RUSAGE_SELF).ru_maxrss}))"
)


# --------------------------------------------------------------------------- where things live


def cache_dir() -> Path:
    """Return the folder holding the cached environments and wheels ($BAI14_CACHE or ~/.cache/bai14-course)."""
    return Path(os.environ.get("BAI14_CACHE") or Path.home() / ".cache" / "bai14-course")


def normalize(name: str) -> str:
    """Return a distribution name in PEP 503 normal form (``Jinja2`` -> ``jinja2``, ``a_b.c`` -> ``a-b-c``)."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a distribution name (str), got {type(name).__name__}")
    if not name.strip():
        raise ValueError(f"name must be a non-empty distribution name, got {name!r}")
    return re.sub(r"[-_.]+", "-", name.strip()).lower()


def read_pins(path: Path = PINS) -> dict[str, str]:
    """Return {normalized name: version} of a pins file; every requirement line must be `name==version`."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9.+!_-]+)", line)
        if match is None:
            raise ValueError(f"{path}:{number}: every line must pin one package as name==version, got {raw!r}")
        name = normalize(match.group(1))
        if name in pins:
            raise ValueError(f"{path}:{number}: {match.group(1)} is pinned twice")
        pins[name] = match.group(2)
    return pins


def pin_matches(pinned: str, installed: str | None) -> bool:
    """Return True when an installed version satisfies `==pinned` (PEP 440: a pin without a local label such
    as ``2.13.0`` matches ``2.13.0+cpu``; a pin with one matches only itself)."""
    if installed is None:
        return False
    return installed == pinned or ("+" not in pinned and installed.split("+", 1)[0] == pinned)


@functools.cache
def find_python(version: tuple[int, int] | None = None) -> str:
    """Return a Python interpreter of `version` (default PYTHON_VERSION, 3.11) to create an environment with.

    Tried in order: $BAI14_COLAB_PYTHON, pythonX.Y on PATH, pyenv's newest X.Y.*, the running Python.
    """
    version = tuple(version or PYTHON_VERSION)
    wanted = ".".join(map(str, version))
    candidates = [os.environ.get("BAI14_COLAB_PYTHON"), shutil.which(f"python{wanted}"),
                  *sorted(Path.home().glob(f".pyenv/versions/{wanted}.*/bin/python{wanted}"), reverse=True),
                  sys.executable if sys.version_info[:2] == version else None]
    for candidate in filter(None, candidates):
        probe = subprocess.run([str(candidate), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == wanted:
            return str(candidate)
    why = (f"torch's CPU wheel here exists only for {wanted}" if version == tuple(PYTHON_VERSION)
           else "e.g. `pyenv install " + wanted + "`")
    raise RuntimeError(f"no Python {wanted} found to build the environment with: install it or set "
                       f"BAI14_COLAB_PYTHON to its path ({why})")


@functools.cache
def env_key(python: str) -> str:
    """Return the cache key of the environment: the pins file, the build recipe and the exact Python."""
    version = subprocess.run([python, "-c", "import sys; print(sys.version)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    text = f"{RECIPE}\n{version}\n{PINS.read_text(encoding='utf-8')}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def env_python(env: Path) -> Path:
    """Return the python of an environment folder."""
    return env / "bin" / "python"


@contextlib.contextmanager
def locked(name: str = "colab-env"):
    """Hold the cache's lock `name`: one process at a time builds or changes the environment it guards."""
    import fcntl

    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def clean_environ(**extra: str) -> dict[str, str]:
    """Return os.environ without what would leak the caller's virtualenv into a child process."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "MPLBACKEND", "JUPYTER_PATH")}
    env.update(extra)
    return env


def neutral_cwd() -> Path:
    """Return a folder to run the environment's python in: never the checkout, whose lessons_lib/ and
    lessons_lib.egg-info would shadow the installed package (`python -c`/`-m` put the cwd on sys.path)."""
    folder = cache_dir() / "cwd"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("cwd", neutral_cwd())
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=clean_environ(), **kwargs)
    if proc.returncode != 0:
        raise RuntimeError(f"command failed ({proc.returncode}): {' '.join(map(str, cmd))}\n"
                           f"{proc.stdout[-4000:]}{proc.stderr[-4000:]}")
    return proc


# --------------------------------------------------------------------------- packages


_LIST_DISTRIBUTIONS = """
import importlib.metadata as m, json
out = {}
for dist in m.distributions():
    name = dist.metadata["Name"]
    if name and name not in out:
        out[name] = [dist.version, dist.read_text("direct_url.json")]
print(json.dumps(out))
"""


def _distributions(python: Path | str) -> dict[str, list]:
    proc = _run([python, "-c", _LIST_DISTRIBUTIONS])
    return {normalize(name): value for name, value in json.loads(proc.stdout).items()}


def installed_versions(python: Path | str) -> dict[str, str]:
    """Return {normalized name: version} of every distribution installed for `python` (pip included)."""
    return {name: version for name, (version, _) in _distributions(python).items()}


def lessons_lib_origin(python: Path | str) -> dict | None:
    """Return how lessons_lib is installed for `python`: pip's direct_url.json record ({} when it came from an
    index), or None when it is not installed."""
    record = _distributions(python).get("lessons-lib")
    if record is None:
        return None
    return json.loads(record[1]) if record[1] else {}


def lessons_lib_installed(python: Path | str) -> bool:
    """Return True when a lessons_lib distribution is installed for `python`."""
    return lessons_lib_origin(python) is not None


def uninstall_lessons_lib(python: Path | str) -> None:
    """Remove lessons_lib from the environment of `python` (no-op when absent)."""
    if lessons_lib_installed(python):
        _run([python, "-m", "pip", "uninstall", "-y", "-q", "lessons_lib"])


def cached_wheel() -> Path:
    """Return a lessons_lib wheel built from the current sources (built once per sources digest, cached)."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import build_wheel
    finally:
        sys.path.remove(str(ROOT / "tools"))
    folder = cache_dir() / "wheels" / build_wheel.sources_digest()[:16]
    wheels = sorted(folder.glob("lessons_lib-*.whl"))
    if len(wheels) == 1:
        return wheels[0]
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        built = build_wheel.build_wheel(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / built.name
        shutil.move(str(built), target)
    for other in (cache_dir() / "wheels").iterdir():  # keep only the current sources' wheel
        if other != folder:
            shutil.rmtree(other, ignore_errors=True)
    return target


def install_like_setup_cell(python: Path | str, wheel: Path | str) -> dict:
    """Install `wheel` into a lessons_lib-free environment as the setup cell does; report what changed.

    Returns:
        {"planned": names pip's dry run would install, "before"/"after": installed versions around the install,
        "changed": {name: (before, after)} for every package whose presence or version differs}.
    """
    if lessons_lib_installed(python):
        raise ValueError("lessons_lib is already installed there; call uninstall_lessons_lib(python) first")
    before = installed_versions(python)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp, "report.json")
        _run([python, "-m", "pip", *SETUP_CELL_PIP_INSTALL, "--dry-run", "--report", report, wheel])
        planned = sorted(normalize(item["metadata"]["name"])
                         for item in json.loads(report.read_text(encoding="utf-8"))["install"])
    _run([python, "-m", "pip", *SETUP_CELL_PIP_INSTALL, wheel])
    after = installed_versions(python)
    changed = {name: (before.get(name), after.get(name)) for name in sorted(set(before) | set(after))
               if before.get(name) != after.get(name)}
    return {"planned": planned, "before": before, "after": after, "changed": changed}


# --------------------------------------------------------------------------- the environment


def ensure_env(rebuild: bool = False, log=print) -> Path:
    """Build the Colab-pinned environment if needed, make its lessons_lib current, and return its python.

    Args:
        rebuild: Throw away the cached environment first.
        log: Called with one line per step that takes time (print by default).

    Returns:
        The path of the environment's python.
    """
    base_python = find_python()
    env = cache_dir() / f"colab-py{''.join(map(str, PYTHON_VERSION))}-{env_key(base_python)}"
    python = env_python(env)
    done = env / ".complete.json"
    with locked():
        if rebuild or not done.exists() or not python.exists():
            _build(env, base_python, log)
            done.write_text(json.dumps({"pins_sha256": hashlib.sha256(PINS.read_bytes()).hexdigest(),
                                        "base_python": base_python}, indent=1), encoding="utf-8")
            for other in cache_dir().glob("colab-py*"):  # older environments: ~1.2 GB each
                if other.is_dir() and other != env:
                    shutil.rmtree(other, ignore_errors=True)
        wheel = cached_wheel()
        stamp = env / ".lessons_lib.json"
        current = json.loads(stamp.read_text(encoding="utf-8")) if stamp.exists() else {}
        if current.get("wheel") != str(wheel) or not lessons_lib_installed(python):
            log(f"installing {wheel.name} into the Colab-pinned environment (as the setup cell does)")
            uninstall_lessons_lib(python)
            _run([python, "-m", "pip", *SETUP_CELL_PIP_INSTALL, wheel])
            stamp.write_text(json.dumps({"wheel": str(wheel)}), encoding="utf-8")
    return python


def _build(env: Path, base_python: str, log) -> None:
    start = time.perf_counter()
    log(f"building the Colab-pinned environment in {env} (first time: a few minutes)")
    shutil.rmtree(env, ignore_errors=True)
    env.parent.mkdir(parents=True, exist_ok=True)
    _run([base_python, "-m", "venv", env])
    python = env_python(env)
    pins = read_pins()
    _run([python, "-m", "pip", "install", "-q", f"pip=={pins['pip']}"])  # Colab's pip resolves the rest
    _run([python, "-m", "pip", "install", "-q", "-r", PINS])
    log(f"built in {time.perf_counter() - start:.0f} s")


# --------------------------------------------------------------------------- running notebooks


# What Colab's CPU runtime sets and the course reads (lessons_lib.platforms.detect_platform reads
# COLAB_RELEASE_TAG): env dumps from Colab runtimes show COLAB_RELEASE_TAG (e.g. release-colab_20250822-060052_RC00),
# COLAB_BACKEND_VERSION, COLAB_JUPYTER_TRANSPORT=ipc, and COLAB_GPU (1 on a GPU runtime, empty on a CPU one).
# The tag says that this is a replica, not a real Colab release.
COLAB_RUNTIME_ENV = {"COLAB_RELEASE_TAG": "replica-by-bai14-version-matrix", "COLAB_BACKEND_VERSION": "replica",
                     "COLAB_JUPYTER_TRANSPORT": "ipc", "COLAB_GPU": ""}


def run_notebook(python: Path | str, notebook: Path | str, timeout: int = 600,
                 save_to: Path | str | None = None, repeat: int = 1, environ: dict[str, str] | None = None) -> dict:
    """Execute one notebook top to bottom in the environment of `python` with nbclient.

    Args:
        python: The environment's python; the kernel is that python too.
        notebook: The .ipynb file (it is not modified).
        timeout: Seconds allowed per cell.
        save_to: Where to write the executed notebook with its outputs (default: nowhere).
        repeat: How many times to run all the cells in one kernel (2: learners re-run cells).
        environ: Environment variables set for the kernel on top of the clean environment (e.g. COLAB_RUNTIME_ENV).

    Returns:
        {"notebook", "wall_s", "error" (None when every cell ran), "stderr" ([cell index, first line] of each
        stderr output a learner would see, on any pass), "probe" (what the kernel reported about itself: its
        sys.executable and package versions)}.
    """
    notebook = Path(notebook).resolve()
    if notebook.suffix != ".ipynb" or not notebook.is_file():
        raise ValueError(f"notebook must be an existing .ipynb file, got {notebook}")
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise ValueError(f"repeat must be an int >= 1 (2 runs every cell twice), got {repeat!r}")
    environ = {} if environ is None else environ
    if not isinstance(environ, dict) or not all(isinstance(v, str) and isinstance(k, str) for k, v in environ.items()):
        raise TypeError(f"environ must be a dict of str to str (or None), got {environ!r}")
    cmd = [str(python), str(Path(__file__).resolve()), "_execute", str(notebook), "--timeout", str(timeout),
           "--repeat", str(repeat)]
    if save_to is not None:
        cmd += ["--save", str(Path(save_to).resolve())]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=clean_environ(**environ), timeout=repeat * timeout + 120,
                          cwd=neutral_cwd())
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK):])
    raise RuntimeError(f"the notebook runner crashed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")


def _execute(notebook: Path, timeout: int, save_to: Path | None = None, repeat: int = 1) -> dict:
    """Run inside the Colab-pinned python: execute `notebook` with a kernel that is this very python."""
    import nbformat
    from run_notebooks import execute_notebook  # tools/ is sys.path[0]: this file runs as a script here

    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp, "kernels", KERNEL_NAME)
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (Colab-pinned)", "language": "python"}), encoding="utf-8")
        os.environ["JUPYTER_PATH"] = tmp
        run = execute_notebook(notebook, _PROBE_CELL, kernel_name=KERNEL_NAME, timeout=timeout, repeat=repeat)
    nb = run.nb
    probe = json.loads(run.probe_text.split(PROBE_MARK, 1)[1]) if PROBE_MARK in run.probe_text else None
    stderr = [[i, (output.get("text", "").strip().splitlines() or [""])[0]] for i, cell in enumerate(nb.cells[:-1])
              for output in [*cell.metadata.get("first_pass_streams", []), *cell.get("outputs", [])]
              if output.get("name") == "stderr"]  # the first pass's too: a warning often shows only then
    if save_to is not None:
        nb.cells.pop()
        nbformat.write(nb, save_to)
    return {"notebook": str(notebook), "wall_s": round(run.wall_s, 2), "error": run.error, "stderr": stderr,
            "probe": probe}


def all_notebooks() -> list[Path]:
    """Return every notebook under notebooks/ (learner and solutions), sorted."""
    return sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build or reuse the environment and print its python")
    build.add_argument("--rebuild", action="store_true", help="throw the cached environment away first")
    run = sub.add_parser("run", help="run notebooks in the environment (default: all)")
    run.add_argument("notebooks", nargs="*", type=Path)
    execute = sub.add_parser("_execute", help=argparse.SUPPRESS)
    execute.add_argument("notebook", type=Path)
    execute.add_argument("--timeout", type=int, default=600)
    execute.add_argument("--save", type=Path, default=None)
    execute.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)

    if args.command == "_execute":
        print(RESULT_MARK + json.dumps(_execute(args.notebook, args.timeout, args.save, args.repeat)), flush=True)
        return 0
    start = time.perf_counter()
    python = ensure_env(rebuild=getattr(args, "rebuild", False))
    print(f"Colab-pinned environment ready in {time.perf_counter() - start:.1f} s: {python}")
    if args.command == "build":
        return 0
    failed = False
    for path in args.notebooks or all_notebooks():
        result = run_notebook(python, path)
        status = "ok" if result["error"] is None else "ERROR\n" + result["error"]
        status += "".join(f"\n    stderr in cell {i}: {line}" for i, line in result["stderr"])
        name = Path(result["notebook"]).relative_to(ROOT) if Path(result["notebook"]).is_relative_to(ROOT) else path
        print(f"{str(name):<55} {result['wall_s']:6.1f} s  {status}", flush=True)
        failed |= result["error"] is not None
    print(f"total {time.perf_counter() - start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

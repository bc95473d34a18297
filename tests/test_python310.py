"""lessons_lib stays within Python 3.10 syntax and standard library (some learners run 3.10; Colab runs 3.12).

Checks: ruff's version-aware parser with --target-version py310 (the syntax); under a real Python 3.10,
importing every standard-library name lessons_lib imports, then the modules that need nothing outside the
standard library. (torch is not installed for 3.10 here, so the modules that import it are left to ruff
and to the version matrix's Python 3.10 row, `nox -s matrix`.)
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # Python 3.10: tomli (requirements.txt)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "lessons_lib"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
# Imports allowed besides the standard library: the declared dependencies and what they bring.
_DEPENDENCY_MODULES = {"torch": "torch", "numpy": "numpy", "matplotlib": "matplotlib", "ipywidgets": "ipywidgets"}
ALLOWED_THIRD_PARTY = {"lessons_lib", "IPython", "pytest"}  # IPython comes with ipywidgets; pytest: plugin only


def _python310() -> str | None:
    found = shutil.which("python3.10")
    candidates = [found, *sorted(map(str, Path.home().glob(".pyenv/versions/3.10.*/bin/python3.10")), reverse=True)]
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 10))"],
                               capture_output=True, text=True)
        if probe.stdout.strip() == "True":
            return candidate
    return None


PYTHON310 = _python310()
needs_310 = pytest.mark.skipif(PYTHON310 is None, reason="no Python 3.10 interpreter on this machine")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _guarded(node: ast.AST, parents: dict) -> bool:
    """True when an import sits in `try: ... except ImportError` (an optional import with a fallback)."""
    while node in parents:
        parent = parents[node]
        if isinstance(parent, ast.Try) and node in parent.body:
            for handler in parent.handlers:
                names = [handler.type] if not isinstance(handler.type, ast.Tuple) else handler.type.elts
                if any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names):
                    return True
        node = parent
    return False


def collect_imports(path: Path) -> list[tuple[str, tuple[str, ...], int]]:
    """Return (absolute module, imported names, line) for each unguarded import of a lessons_lib file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and _guarded(node, parents):
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name, (), node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found.append((module, tuple(alias.name for alias in node.names), node.lineno))
    return found


def test_ruff_finds_no_syntax_newer_than_python310():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is in requirements.txt; run `bash tools/course.sh test` to install it"
    proc = subprocess.run([ruff, "check", "--no-cache", "--isolated", "--target-version", "py310",
                           "--select", "E9", "--output-format", "concise", str(PACKAGE)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"syntax that Python 3.10 rejects:\n{proc.stdout}{proc.stderr}"


def test_only_declared_dependencies_besides_the_standard_library():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    declared = {dep.split(">")[0].split("=")[0].split("<")[0].strip() for dep in config["project"]["dependencies"]}
    allowed = ALLOWED_THIRD_PARTY | {_DEPENDENCY_MODULES.get(d, d) for d in declared}
    stdlib = set(sys.stdlib_module_names)
    stray = sorted({f"{p.relative_to(ROOT)}:{line} imports {module}" for p in MODULES
                    for module, _, line in collect_imports(p)
                    if module.split(".")[0] not in stdlib | allowed})
    assert not stray, f"imports that are neither stdlib nor a dependency in pyproject.toml: {stray}"


@needs_310
def test_standard_library_imports_exist_in_python310():
    wanted = sorted({(module, names) for p in MODULES for module, names, _ in collect_imports(p)
                     if module.split(".")[0] in sys.stdlib_module_names and module != "__future__"})
    script = (
        "import importlib, json, sys\n"
        "missing = []\n"
        "for module, names in json.loads(sys.argv[1]):\n"
        "    try:\n"
        "        mod = importlib.import_module(module)\n"
        "    except ImportError:\n"
        "        missing.append(module); continue\n"
        "    for name in names:\n"
        "        if not hasattr(mod, name):\n"
        "            try: importlib.import_module(module + '.' + name)\n"
        "            except ImportError: missing.append(module + '.' + name)\n"
        "print(json.dumps(missing))\n"
    )
    proc = subprocess.run([PYTHON310, "-c", script, json.dumps(wanted)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [], "standard-library names that Python 3.10 lacks"


@needs_310
def test_modules_that_need_only_the_standard_library_import_under_python310():
    script = ("import importlib, json, sys\n"
              "stdlib, failed = set(json.loads(sys.argv[1])), {}\n"
              "for module in sys.argv[2:]:\n"
              "    try:\n"
              "        importlib.import_module(module)\n"
              "    except ModuleNotFoundError as error:  # a dependency (torch...) is not installed for 3.10 here\n"
              "        if error.name.split('.')[0] in stdlib:\n"
              "            failed[module] = repr(error)\n"
              "    except Exception as error:\n"
              "        failed[module] = repr(error)\n"
              "print(json.dumps({'failed': failed, 'imported': sorted(sys.modules)}))\n")
    modules = sorted(_module_name(p) for p in MODULES)
    proc = subprocess.run([PYTHON310, "-c", script, json.dumps(sorted(sys.stdlib_module_names)), *modules],
                          capture_output=True, text=True, cwd=ROOT, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["failed"] == {}, "modules that fail under Python 3.10 though nothing they need is missing there"
    assert "lessons_lib.platforms" in result["imported"], "lessons_lib.platforms must need nothing but the stdlib"

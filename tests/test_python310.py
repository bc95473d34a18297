"""lessons_lib stays within Python 3.10 syntax and standard library (some learners run 3.10; Colab runs 3.12).

Checks: ruff with the project's config, whose target py310 makes newer syntax an error (and which lints the whole
project, so the test command runs the lint); under a real Python 3.10,
each standard-library import statement of lessons_lib, then the modules that need nothing outside the standard
library. (torch is not installed for 3.10 here, so the modules that import it are left to ruff and to the version
matrix's Python 3.10 row, `nox -s matrix`.) Besides the standard library, lessons_lib imports only the dependencies
pyproject.toml declares, or guards the import with `except ImportError` (an optional one).
"""

from __future__ import annotations

import ast
import json
import re
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
ALSO_ALLOWED = {"lessons_lib", "IPython", "pytest"}  # IPython comes with ipywidgets; pytest: the plugin only
PYTHON310 = next((str(p) for p in sorted(Path.home().glob(".pyenv/versions/3.10.*/bin/python3.10"), reverse=True)),
                 shutil.which("python3.10"))
needs_310 = pytest.mark.skipif(PYTHON310 is None, reason="no Python 3.10 interpreter on this machine")


def imports() -> list[tuple[str, str, str, bool]]:
    """Return (file:line, module, statement, guarded by `except ImportError`) for each absolute import of lessons_lib."""
    found = []
    for path in MODULES:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = {id(node) for trial in ast.walk(tree) if isinstance(trial, ast.Try)
                   and any(h.type is None or re.search(r"\b(Import|ModuleNotFound)Error\b", ast.unparse(h.type))
                           for h in trial.handlers)
                   for statement in trial.body for node in ast.walk(statement)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                pairs = [(alias.name, f"import {alias.name}") for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                pairs = [(node.module, ast.unparse(node))]
            else:
                continue
            found += [(f"{path.relative_to(ROOT)}:{node.lineno}", module, statement, id(node) in guarded)
                      for module, statement in pairs]
    return found


def test_ruff_finds_no_syntax_newer_than_python310():
    """The project's lint (pyproject's [tool.ruff], target py310: newer syntax is an error) over all its Python."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is in requirements.txt; run `bash tools/course.sh test` to install it"
    proc = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise"], cwd=ROOT,  # the whole tree
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"ruff (python310 syntax and the project's lint):\n{proc.stdout}{proc.stderr}"


def test_only_declared_dependencies_besides_the_standard_library():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    allowed = ALSO_ALLOWED | set(sys.stdlib_module_names) | {re.match(r"[\w.-]+", dep)[0] for dep in declared}
    stray = [f"{where}: {statement}" for where, module, statement, guarded in imports()
             if not guarded and module.split(".")[0] not in allowed]
    assert not stray, f"imports that are neither stdlib nor a dependency in pyproject.toml: {stray}"


@needs_310
def test_under_python310_the_stdlib_imports_work_and_the_stdlib_only_modules_import():
    statements = {where: statement for where, module, statement, guarded in imports()
                  if not guarded and module.split(".")[0] in sys.stdlib_module_names}
    modules = [".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__") for p in MODULES]
    script = ("import importlib, json, sys\nlacking, failed = {}, {}\n"
              "for where, statement in json.loads(sys.argv[1]).items():\n"
              "    try:\n        exec(statement, {})\n"
              "    except ImportError as error:\n        lacking[where] = f'{statement}: {error}'\n"
              "for module in sys.argv[2:]:\n    try:\n        importlib.import_module(module)\n"
              "    except ModuleNotFoundError as error:  # a dependency (torch...) is not installed for 3.10 here\n"
              "        if error.name.split('.')[0] in sys.stdlib_module_names:\n"
              "            failed[module] = repr(error)\n"
              "    except Exception as error:\n        failed[module] = repr(error)\n"
              "print(json.dumps([lacking, failed, sorted(sys.modules)]))\n")
    proc = subprocess.run([PYTHON310, "-c", script, json.dumps(statements), *modules], capture_output=True,
                          text=True, cwd=ROOT, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    lacking, failed, imported = json.loads(proc.stdout)
    assert lacking == {}, "standard-library names that Python 3.10 lacks"
    assert failed == {}, "modules that fail under Python 3.10 though nothing they need is missing there"
    assert "lessons_lib.platforms" in imported, "lessons_lib.platforms must need nothing but the stdlib"

"""The public surface of lessons_lib is what lessons, tools and other modules use (issue 41 point 7)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

from tools import helpers_index

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lessons_lib"
# Called by a framework, not by name: IPython's %load_ext.
_HOOK = re.compile(r"load_ipython_extension|unload_ipython_extension")


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def public_names() -> set[tuple[str, str]]:
    """Return (module, name) for each top-level def or class without `_` in a module without `_`."""
    return {(_module(path), node.name) for path in PACKAGE.rglob("*.py")
            if not any(p.startswith("_") and p != "__init__.py" for p in path.relative_to(PACKAGE).parts)
            for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and not node.name.startswith("_")}


def used_names() -> set[tuple[str, str]]:
    """Return what lesson cells, tools/, noxfile.py, benchmarks/ and other lessons_lib modules use."""
    used = set().union(*map(helpers_index.uses, helpers_index.lesson_code().values()))
    for path in [*ROOT.glob("tools/*.py"), ROOT / "noxfile.py", *ROOT.glob("benchmarks/*.py")]:
        used |= helpers_index.uses(path.read_text(encoding="utf-8"))
    for path in PACKAGE.rglob("*.py"):
        module = _module(path)  # a package's __init__ re-exporting its own modules' names does not use them
        own = module + "." if path.name == "__init__.py" else module
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        used |= {key for key in helpers_index.uses(path.read_text(encoding="utf-8"), package)
                 if key[0] != module and not key[0].startswith(own)}
    return used


def documented_names() -> set[tuple[str, str]]:
    """Return the (module, name) rows of docs/helpers.md."""
    text = helpers_index.OUT.read_text(encoding="utf-8")
    return {(module, name) for name, module in re.findall(r"^\| `(\w+)` \| `([\w.]+)` \|", text, re.M)}


def results_of(names: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Return the lessons_lib classes that `names` return, or hold in fields and properties, at any depth."""
    found, todo = set(), [getattr(importlib.import_module(m), n) for m, n in names]
    while todo:
        obj = todo.pop()
        members = [obj] if inspect.isfunction(obj) else [obj, *(getattr(v, "fget", v) for v in vars(obj).values())]
        hints = " ".join(str(getattr(m, "__annotations__", {})) for m in members if callable(m) or m is obj)
        for word in set(re.findall(r"[A-Za-z]\w*", hints)):
            cls = vars(importlib.import_module(obj.__module__)).get(word)
            key = (getattr(cls, "__module__", ""), word)
            if inspect.isclass(cls) and key[0].startswith("lessons_lib") and key not in found:
                found.add(key)
                todo.append(cls)
    return found


def test_every_public_name_is_used_or_documented():
    used = used_names() | documented_names()
    hooks = {(m, n) for m, n in public_names() if _HOOK.fullmatch(n)}
    unused = public_names() - used - results_of(used) - hooks
    names = ", ".join(sorted(f"{m}.{n}" for m, n in unused))
    assert not unused, f"public but used by no lesson, tool or other module (make it private or remove it): {names}"


def test_docs_helpers_md_is_up_to_date(capsys):
    assert helpers_index.main(["--check"]) == 0, capsys.readouterr().out

"""Write docs/helpers.md (the helpers lesson cells use, and which lessons); `--check`: fail if it is stale."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "helpers.md"
_FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def lesson_code() -> dict[str, str]:
    """Return each lesson's python cells ("01" → code), IPython magics and shell lines left out."""
    return {path.name[:2]: "\n".join(line for cell in _FENCE.findall(path.read_text(encoding="utf-8"))
                                     for line in cell.splitlines() if not line.lstrip().startswith(("%", "!")))
            for path in sorted((ROOT / "course_src").glob("[0-9][0-9]_*.md"))}


def _home(module: str, name: str) -> tuple[str, str] | None:
    """Return where the function or class `module.name` is defined (re-exports followed), else None."""
    try:
        obj = getattr(importlib.import_module(module), name, None)
    except ImportError:  # `module` is an object's attribute path, not a module
        return None
    if (inspect.isfunction(obj) or inspect.isclass(obj)) and (obj.__module__ or "").startswith("lessons_lib"):
        return obj.__module__, obj.__name__
    return None


def uses(source: str, package: str = "") -> set[tuple[str, str]]:
    """Return the (module, name) of each lessons_lib function or class `source` imports or reaches."""
    aliases, found = {}, set()  # aliases: local name -> lessons_lib module
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            aliases.update({a.asname or "lessons_lib": a.name if a.asname else "lessons_lib"
                            for a in node.names if a.name.startswith("lessons_lib")})
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""  # `package`: the importer's
            module = ".".join(filter(None, [base, node.module]))
            for a in node.names if module.startswith("lessons_lib") else ():
                try:
                    aliases[a.asname or a.name] = importlib.import_module(f"{module}.{a.name}").__name__
                except ImportError:
                    found.add(_home(module, a.name))
        elif isinstance(node, ast.Attribute) and (parts := ast.unparse(node).split("."))[0] in aliases:
            found.add(_home(".".join([aliases[parts[0]], *parts[1:-1]]), parts[-1]))  # bench.timing.measure
    return found - {None}


def markdown() -> str:
    """Return docs/helpers.md: per helper a lesson uses, its module, docstring summary and lessons."""
    used: dict[tuple[str, str], list[str]] = {}
    for lesson, code in lesson_code().items():
        for key in sorted(uses(code)):
            used.setdefault(key, []).append(lesson)
    rows = ["| `{}` | `{}` | {} | {} |".format(name, module, " ".join((inspect.getdoc(getattr(
        importlib.import_module(module), name)) or "").split("\n\n")[0].split()).replace("|", "\\|"),
        ", ".join(lessons)) for (module, name), lessons in sorted(used.items())]
    return "\n".join(["# Hàm trợ giúp và bài dùng chúng", "", "Sinh bởi `python -m tools.helpers_index` "
                      "từ các ô code của course_src/; đừng sửa tay.", "", "| tên | module | việc | bài |",
                      "| --- | --- | --- | --- |", *rows]) + "\n"


def main(argv: list[str]) -> int:
    """Write docs/helpers.md; with ``--check``, return 1 (saying so) when it is not what it should be."""
    if "--check" not in argv:
        OUT.write_text(markdown(), encoding="utf-8")
        return 0
    stale = not OUT.is_file() or OUT.read_text(encoding="utf-8") != markdown()
    print(f"{OUT.relative_to(ROOT)} is stale: run python -m tools.helpers_index" if stale else "up to date")
    return int(stale)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

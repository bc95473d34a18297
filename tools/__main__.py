"""List the tools that run as ``python -m tools.NAME``, each with its docstring's first line."""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def commands() -> dict[str, str]:
    """Return {module name: first docstring line} for each tool module that can run as a program."""
    found = {}
    for path in sorted(Path(__file__).parent.glob("[a-z]*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body):
            found[path.stem] = (ast.get_docstring(tree) or "").split("\n")[0]
    return found


def main() -> int:
    print("python -m tools.NAME [ARGS]   (NAME --help for its options)\n")
    for name, summary in commands().items():
        print(f"  {name:<20} {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

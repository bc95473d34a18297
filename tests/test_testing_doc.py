"""docs/TESTING.md's table names every test file, and only files that exist."""

from __future__ import annotations

import re
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST_FILES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob("test_*.py")
                    if "fixtures" not in p.parts)


def _named_in_table(page: str) -> list[str]:
    """Return the ``tests/…`` paths and globs written in the page's table rows."""
    rows = [line for line in page.splitlines() if line.startswith("|")]
    return sorted({name for row in rows for name in re.findall(r"`(tests/[^`\s]+\.py)`", row)})


def test_every_test_file_is_in_the_table_and_every_name_is_a_file():
    named = _named_in_table((ROOT / "docs" / "TESTING.md").read_text(encoding="utf-8"))
    assert [n for n in named if not any(fnmatch(f, n) for f in TEST_FILES)] == [], "TESTING.md names no such file"
    assert [f for f in TEST_FILES if not any(fnmatch(f, n) for n in named)] == [], "add these to TESTING.md's table"


def test_the_check_finds_a_missing_and_an_unknown_file():
    page = "| a | `tests/test_x*.py`, `tests/e2e/test_y.py` | b |\n`tests/test_outside.py` is not in a row\n"
    assert _named_in_table(page) == ["tests/e2e/test_y.py", "tests/test_x*.py"]

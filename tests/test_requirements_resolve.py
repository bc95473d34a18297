"""requirements.txt pins what the README's platforms can install (`nox -s resolve` resolves it with uv for Linux
x86_64, macOS 14+ arm64 and Windows x86_64 x Python 3.10-3.13 against https://pypi.org, with the 0.1.0 pins and
macOS 13 as negative controls). These tests check the file itself, without network.
"""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "requirements.txt"


def _requirement_lines(path: Path) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines()
            if line.split("#", 1)[0].strip()]


# --------------------------------------------------------------------------- the file itself (no network)


def test_every_line_pins_one_version_without_a_local_label():
    for line in _requirement_lines(REQUIREMENTS):
        spec = str(Requirement(line).specifier)
        assert re.fullmatch(r"==[0-9][0-9A-Za-z.]*", spec), \
            f"pin each package to one public version (name==X.Y.Z, no '+local' label): {line!r}"

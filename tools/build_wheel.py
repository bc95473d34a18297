"""Build lessons_lib as a wheel: the file a learner attaches to a Kaggle notebook that has no Internet.

The build runs on a copy of the package in a temporary folder (nothing is written into the checkout except
the wheel itself), without build isolation when setuptools is importable (no download), else with it.

Usage:
    .venv/bin/python tools/build_wheel.py            # writes dist/lessons_lib-<version>-py3-none-any.whl
    .venv/bin/python tools/build_wheel.py -o DIR     # writes it into DIR instead
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "lessons_lib"
# What the build needs from the checkout (pyproject.toml names README.md as the long description and LICENSE as
# the licence file every copy of the code must carry).
_BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", PACKAGE)


def package_files(root: Path = ROOT) -> list[Path]:
    """Return the files of lessons_lib that a wheel must contain (no caches), sorted."""
    base = root / PACKAGE
    return sorted(p for p in base.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"))


def sources_digest(root: Path = ROOT) -> str:
    """Return a SHA-256 of lessons_lib's files and pyproject.toml: it changes whenever a built wheel would."""
    digest = hashlib.sha256()
    for path in [root / "pyproject.toml", *package_files(root)]:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def build_wheel(out_dir: Path | str = ROOT / "dist", python: Path | str = sys.executable,
                root: Path = ROOT) -> Path:
    """Build the lessons_lib wheel into `out_dir` and return its path.

    Args:
        out_dir: Folder for the wheel (created if missing); an existing wheel of the same name is replaced.
        python: The Python that runs `pip wheel` (it needs pip; setuptools avoids a download).
        root: The repository root holding pyproject.toml and lessons_lib/.

    Returns:
        The path of the built ``lessons_lib-<version>-py3-none-any.whl``.
    """
    if not isinstance(out_dir, (str, Path)):
        raise TypeError(f"out_dir must be a folder path (str or Path), got {type(out_dir).__name__}")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"out_dir must be a folder, but {out_dir} is a file")
    missing = [name for name in _BUILD_INPUTS if not (root / name).exists()]
    if missing:
        raise ValueError(f"root must be the repository root; {root} lacks {', '.join(missing)}")
    with tempfile.TemporaryDirectory(prefix="lessons-wheel-") as tmp:
        src, built = Path(tmp, "src"), Path(tmp, "out")
        src.mkdir()
        for name in _BUILD_INPUTS:
            if (root / name).is_dir():
                shutil.copytree(root / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                shutil.copy2(root / name, src / name)
        base = [str(python), "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(built), str(src)]
        attempts = [base[:5] + ["--no-build-isolation"] + base[5:], base] if _has_setuptools(python) else [base]
        errors = []
        for cmd in attempts:
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode == 0:
                break
            errors.append(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
        else:
            raise RuntimeError("building the lessons_lib wheel failed:\n" + "\n".join(errors))
        wheels = sorted(built.glob(f"{PACKAGE}-*.whl"))
        if len(wheels) != 1:
            raise RuntimeError(f"expected one {PACKAGE} wheel, pip wrote {[w.name for w in wheels]}")
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / wheels[0].name
        shutil.copy2(wheels[0], target)
    check_wheel(target, root)
    return target


def check_wheel(wheel: Path, root: Path = ROOT) -> None:
    """Raise RuntimeError unless `wheel` holds every file of lessons_lib/ (a subpackage missing from
    pyproject.toml's `packages` list would otherwise be left out silently)."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    expected = {p.relative_to(root).as_posix() for p in package_files(root)}
    missing = sorted(expected - names)
    if missing:
        raise RuntimeError(f"{wheel.name} lacks {missing}: add the subpackage to [tool.setuptools] packages "
                           "in pyproject.toml (or package-data for non-Python files)")


def _has_setuptools(python: Path | str) -> bool:
    if Path(python) == Path(sys.executable):
        return importlib.util.find_spec("setuptools") is not None
    probe = subprocess.run([str(python), "-c", "import setuptools"], capture_output=True)
    return probe.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out-dir", type=Path, default=ROOT / "dist", help="output folder (default dist/)")
    args = parser.parse_args(argv)
    wheel = build_wheel(args.out_dir)
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    shown = wheel.relative_to(ROOT) if wheel.is_relative_to(ROOT) else wheel
    print(f"{shown}  ({wheel.stat().st_size / 1024:.0f} KiB, sha256 {sha[:16]}…)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

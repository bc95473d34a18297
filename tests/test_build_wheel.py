"""tools/build_wheel.py: the wheel learners attach to an offline Kaggle notebook."""

from __future__ import annotations

import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (the version matrix runs it): pytest brings tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import build_wheel  # noqa: E402

import lessons_lib  # noqa: E402


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel.build_wheel(tmp_path_factory.mktemp("dist"))


def test_wheel_holds_every_file_of_the_package(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    expected = {p.relative_to(ROOT).as_posix() for p in build_wheel.package_files()}
    assert expected and expected <= names
    assert "lessons_lib/py.typed" in names and "lessons_lib/notebook.py" in names
    assert not any(n.startswith(("tests/", "notebooks/", "tools/")) or "__pycache__" in n for n in names)


def test_wheel_metadata_matches_pyproject(wheel):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert wheel.name == f"lessons_lib-{lessons_lib.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(zf.read(meta_name).decode())
        entry_points = zf.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
    assert meta["Version"] == project["version"] == lessons_lib.__version__
    assert meta["Requires-Python"] == project["requires-python"]
    assert sorted(r.replace(" ", "") for r in meta.get_all("Requires-Dist")) == sorted(
        d.replace(" ", "") for d in project["dependencies"])
    assert "lessons_lib.pytest_plugin" in entry_points


def test_build_writes_nothing_into_the_checkout(tmp_path):
    def build_outputs():
        return {p.name: p.stat().st_mtime_ns for p in ROOT.iterdir()
                if p.name in ("build", "dist") or p.name.endswith(".egg-info")}

    before = build_outputs()
    built = build_wheel.build_wheel(tmp_path / "out")
    assert built.parent == tmp_path / "out"
    assert build_outputs() == before, "the build must run on a copy (no build/, dist/ or egg-info in the checkout)"


def test_sources_digest_follows_the_sources(tmp_path):
    root = tmp_path / "repo"
    (root / "lessons_lib").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\n", encoding="utf-8")
    (root / "lessons_lib" / "__init__.py").write_text("x = 1\n", encoding="utf-8")
    first = build_wheel.sources_digest(root)
    (root / "lessons_lib" / "__pycache__").mkdir()
    (root / "lessons_lib" / "__pycache__" / "a.pyc").write_bytes(b"cache")
    assert build_wheel.sources_digest(root) == first, "caches must not change the digest"
    (root / "lessons_lib" / "__init__.py").write_text("x = 2\n", encoding="utf-8")
    assert build_wheel.sources_digest(root) != first


def test_check_wheel_names_a_missing_subpackage(tmp_path, wheel):
    root = tmp_path / "repo"
    (root / "lessons_lib" / "newpkg").mkdir(parents=True)
    for path in build_wheel.package_files():
        target = root / path.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    (root / "lessons_lib" / "newpkg" / "__init__.py").write_text("", encoding="utf-8")
    with pytest.raises(RuntimeError, match=r"lessons_lib/newpkg/__init__\.py.*packages"):
        build_wheel.check_wheel(wheel, root)


def test_build_wheel_rejects_bad_arguments(tmp_path):
    with pytest.raises(TypeError, match="folder path"):
        build_wheel.build_wheel(42)
    a_file = tmp_path / "file.txt"
    a_file.write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match="must be a folder"):
        build_wheel.build_wheel(a_file)
    with pytest.raises(ValueError, match="repository root"):
        build_wheel.build_wheel(tmp_path / "out", root=tmp_path)

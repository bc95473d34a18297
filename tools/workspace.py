"""Keep the working copy of the notebooks (notebooks_cua_toi/) in step with the course without losing edits.

`bash tools/course.sh lab` opens this copy (ignored by git), never the tracked notebooks/, so running and saving
a notebook changes nothing the tests check. A manifest inside the copy (.course_manifest.json) records, for each
notebook, the SHA-256 of the course version it was copied from. Each refresh:

- copies a course notebook that the copy lacks (deleting your copy and restarting is how to reset a notebook);
- replaces an untouched copy (same bytes as when copied) when the course version changed;
- keeps a copy you edited; if the course version changed too, writes the new version beside it as
  ``NAME.ban-moi-<8 hex>.ipynb`` and says so, once per new version (delete it if you do not want it);
- leaves alone every other file (yours, and copies of notebooks the course no longer has).

Standard library only: tools/course.py runs it (`course.sh lab`) before the course environment exists.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKSPACE = ROOT / "notebooks_cua_toi"
MANIFEST = ".course_manifest.json"
NEW_VERSION_TAG = "ban-moi"


@dataclass
class SyncReport:
    """What one refresh did, by notebook path relative to the copy."""

    copied: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    offered: list[tuple[str, str]] = field(default_factory=list)  # (your copy, the new version beside it)

    def messages(self) -> list[str]:
        """Return one line per thing the learner should know."""
        lines = []
        if self.copied:
            lines.append(f"📄 Đã chép {len(self.copied)} notebook mới vào bản làm việc.")
        if self.updated:
            lines.append(f"🔄 Đã cập nhật {len(self.updated)} notebook bạn chưa sửa: {', '.join(self.updated)}")
        for mine, beside in self.offered:
            lines.append(f"⚠️ Khoá học có bản mới của {mine}; bạn đã sửa bản của mình nên nó được giữ nguyên. "
                         f"Bản mới nằm cạnh: {beside}")
        return lines


def file_sha256(path: Path) -> str:
    """Return the SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def course_notebooks(source: Path) -> list[Path]:
    """Return the notebooks under `source` (checkpoints excluded), sorted."""
    return sorted(p for p in Path(source).rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def _load_manifest(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Return ({notebook: SHA-256 it was copied from}, {notebook: SHA-256 of the version offered beside it})."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return tuple({str(k): str(v) for k, v in data.get(key, {}).items()} for key in ("files", "offered"))
    except (OSError, ValueError, AttributeError, TypeError):
        return {}, {}  # missing or damaged: every differing copy then counts as edited, so nothing is overwritten


def _write_manifest(path: Path, files: dict[str, str], offered: dict[str, str]) -> None:
    data = {"version": 1, "files": dict(sorted(files.items())), "offered": dict(sorted(offered.items()))}
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")  # a damaged one only makes sync keep more


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def sync(source: Path | str, dest: Path | str) -> SyncReport:
    """Refresh the working copy `dest` (created if missing) from the course's notebooks/ `source`; report what it did."""
    source, dest = Path(source), Path(dest)
    if not source.is_dir():
        raise ValueError(f"source phải là thư mục notebooks/ của khoá học, nhưng {source} không phải một thư mục")
    if dest.exists() and not dest.is_dir():
        raise ValueError(f"dest phải là thư mục cho bản làm việc, nhưng {dest} là một file: hãy chuyển nó đi chỗ khác")
    dest.mkdir(parents=True, exist_ok=True)
    manifest_path = dest / MANIFEST
    manifest, offered = _load_manifest(manifest_path)
    report = SyncReport()
    for src in course_notebooks(source):
        rel = src.relative_to(source).as_posix()
        target = dest / rel
        new = file_sha256(src)
        mine = file_sha256(target) if target.exists() else None
        if mine in (None, manifest.get(rel)) and mine != new:  # missing, or untouched since it was copied
            _copy(src, target)
            (report.copied if mine is None else report.updated).append(rel)
        if mine in (None, new, manifest.get(rel)):
            manifest[rel] = new
        elif manifest.get(rel) != new and offered.get(rel) != new:  # edited (or of unknown origin): kept
            beside = target.with_name(f"{target.stem}.{NEW_VERSION_TAG}-{new[:8]}{target.suffix}")
            if not beside.exists():  # never overwrite a file of the learner's
                _copy(src, beside)
            offered[rel] = new
            report.offered.append((rel, beside.relative_to(dest).as_posix()))
    _write_manifest(manifest_path, manifest, offered)
    return report

"""tools/workspace.py: the learner's working copy follows the course and never loses an edit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools import workspace

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def course(tmp_path):
    source = tmp_path / "notebooks"
    (source / "solutions").mkdir(parents=True)
    (source / "01_a.ipynb").write_text('{"v": 1}', encoding="utf-8")
    (source / "02_b.ipynb").write_text('{"v": 1}', encoding="utf-8")
    (source / "solutions" / "02_b_solutions.ipynb").write_text('{"s": 1}', encoding="utf-8")
    (source / ".ipynb_checkpoints").mkdir()
    (source / ".ipynb_checkpoints" / "01_a-checkpoint.ipynb").write_text("{}", encoding="utf-8")
    return source, tmp_path / "notebooks_cua_toi"


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_first_refresh_copies_every_notebook_and_records_it(course):
    source, dest = course
    report = workspace.sync(source, dest)
    assert report.copied == ["01_a.ipynb", "02_b.ipynb", "solutions/02_b_solutions.ipynb"]
    assert _text(dest / "solutions" / "02_b_solutions.ipynb") == '{"s": 1}'
    assert not (dest / ".ipynb_checkpoints").exists()
    manifest = json.loads(_text(dest / workspace.MANIFEST))
    assert manifest["files"]["01_a.ipynb"] == workspace.file_sha256(source / "01_a.ipynb")
    assert report.messages() == ["📄 Đã chép 3 notebook mới vào bản làm việc."]


def test_untouched_copies_follow_the_course(course):
    source, dest = course
    workspace.sync(source, dest)
    (source / "01_a.ipynb").write_text('{"v": 2}', encoding="utf-8")
    report = workspace.sync(source, dest)
    assert report.updated == ["01_a.ipynb"] and _text(dest / "01_a.ipynb") == '{"v": 2}'
    assert "01_a.ipynb" in report.messages()[0]
    (source / "01_a.ipynb").write_text('{"v": 3}', encoding="utf-8")
    assert workspace.sync(source, dest).updated == ["01_a.ipynb"], "the manifest must follow each update"


def test_an_edited_copy_is_kept_and_the_new_version_written_beside_it_once(course):
    source, dest = course
    assert workspace.sync(source, dest).messages() and not workspace.sync(source, dest).messages(), "nothing new"
    (dest / "01_a.ipynb").write_text('{"v": 1, "mine": true}', encoding="utf-8")
    assert workspace.sync(source, dest).messages() == [], "the course did not change: nothing to say"
    (source / "01_a.ipynb").write_text('{"v": 2}', encoding="utf-8")
    report = workspace.sync(source, dest)
    beside = f"01_a.{workspace.NEW_VERSION_TAG}-{workspace.file_sha256(source / '01_a.ipynb')[:8]}.ipynb"
    assert report.offered == [("01_a.ipynb", beside)] and report.updated == []
    assert _text(dest / "01_a.ipynb") == '{"v": 1, "mine": true}' and _text(dest / beside) == '{"v": 2}'
    assert report.messages() == [f"⚠️ Khoá học có bản mới của 01_a.ipynb; bạn đã sửa bản của mình nên nó được "
                                 f"giữ nguyên. Bản mới nằm cạnh: {beside}"]
    (dest / beside).unlink()  # the learner does not want it: it is not offered again
    again = workspace.sync(source, dest)
    assert again.offered == [] and not (dest / beside).exists()
    (source / "01_a.ipynb").write_text('{"v": 3}', encoding="utf-8")
    assert len(workspace.sync(source, dest).offered) == 1, "a newer version is offered again"


def test_a_deleted_copy_is_restored_and_the_learners_own_files_are_left_alone(course):
    source, dest = course
    workspace.sync(source, dest)
    (dest / "02_b.ipynb").unlink()
    (dest / "my_notes.ipynb").write_text("mine", encoding="utf-8")
    (source / "01_a.ipynb").unlink()  # the course dropped a notebook: the learner's copy stays
    report = workspace.sync(source, dest)
    assert report.copied == ["02_b.ipynb"]
    assert _text(dest / "my_notes.ipynb") == "mine" and (dest / "01_a.ipynb").exists()


def test_without_a_manifest_nothing_that_differs_is_overwritten(course):
    source, dest = course
    workspace.sync(source, dest)
    (dest / "01_a.ipynb").write_text("edited", encoding="utf-8")
    (dest / workspace.MANIFEST).write_text("{not json", encoding="utf-8")
    (source / "02_b.ipynb").write_text('{"v": 2}', encoding="utf-8")
    report = workspace.sync(source, dest)
    assert _text(dest / "01_a.ipynb") == "edited" and _text(dest / "02_b.ipynb") == '{"v": 1}'
    assert {mine for mine, _ in report.offered} == {"01_a.ipynb", "02_b.ipynb"}, \
        "copies that differ from the course, of unknown origin, are kept and the course's version offered beside"
    assert json.loads(_text(dest / workspace.MANIFEST))["files"]["solutions/02_b_solutions.ipynb"]


def test_bad_folders_say_what_to_pass(course, tmp_path):
    source, dest = course
    nope, file = tmp_path / "nope", tmp_path / "file"
    file.write_text("x", encoding="utf-8")
    for bad_source, bad_dest, named, bad in ((nope, dest, "source", nope), (source, file, "dest", file)):
        with pytest.raises(ValueError, match=rf"^{named} .*{re.escape(str(bad))}"):  # the argument and its value
            workspace.sync(bad_source, bad_dest)


def test_the_working_copy_is_ignored_by_git():
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert f"{workspace.WORKSPACE.name}/" in ignored

"""The site's error atlas (tools/atlas.py) against the executed lessons: every error a lesson shows has an entry."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from lessons_lib.errors import explain
from tools import atlas
from tools.run import course_notebooks, execute_all_cached

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def lessons() -> dict[str, nbformat.NotebookNode]:
    """The executed lessons (no solutions), from the cache the site uses (tools/run.py)."""
    paths = [p for p in course_notebooks() if "solutions" not in p.parts]
    found = {p.relative_to(REPO).as_posix(): run for p, run in zip(paths, execute_all_cached(paths), strict=True)}
    assert not [run.error for run in found.values() if run.error is not None]
    return {path: run.nb for path, run in found.items()}


@pytest.fixture(scope="module")
def shown(lessons) -> list[atlas.Shown]:
    return [error for path, nb in lessons.items() for error in atlas.shown_errors(nb, path)]


@pytest.mark.slow
def test_every_error_a_lesson_shows_is_in_the_atlas_with_its_place_meaning_and_fix(shown):
    page = atlas.atlas_markdown(shown)  # raises, naming them, if an error has no rule in explain()'s table
    for error in shown:
        assert error.text in page and f"]({error.link})" in page, error
        meaning, fix = atlas.meaning_and_fix(error.rule)
        assert f"\n**Ý nghĩa:** {meaning}\n\n**Cách sửa:** {fix}\n" in page


@pytest.mark.slow
def test_every_printed_expect_error_and_traceback_is_read(lessons, shown):
    for nb in lessons.values():
        for cell in nb.cells:
            # A cell's printed text, read whole as atlas.shown_errors reads it: the kernel may send one print_exc()
            # as several stream outputs (it flushes on a timer), e.g. "Traceback (most recent call last):" alone.
            text = "".join(o.text for o in cell.get("outputs", []) if o.output_type == "stream")
            assert text.count("⚠️ Lỗi (cố ý) — ") + text.count("Traceback (most") <= len(atlas.errors_in(text))
    lesson_03 = [e for e in shown if "/03_" in e.notebook]
    assert any(e.printed and e.section.startswith("⭐ 1.") and "expected device" in e.text for e in lesson_03)
    assert any(not e.printed and "device-side assert" in e.text and "CUDA_LAUNCH_BLOCKING" in e.text
               for e in lesson_03)


def test_the_meaning_and_fix_are_explains_own_words():
    for rule in atlas._RULES:
        meaning, fix = atlas.meaning_and_fix(rule)
        assert rule.hint in (f"{meaning} {fix}", f"{meaning} Cách sửa: {fix}"), rule.key
    hint = explain(ValueError("Không hiểu thiết bị 'cdua'."))
    assert " ".join(hint.split()) == "💡 " + " ".join(atlas.find_rule("Không hiểu thiết bị 'x'").hint.split())


def test_errors_are_read_from_printed_outputs_and_text_blocks_and_unknown_ones_fail_the_page():
    printed = "⚠️ Lỗi (cố ý) — RuntimeError: line one\nline two\n💡 hint\nis_oom: True\n"
    assert atlas.errors_in(printed) == ["RuntimeError: line one\nline two"]
    assert atlas.errors_in("⚠️ Lỗi (cố ý) — KeyError: 'x'\nprinted after\n") == ["KeyError: 'x'"]
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Bài 14.9 · Thử\n## ⭐ 1. Mục `một`\n```text\nTraceback (most recent call last):\n"
                                      "  File \"x.py\"\ntorch.AcceleratorError: CUDA error: x\nmore\n(mã thoát 1)\n```"),
        nbformat.v4.new_code_cell(outputs=[nbformat.v4.new_output("stream", text="⚠️ Lỗi (cố ý) — KeyError: 'k'\n")])])
    quoted, printed_key = atlas.shown_errors(nb, "notebooks/99_x.ipynb")
    assert quoted == atlas.Shown("torch.AcceleratorError: CUDA error: x\nmore", "notebooks/99_x.ipynb", "Bài 14.9",
                                 "⭐ 1. Mục `một`", False)
    assert quoted.link == "notebooks/99_x.ipynb#-1-mục-một" and printed_key.printed and printed_key.rule is None
    with pytest.raises(ValueError, match="KeyError: 'k'"):
        atlas.atlas_markdown([quoted, printed_key])

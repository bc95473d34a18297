"""The glossary (course_src/glossary.json): well-formed, linked from lesson 01 and once per lesson, and the lint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import glossary

ROOT = Path(__file__).resolve().parent.parent

ENTRIES = glossary.load()
LESSONS = sorted((ROOT / "course_src").glob("[0-9][0-9]_*.md"))


def test_every_entry_is_complete_unique_and_used_where_it_is_first_taught():
    assert len({e["vi"].lower() for e in ENTRIES}) == len(ENTRIES) > 20
    for e in ENTRIES:
        (source,) = (ROOT / "course_src").glob(f"{e['first']}_*.md")
        assert glossary._term(e["vi"]).search(glossary.prose(source.read_text(encoding="utf-8"))), e


@pytest.mark.parametrize("bad", [[{"vi": "a", "en": "a", "meaning": "x", "first": "01"}] * 2, [{"vi": "a"}]])
def test_a_duplicate_or_incomplete_entry_fails(tmp_path, bad):
    (tmp_path / "g.json").write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(ValueError, match="twice|needs non-empty"):
        glossary.load(tmp_path / "g.json")


def test_lesson_01_links_the_glossary_page_instead_of_a_table():
    text = LESSONS[0].read_text(encoding="utf-8")
    assert "](../docs/glossary.md)" in text and "glossary:start" not in text


@pytest.mark.parametrize("src", [*LESSONS, ROOT / "course_src" / "_template.md"], ids=lambda p: p.stem)
def test_lessons_use_the_glossary_terms(src):
    problems = glossary.lint(src.read_text(encoding="utf-8"), ENTRIES)
    assert not problems, f"{src.name}: use the glossary's term:\n" + "\n".join(problems)


def test_lint_reads_prose_only_and_accepts_points_spaces_lists_and_code():
    text = "Ta train nó.\n\n`model.train()` và [x](train.md)\n\n```python\nmodel.train()\n```\n"
    assert glossary.lint(text, ENTRIES) == ["line 1: 'train' → 'huấn luyện'"]
    assert glossary.lint("8.1 TFLOP/s, 6 500 tham số, N = 64, 128, 256 và `f(1,2)` $a_{1,2}$\n", []) == []


def test_only_the_first_prose_use_is_linked():
    text = "## Kernel\n\n`kernel` rồi kernel, lại kernel.\n"
    linked = glossary.link_first_uses(text, ENTRIES, "g.md")
    assert linked == "## Kernel\n\n`kernel` rồi [kernel](g.md#g-kernel), lại kernel.\n"


@pytest.mark.parametrize("prose, bad", [("T4 đạt 8,1 TFLOP/s", "'8,1'"), ("1 GiB ≈ 1,074 GB", "'1,074'"),
                                         ("67,108,864 số", "'67,108,864'")])
def test_the_lint_rejects_a_number_written_with_a_comma(prose, bad):
    (problem,) = glossary.lint(prose + "\n", [])
    assert bad in problem and "decimal point" in problem

"""The site's error atlas: every error a lesson prints (``expect_error``, a traceback) or quotes (a ``text``
block), where, and what it means and how to fix it in the words of lessons_lib.errors' table, the one ``explain()``
reads, so the page and the 💡 hints never disagree. tools/build_site.py writes the page."""

from __future__ import annotations

import re
from dataclasses import dataclass

from myst_parser.mdit_to_docutils.base import default_slugify

from lessons_lib.errors import _RULES, _Rule, find_rule

PAGE = "atlas"
ERROR_LINE = re.compile(r"^(?:⚠️ Lỗi \(cố ý\) — )?((?:[a-z_]+\.)*[A-Z]\w*(?:Error|Exception): .+)$")
NOT_MESSAGE = ("💡", "⚠️", "(", "Traceback")  # a line that ends the message above it


@dataclass(frozen=True)
class Shown:
    """One error a lesson shows: its text, its lesson and section, and whether a cell printed it."""

    text: str
    notebook: str  # repository path of the notebook
    lesson: str
    section: str
    printed: bool  # False: quoted in the prose (a ```text block)

    @property
    def link(self) -> str:
        """Return the link to the section on the site (MyST resolves it; a wrong one fails the build)."""
        return f"{self.notebook}#{default_slugify(re.sub(r'[`*]', '', self.section))}"

    @property
    def rule(self) -> _Rule | None:
        """Return the entry of explain()'s table for this error (None: it has none)."""
        return find_rule(re.sub(r"^(?:[a-z_]+\.)+", "", self.text))


def errors_in(text: str) -> list[str]:
    """Return the errors in printed or quoted `text`: each "Type: message" line and the lines that continue it."""
    lines, found = text.splitlines(), []
    for i, line in enumerate(lines):
        if not (match := ERROR_LINE.match(line)):
            continue
        end = i + 1
        while end < len(lines) and lines[end].strip() and not ERROR_LINE.match(lines[end]) \
                and not lines[end].startswith(NOT_MESSAGE):
            end += 1
        if line.startswith("⚠️") and not (end < len(lines) and lines[end].startswith("💡")):
            end = i + 1  # expect_error's message ends at its 💡 hint; without one, only its first line is sure
        found.append("\n".join([match[1], *lines[i + 1:end]]))
    return found


def shown_errors(nb, notebook: str) -> list[Shown]:
    """Return every error the executed notebook `nb` (at repository path `notebook`) prints or quotes."""
    found: list[Shown] = []
    lesson = section = ""
    for cell in nb.cells:
        if cell.cell_type == "code":
            text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("output_type") == "stream")
            found += [Shown(t, notebook, lesson, section, True) for t in errors_in(text)]
            continue
        fence, inside = None, False  # fence: the lines of the ```text block being read
        for line in cell.source.splitlines():
            if line.startswith("```"):
                if fence is not None:
                    found += [Shown(t, notebook, lesson, section, False) for t in errors_in("\n".join(fence))]
                fence = [] if not inside and line.strip() == "```text" else None
                inside = not inside
            elif fence is not None:
                fence.append(line)
            elif not inside and (heading := re.match(r"(#{1,3}) (.+)", line)):
                section = heading[2].strip()
                lesson = re.sub(r"^\W+", "", section.split(" · ")[0]) if heading[1] == "#" else lesson
    return found


def meaning_and_fix(rule: _Rule) -> tuple[str, str]:
    """Split a rule's hint into what the error means (its first sentence) and how to fix it (the rest)."""
    meaning, _, fix = rule.hint.partition(". ")
    return meaning + ".", fix.removeprefix("Cách sửa: ")


def atlas_markdown(shown: list[Shown]) -> str:
    """Return the atlas page (MyST Markdown): one entry per rule of explain()'s table that a lesson shows."""
    missing = [f"{s.notebook} ({s.section}): {s.text}" for s in shown if s.rule is None]
    if missing:
        raise ValueError("errors a lesson shows with no rule in lessons_lib/errors.py (add one):\n" + "\n".join(missing))
    lines = ["# Atlas lỗi", "",
             "Mọi lỗi mà các bài cho bạn xem, gom theo nghĩa: ý nghĩa và cách sửa là đúng câu chữ mà `explain()` in ở "
             "dòng 💡; dưới đó là thông báo như PyTorch in ra và nơi bài cho thấy nó (sinh tự động từ các notebook đã "
             "chạy và các khối mẫu trong bài). Gặp lỗi trong code của bạn? Dán thông báo lỗi vào ô tìm kiếm.", ""]
    for rule in _RULES:
        texts: dict[str, list[Shown]] = {}
        for s in shown:
            if s.rule is rule:
                texts.setdefault(s.text, []).append(s)
        if not texts:
            continue
        meaning, fix = meaning_and_fix(rule)
        short = re.split(r" \(|: ", meaning.removesuffix("."))[0]  # the meaning's first words name the entry
        lines += [f"## {short if len(short) >= 25 else meaning.removesuffix('.')}", "",
                  f"**Ý nghĩa:** {meaning}", "", f"**Cách sửa:** {fix}", ""]
        for text, places in texts.items():
            where = dict.fromkeys(f"[{s.lesson} · {s.section}]({s.link})" + ("" if s.printed else " (mẫu trong bài)")
                                  for s in places)
            lines += ["````{code-block} text", ":class: lessons-atlas-error", "", text, "````", "",
                      "Gặp ở: " + "; ".join(where), ""]
    return "\n".join(lines)

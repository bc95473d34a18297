"""The glossary (course_src/glossary.json; docs/DEVELOPING.md): its page, first-use links, the lint."""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GLOSSARY = ROOT / "course_src" / "glossary.json"
PAGE = ROOT / "docs" / "glossary.md"  # generated: the site page "Thuật ngữ"
_CODE = re.compile(r"```.*?^```|`[^`\n]*`|<!--.*?-->|\]\([^)]*\)|\$[^$\n]+\$", re.S | re.M)
_NO_LINK = re.compile(r"^(?:#.*|.*⏱️.*|\|.*)$|\[[^\]]*\]", re.M)  # headings, the time line, tables, link texts
_LINK_TEXT = re.compile(r"\[(?:[^\[\]\n]|\[[^\[\]\n]*\])*\](?=\()")  # a link's text: no link inside a link


def load(path: Path = GLOSSARY) -> list[dict]:
    """Return the glossary entries; raise ValueError on a duplicate term or an entry without vi/en/meaning/first."""
    entries, seen = json.loads(path.read_text(encoding="utf-8")), set()
    for entry in entries:
        if not all(isinstance(entry.get(key), str) and entry[key].strip() for key in ("vi", "en", "meaning", "first")):
            raise ValueError(f"{path.name}: {entry} needs non-empty vi, en, meaning and first")
        if entry["vi"].lower() in seen:
            raise ValueError(f"{path.name}: the term {entry['vi']!r} is there twice")
        seen.add(entry["vi"].lower())
    return entries


def anchor(term: str) -> str:
    """Return the page anchor of a term: ``g-`` and its ASCII slug ("huấn luyện" → "g-huan-luyen")."""
    plain = "".join(c for c in unicodedata.normalize("NFD", term.lower()) if not unicodedata.combining(c))
    return "g-" + re.sub(r"[^a-z0-9]+", "-", plain.replace("đ", "d")).strip("-")


def page(entries: list[dict]) -> str:
    """Return docs/glossary.md, the site page "Thuật ngữ": one anchored item per term (readable on a phone)."""
    items = [f'- <a id="{anchor(e["vi"])}"></a>**{e["vi"]}** (*{e["en"]}*): {e["meaning"]} — học ở bài 14.{int(e["first"])}'
             for e in entries]
    return ("# Thuật ngữ\n\nSinh bởi `python -m tools.build_course` từ `course_src/glossary.json`; đừng sửa tay. "
            "Mỗi mục: từ khoá học dùng, từ tiếng Anh, nghĩa, bài dạy nó. Lần đầu một từ xuất hiện trong mỗi bài có "
            "liên kết về đây.\n\n" + "\n".join(items) + "\n")


def _blank(found: re.Match) -> str:
    return re.sub(r"[^\n]", " ", found.group(0))


def prose(text: str) -> str:
    """Return `text` with code, comments, math and link targets blanked (positions hold)."""
    return _CODE.sub(_blank, text)


def _term(word: str) -> re.Pattern:
    return re.compile(rf"(?<![\w-])[{word[0].upper()}{word[0]}]{re.escape(word[1:])}(?![\w-])")


def link_first_uses(text: str, entries: list[dict], target: str) -> str:
    """Link the first prose use of each term in a lesson to its entry at `target` (the page, from the notebook)."""
    masked = _NO_LINK.sub(_blank, prose(text))
    for found in _LINK_TEXT.finditer(text):  # read on the text itself: prose() blanks the "]" that ends it
        masked = masked[:found.start()] + _blank(found) + masked[found.end():]
    links = []
    for e in sorted(entries, key=lambda e: -len(e["vi"])):  # "bất đồng bộ" before "đồng bộ"
        if found := _term(e["vi"]).search(masked):
            links.append((found.start(), found.end(), anchor(e["vi"])))
            masked = masked[:found.start()] + _blank(found) + masked[found.end():]
    for start, end, name in sorted(links, reverse=True):
        text = f"{text[:start]}[{text[start:end]}]({target}#{name}){text[end:]}"
    return text


#: One way to write a number, in prose as in outputs: a decimal point (as Python prints) and thousands grouped by a
#: space ("1.07 GB", "6 500"); a comma between digits ("1,074" or "8,1") reads one way in Vietnamese, another in code.
_COMMA_NUMBER = re.compile(r"(?<![\w,])\d+(?:,\d+)+(?![\w])")


def lint(text: str, entries: list[dict]) -> list[str]:
    """Return "line N: 'variant' → 'term'" for each rejected variant or comma-written number in a lesson's prose."""
    masked = prose(text)

    def line(m: re.Match) -> int:
        return masked.count(chr(10), 0, m.start()) + 1

    return ([f"line {line(m)}: {m.group(0)!r} → {e['vi']!r}"
             for e in entries for variant in e.get("avoid", []) for m in _term(variant).finditer(masked)]
            + [f"line {line(m)}: {m.group(0)!r} → a decimal point and space-grouped thousands (1.07, 6 500)"
               for m in _COMMA_NUMBER.finditer(masked)])


"""Every link in a generated notebook works where the notebook is opened (Colab, Kaggle, GitHub, Jupyter).

A notebook opened from a badge lives at a Colab or Kaggle address, so a relative link (``../docs/glossary.md``,
``03_x.ipynb``) leads nowhere there. tools/build_course.py (``absolute_links``) makes each one the repository's
file at the pinned ref of ``[tool.course]``; this test reads every link of every Markdown cell of both variants
and proves it absolute, and that each one into the repository names a file of this tree (the tree the ref tags)
and an anchor that file has.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tools import build_course

ROOT = Path(__file__).resolve().parent.parent

NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in str(p))
CONFIG = build_course.load_config()
REPO_PREFIX = f"https://github.com/{CONFIG.repo}/blob/{CONFIG.ref}/"
_CODE = re.compile(r"^```.*?^```|`[^`\n]*`|<!--.*?-->", re.S | re.M)
_TARGETS = (re.compile(r"\]\(([^()\s]+)(?:[ \t]+\"[^\"\n]*\")?\)"),  # [text](target), ![alt](target)
            re.compile(r"^[ \t]{0,3}\[[^\]\n]+\]:[ \t]*(\S+)", re.M),  # [name]: target
            re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=[\"']([^\"']+)", re.I))  # HTML


def links(markdown: str) -> list[str]:
    """Return every link target of a Markdown text (code and comments left out)."""
    prose = _CODE.sub(lambda m: " " * len(m.group(0)), markdown)
    return [found.group(1) for pattern in _TARGETS for found in pattern.finditer(prose)]


def markdown_cells(path: Path) -> list[str]:
    return ["".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"]
            if c["cell_type"] == "markdown"]


def anchors(path: Path) -> set[str]:
    """Return the anchors a repository file has: explicit ids, and its headings as GitHub and Jupyter name them."""
    text = "\n".join(markdown_cells(path)) if path.suffix == ".ipynb" else path.read_text(encoding="utf-8")
    found = set(re.findall(r"""<a\s[^>]*?\b(?:id|name)=["']([^"']+)""", text))
    for heading in re.findall(r"^#{1,6}[ \t]+(.+?)[ \t]*#*$", _CODE.sub("", text), re.M):
        found.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))  # GitHub
        found.add(heading.replace(" ", "-"))  # Jupyter, Colab
    return found


def test_links_reads_every_kind_of_link_but_not_code():
    text = ('[a](x.md) ![i](img.png "t") [b](https://e.org/p#q)\n[ref]: ../r.md\n<a href="h.md">h</a>\n'
            "`[c](code.md)`\n```text\n[d](fenced.md)\n```\n<!-- [e](comment.md) -->")
    assert sorted(links(text)) == sorted(["x.md", "img.png", "https://e.org/p#q", "../r.md", "h.md"])


def test_anchors_reads_ids_and_headings(tmp_path):
    page = tmp_path / "p.md"
    page.write_text('# Thuật ngữ chính\n- <a id="g-flops"></a>**FLOPS**\n```text\n# not a heading\n```\n',
                    encoding="utf-8")
    assert {"g-flops", "thuật-ngữ-chính"} <= anchors(page) and "not-a-heading" not in anchors(page)


def test_absolute_links_makes_relative_targets_the_file_at_the_pinned_ref():
    config = build_course.CourseConfig(repo="o/r", branch="main", ref="v1.0.0")
    text = ("[g](../docs/glossary.md#g-x) · [n](03_x.ipynb) · [v](../docs/version_notes.md#bai-14-4) · "
            "[r](../README.md) · [w](https://e.org/a.md) · [s](#muc-1) · `[c](code.md)` · <a href=\"../LICENSE\">l</a>"
            "\n[def]: 04_y.ipynb#z\n")
    base = "https://github.com/o/r/blob/v1.0.0/"
    assert build_course.absolute_links(text, config) == (
        f"[g]({base}docs/glossary.md#g-x) · [n]({base}notebooks/03_x.ipynb) · "
        f"[v]({base}docs/version_notes.md#bai-14-4) · [r]({base}README.md) · [w](https://e.org/a.md) · "
        f"[s](#muc-1) · `[c](code.md)` · <a href=\"{base}LICENSE\">l</a>\n[def]: {base}notebooks/04_y.ipynb#z\n")
    assert build_course.absolute_links("[x](b%C3%A0i 1.md)", config) == "[x](b%C3%A0i 1.md)"  # not a link target
    assert build_course.absolute_links("[x](bài.md)", config) == f"[x]({base}notebooks/b%C3%A0i.md)"
    with pytest.raises(ValueError, match="outside the repository"):
        build_course.absolute_links("[x](../../etc/passwd)", config)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(ROOT / "notebooks").as_posix())
def test_every_notebook_link_is_absolute_and_lands(path):
    """Each link is http(s) or an anchor of this notebook; one into the repository names a file and anchor it has."""
    problems, own = [], None
    for target in (t for cell in markdown_cells(path) for t in links(cell)):
        if target.startswith("#"):
            own = own if own is not None else anchors(path)
            if target[1:] not in own:
                problems.append(f"{target}: no such anchor in this notebook")
            continue
        parts = urlsplit(target)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            problems.append(f"{target}: not absolute (it leads nowhere in Colab/Kaggle)")
            continue
        if parts.netloc != "github.com" or not parts.path.startswith(f"/{CONFIG.repo}/"):
            continue  # another site; the Colab/Kaggle badges (tests/test_course_build.py checks those)
        if not target.startswith(REPO_PREFIX):
            problems.append(f"{target}: into the repository but not at the pinned ref {CONFIG.ref}")
            continue
        file = ROOT / unquote(parts.path[len(REPO_PREFIX) - len("https://github.com"):])
        if not file.exists():
            problems.append(f"{target}: {file.relative_to(ROOT)} is not in the repository")
        elif parts.fragment and file.suffix in (".md", ".ipynb") and unquote(parts.fragment) not in anchors(file):
            problems.append(f"{target}: {file.relative_to(ROOT)} has no anchor #{parts.fragment}")
    assert not problems, f"{path.relative_to(ROOT)}:\n" + "\n".join(problems)


def test_every_lesson_links_somewhere_in_the_repository():
    """The test above reads links at all: the glossary and lesson links are there, and absolute."""
    found = [t for p in NOTEBOOKS for cell in markdown_cells(p) for t in links(cell)]
    assert sum(t.startswith(REPO_PREFIX + "docs/glossary.md#g-") for t in found) > 100
    assert any(t.startswith(REPO_PREFIX + "notebooks/") and t.endswith(".ipynb") for t in found)

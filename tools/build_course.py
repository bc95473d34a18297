"""Build the course notebooks, their badge and setup cells, and colab_badges.md from one source.

Sources live in ``course_src/*.md``: Markdown text, with code cells as fenced ```python blocks,
``+++`` on its own line to split Markdown cells, and an empty fenced ```setup block where the
setup cell goes. Exercise sources may hold ``### BEGIN SOLUTION`` / ``### BEGIN LEARNER`` /
``### END`` regions: the learner notebook keeps the LEARNER part, the solutions notebook the
SOLUTION part. The course repository and ref come from ``[tool.course]`` in pyproject.toml; the ref
must be the release tag ``v<lessons_lib.__version__>`` or a 40-hex commit (never a moving branch).

Output expectations go on the lines directly above a ```python fence: ``<!-- expect KINDS: REGEX -->``,
``<!-- expect-not KINDS: REGEX -->`` and ``<!-- allow-stderr: REGEX -->`` (KINDS: a comma list of
``OUTPUT_KINDS``). They leave the Markdown and become the code cell's ``metadata["course"]``, which
tools/output_checks.py checks against the executed notebook. Directives inside a SOLUTION or LEARNER region
(in the prose above the fence) hold for that notebook only.

Usage (tests/test_course_build.py fails while a generated file differs from its source):
    python -m tools.build_course          # write notebooks/ and colab_badges.md
    python -m tools.build_course --measure  # first run every learner notebook into course_src/measured.json
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import posixpath
import re
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from urllib.parse import quote, unquote

from tools import glossary, output_checks

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "course_src"
NOTEBOOKS = ROOT / "notebooks"
BADGES_MD = ROOT / "colab_badges.md"
TEMPLATE = SRC / "_template.md"  # the lesson a new one starts from (docs/DEVELOPING.md, "Add a lesson")
SOLUTIONS = ROOT / "lessons_lib" / "exercises" / "solutions.json"  # generated: each task's solution() and starter
CORE_PATH = ROOT / "docs" / "core_path.md"  # generated: the core path, lesson by lesson
GUIDE = ROOT / "docs" / "teaching_guide.md"  # its lesson-times region is generated
README = ROOT / "README.md"  # its notebook table's study-time column is generated
VERSION_NOTES = ROOT / "docs" / "version_notes.md"  # the reference page lessons link to (version history, tool internals)


try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_REGION = re.compile(r"^[ \t]*### (BEGIN SOLUTION|BEGIN LEARNER|END)[ \t]*(?:\n|\Z)", re.M)  # \Z: a cell's last line


@dataclass(frozen=True)
class CourseConfig:
    """Where learners install the course from."""

    repo: str
    branch: str
    ref: str


_VERSION = re.compile(r"""^__version__\s*=\s*["']([^"']+)["']""", re.M)
_COMMIT = re.compile(r"[0-9a-f]{40}")


def package_version(init: Path = ROOT / "lessons_lib" / "__init__.py") -> str:
    """Return lessons_lib.__version__, read from the source without importing the package."""
    found = _VERSION.search(init.read_text(encoding="utf-8"))
    if found is None:
        raise ValueError(f"{init} must define __version__ = \"X.Y.Z\" (the one version of the course)")
    return found.group(1)


def check_ref(ref: str, version: str) -> str:
    """Return `ref` if the setup cell may install from it: tag "v<version>" or a 40-hex commit; else raise."""
    if ref == f"v{version}" or _COMMIT.fullmatch(ref):
        return ref
    raise ValueError(f"[tool.course] ref = {ref!r}: the setup cell must install a pinned ref, the release tag "
                     f"'v{version}' (lessons_lib.__version__ is {version!r}) or a full 40-hex commit, "
                     "never a branch that moves under learners")


def load_config(pyproject: Path = ROOT / "pyproject.toml") -> CourseConfig:
    """Read [tool.course] from pyproject.toml and check that its ref is pinned."""
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["course"]
    ref = check_ref(data["ref"], package_version(pyproject.parent / "lessons_lib" / "__init__.py"))
    return CourseConfig(repo=data["repo"], branch=data["branch"], ref=ref)


# --------------------------------------------------------------------------- generated cells

# What the setup cell passes to its interpreter before the source; noxfile.py installs each matrix row's wheel
# with the same arguments, so the row proves the learners' install.
SETUP_PIP = ("-m", "pip", "install", "-q", "--retries", "1", "--timeout", "10")
SETUP_TEMPLATE = '''\
# Ô cài đặt: giống hệt nhau ở mọi bài, sinh bởi tools/build_course.py (đừng sửa tay).
import glob, importlib.metadata, importlib.util, json, os, re, subprocess, sys
if importlib.util.find_spec("lessons_lib") is None:  # cài từ GitHub, không được thì từ file .whl đã gắn
    repo = "git+{url}"  # bản {ref}; không cài được (thẻ chưa đẩy?) thì nhánh mặc định
    found = glob.glob(os.environ.get("LESSONS_WHEEL_DIR", "/kaggle/input") + "/**/lessons_lib-*.whl", recursive=True)
    version = lambda path: [int(n) for n in re.findall(r"\\d+", os.path.basename(path).split("-")[1])]
    for source in [repo + "@{ref}", repo, *sorted(found, key=version, reverse=True)]:
        print("⏳ Đang cài lessons_lib từ", source)
        pip = [sys.executable, {pip}, source]
        if subprocess.run(pip, capture_output=True, text=True).returncode == 0:
            break
    else:
        print("❌ Không cài được lessons_lib (máy không có Internet?). Hai cách khắc phục:\\n"
              "  1) Kaggle: Settings → Internet → On (cần xác minh số điện thoại), rồi chạy lại ô này.\\n"
              "  2) Gắn file lessons_lib-*.whl làm dataset (Add Input), rồi chạy lại ô này.")
        raise SystemExit("Dừng lại: thiếu lessons_lib.")
    importlib.invalidate_caches()
    if source == repo:
        got = json.loads(importlib.metadata.distribution("lessons_lib").read_text("direct_url.json"))
        print("⚠️ Không cài được bản {ref}, nên đã cài nhánh mặc định của kho, commit", got["vcs_info"]["commit_id"][:12])
%reload_ext lessons_lib.notebook'''


def setup_cell_source(config: CourseConfig, url: str | None = None) -> str:
    """Return the setup cell's code for this course configuration.

    Args:
        config: The course's repository and pinned ref.
        url: The git repository to install from (default: the course's on GitHub); tests pass a local
            ``file://`` one.
    """
    return SETUP_TEMPLATE.format(url=url or f"https://github.com/{config.repo}", ref=config.ref,
                                 pip=", ".join(f'"{arg}"' for arg in SETUP_PIP))


def colab_url(config: CourseConfig, path: str) -> str:
    """Return the Colab URL that opens the notebook at `path` (relative to the repo root)."""
    return f"https://colab.research.google.com/github/{config.repo}/blob/{quote(config.branch, safe='')}/{quote(path)}"


def kaggle_url(config: CourseConfig, path: str) -> str:
    """Return the Kaggle URL that imports the notebook at `path` from GitHub."""
    github = f"https://github.com/{config.repo}/blob/{config.branch}/{path}"
    return "https://kaggle.com/kernels/welcome?src=" + quote(github, safe="")


def badges(config: CourseConfig, path: str) -> tuple[str, str]:
    """Return the Markdown of the Colab and the Kaggle badge that open one notebook."""
    return (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab_url(config, path)})",
            f"[![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)]({kaggle_url(config, path)})")


# --------------------------------------------------------------------------- parsing sources


@dataclass(frozen=True)
class Cell:
    kind: str  # "markdown" | "code" | "setup"
    source: str
    meta: dict | None = None  # a code cell's output expectations: metadata["course"]


#: The kinds of machine an expectation names (tools/output_checks.py machine_kind()), plus "any".
OUTPUT_KINDS = (*output_checks.KINDS, "any")
_DIRECTIVE = re.compile(r"^[ \t]*<!--[ \t]*(expect-not|expect|allow-stderr)\b(.*?)-->[ \t]*$", re.M)
_DIRECTIVE_START = re.compile(r"^[ \t]*<!--[ \t]*(?:expect|allow-stderr)\b.*$", re.M)


def parse_directive(line: str) -> tuple[str, list[str] | None, str]:
    """Return (name, kinds or None for allow-stderr, regex) of one directive line; raise ValueError if malformed."""
    found = _DIRECTIVE.fullmatch(line.strip())
    if found is None:
        raise ValueError(f"not a directive (<!-- expect KINDS: REGEX -->, <!-- expect-not KINDS: REGEX -->, "
                         f"<!-- allow-stderr: REGEX -->): {line.strip()!r}")
    name, rest = found.group(1), found.group(2)
    head, colon, pattern = rest.partition(":")
    pattern = pattern.strip()
    if not colon or not pattern:
        raise ValueError(f"{line.strip()!r}: write '<!-- {name}{' KINDS' if name != 'allow-stderr' else ''}: REGEX -->'"
                         " with a non-empty REGEX")
    kinds = None
    if name == "allow-stderr":
        if head.strip():
            raise ValueError(f"{line.strip()!r}: allow-stderr takes no kinds, only ': REGEX'")
    else:
        kinds = [kind.strip() for kind in head.split(",")]
        unknown = [kind for kind in kinds if kind not in OUTPUT_KINDS]
        if unknown or not head.strip():
            raise ValueError(f"{line.strip()!r}: unknown machine kind {unknown or [head.strip()]}; "
                             f"KINDS is a comma list of {', '.join(OUTPUT_KINDS)}")
    try:
        re.compile(pattern, re.M)
    except re.error as exc:
        raise ValueError(f"{line.strip()!r}: bad regular expression {pattern!r}: {exc}") from None
    return name, kinds, pattern


def _split_directives(chunk: str) -> tuple[str, dict | None]:
    """Return `chunk` without its trailing directive lines (those directly above the next fence) and their metadata."""
    lines = chunk.split("\n")
    if lines and lines[-1] == "":  # the chunk ends with the newline before the fence
        lines.pop()
    meta: dict = {}
    while lines and _DIRECTIVE_START.match(lines[-1]):
        name, kinds, pattern = parse_directive(lines.pop())
        key = name.replace("-", "_")
        meta.setdefault(key, []).insert(0, pattern if kinds is None else [kinds, pattern])
    return ("\n".join(lines) + "\n" if meta else chunk), (meta or None)


def _no_directive(chunk: str, where: str) -> None:
    found = _DIRECTIVE_START.search(chunk)
    if found:
        raise ValueError(f"output directive {found.group(0).strip()!r} is {where}: it must be on the line(s) "
                         "directly above a ```python fence")


def parse_source(text: str) -> list[Cell]:
    """Split a course source into cells; output directives above a ```python fence become its `meta`."""
    cells: list[Cell] = []

    def add_markdown(chunk: str) -> None:
        for part in re.split(r"^\+\+\+[ \t]*$", chunk, flags=re.M):
            if part.strip():
                cells.append(Cell("markdown", part.strip("\n")))

    pos = 0
    for fence in _FENCE.finditer(text):
        lang, body = fence.group(1), fence.group(2).rstrip("\n")
        chunk, meta = _split_directives(text[pos:fence.start()])
        if meta and lang != "python":
            raise ValueError(f"output directives {meta} stand above a ```{lang} fence: only a ```python code cell "
                             "has outputs to check")
        _no_directive(chunk, "not directly above a code fence")
        add_markdown(chunk)
        if lang == "setup":
            cells.append(Cell("setup", ""))
        elif lang == "python":
            cells.append(Cell("code", body, meta))
        else:
            add_markdown(fence.group(0))  # a quoted block of another language stays in the Markdown
        pos = fence.end()
    _no_directive(text[pos:], "after the last code fence")
    add_markdown(text[pos:])
    return cells


def select_variant(source: str, variant: str) -> str:
    """Keep the SOLUTION or LEARNER regions of `source` ("solution" or "learner")."""
    if variant not in ("solution", "learner"):
        raise ValueError(f"variant must be 'solution' or 'learner', got {variant!r}")
    out, keep = [], True
    pos = 0
    for marker in _REGION.finditer(source):
        if keep:
            out.append(source[pos:marker.start()])
        tag = marker.group(1)
        keep = tag == "END" or (tag == "BEGIN SOLUTION") == (variant == "solution")
        pos = marker.end()
    if keep:
        out.append(source[pos:])
    return "".join(out).rstrip("\n")


def has_variants(text: str) -> bool:
    """Return True when a source holds SOLUTION/LEARNER regions."""
    return _REGION.search(text) is not None


# --------------------------------------------------------------------------- time estimates

#: The yardstick (docs/DEVELOPING.md, "Notebook skeleton"): what a learner does, counted once per thing.
#: Reading: prose and the text a cell prints, at 100 Vietnamese syllables a minute (technical text, with thinking).
#: A code cell: 0.2 min to run it and find its output, 0.1 min per line of code read, its measured run time, and
#: 1 min per figure. A quiz: 1 min. A checked task: 4 min plus 1 min per line of its solution that the starter does not
#: already hold (a debugging task: the lines to fix). Each notebook: 3 min
#: to open it, choose the runtime and run the setup cell. Run times and outputs come from MEASURED (one "Run all"
#: of each learner notebook, `python -m tools.build_course --measure`); a cell not measured yet counts 1 s and no output.
READ_PER_MIN, CELL_MIN, CODE_LINE_MIN, FIGURE_MIN, QUIZ_MIN, TASK_MIN, TASK_LINE_MIN, SETUP_MIN = (
    100, 0.2, 0.1, 1.0, 1.0, 4.0, 1.0, 3.0)
MEASURED = SRC / "measured.json"  # {lesson: {cell key: [seconds, output syllables, figures]}}
_UNMEASURED = (1.0, 0, 0)
_STATED_TIME = re.compile(r"⏱️ ~\d+(?:[–-]\d+)? phút")


def prose_syllables(text: str) -> int:
    """Return the syllables of a course source's learner prose: words outside code and link targets."""
    body = select_variant(text, "learner")
    prose = " ".join(c.source for c in parse_source(body) if c.kind == "markdown")
    prose = re.sub(r"\]\([^)]*\)", "]", prose)  # a link's target is not read
    return len(re.findall(r"\w+", prose))


def cell_key(source: str) -> str:
    """Return the key of a code cell's measurement: a digest of its source."""
    return hashlib.sha1(source.encode()).hexdigest()[:12]


def load_measured(path: Path = MEASURED) -> dict:
    """Return the measured cells ({lesson: {key: [s, syllables, figures]}}), empty without the file."""
    return json.loads(path.read_text(encoding="utf-8"))["cells"] if path.exists() else {}


def _solution_lines(text: str, task: str) -> int:
    """Return the lines of code a learner writes for `task`: its solution's lines that the starter does not hold.

    Blank lines and comments are left out; a fill-in task counts its whole solution, a debugging task (the starter
    is the buggy code) the lines to fix.
    """
    def lines(variant: str) -> list[str]:
        code = task_solutions(text, variant).get(task, "")
        return [line.strip() for line in code.splitlines() if line.strip() and not line.strip().startswith("#")]

    given = set(lines("learner"))
    return sum(1 for line in lines("solution") if line not in given)


def estimate_minutes(text: str, measured: dict | None = None, full_text: str | None = None) -> float:
    """Return the yardstick's minutes for a course source's learner version.

    Args:
        text: The lesson source (or the part of it to count, e.g. its core).
        measured: {cell key: [seconds, output syllables, figures]} of this lesson (load_measured()[stem]).
        full_text: The whole source when `text` is a part of it: tasks are sized from its solutions.
    """
    measured = measured or {}
    body = select_variant(text, "learner")
    cells = parse_source(body)
    code = [c.source for c in cells if c.kind == "code"]
    minutes = prose_syllables(body) / READ_PER_MIN + (SETUP_MIN if any(c.kind == "setup" for c in cells) else 0)
    for source in code:
        seconds, out_syllables, figures = measured.get(cell_key(source), _UNMEASURED)
        minutes += (CELL_MIN + CODE_LINE_MIN * len(source.splitlines()) + seconds / 60
                    + out_syllables / READ_PER_MIN + FIGURE_MIN * figures)
    minutes += QUIZ_MIN * sum(len(re.findall(r"\b(?:yes_no|choice)\(", c)) for c in code)
    tasks = {name for c in code for name in re.findall(r"\b((?:task|ex)\w*)\.check\(", c) if not name.endswith("_gpu")}
    minutes += sum(TASK_MIN + TASK_LINE_MIN * _solution_lines(full_text or text, task) for task in tasks)
    return minutes


#: The core path: a section heading (## or ###) that starts with ⭐ is core, with 🔭 an extension ("Mở rộng");
#: a ### inherits its ## unless marked itself. Unmarked ## sections (Mục tiêu, Cài đặt, Tóm tắt...) frame every
#: path. The whole course's core must fit a weekend by the same yardstick as the ⏱️ line.
CORE, EXTENSION = "⭐", "🔭"
CORE_GOAL_MINUTES = 360  # a weekend's core (COURSE_DESIGN.md); the yardstick above is not fitted to it
_HEADING = re.compile(r"^(#{2,3}) (.*)$")
_STATED_CORE = re.compile(r"(⭐ cốt lõi ~)(\d+)( phút)")


def sections(text: str) -> list[tuple[str, bool, str]]:
    """Split a source at its ## / ### headings (outside fences): (heading line, is_extension, text) in order."""
    out: list[tuple[str, bool, str]] = []
    heading, level2_ext, ext, chunk, fenced = "", False, False, [], False
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        found = None if fenced else _HEADING.match(line.rstrip("\n"))
        if found:
            out.append((heading, ext, "".join(chunk)))
            heading, chunk = found.group(0), []
            mark = found.group(2)[:1]
            if found.group(1) == "##":
                level2_ext = ext = mark == EXTENSION
            else:
                ext = mark == EXTENSION or (level2_ext and mark != CORE)
        chunk.append(line)
    out.append((heading, ext, "".join(chunk)))
    return out


def core_source(text: str) -> str:
    """Return `text` without its extension sections: what a learner on the core path reads and runs.

    A lesson whose title (``# 🔭 Bài ...``) carries the extension mark is extension as a whole.
    """
    if text.startswith(f"# {EXTENSION}"):
        return ""
    return "".join(body for _, ext, body in sections(text) if not ext)


def core_minutes(text: str, measured: dict | None = None) -> float:
    """Return the yardstick's minutes for the core path of a course source."""
    learner = select_variant(text, "learner")
    core = core_source(learner)
    return estimate_minutes(core, measured, full_text=text) if core else 0.0


def lesson_minutes(text: str, cells: dict | None = None) -> tuple[int, int]:
    """Return a lesson's (whole, core) minutes by the yardstick, rounded to 5 (core 0: all extension).

    `cells` is the lesson's measurements (load_measured()[stem]).
    """
    whole, core = estimate_minutes(text, cells), core_minutes(text, cells)
    return 5 * round(whole / 5), (5 * max(1, round(core / 5)) if core else 0)


def with_times(text: str, cells: dict | None = None) -> str:
    """Return a lesson source whose ⏱️ line states the yardstick's whole and core minutes."""
    whole, core = lesson_minutes(text, cells)
    text = _STATED_TIME.sub(f"⏱️ ~{whole} phút", text, count=1)
    return _STATED_CORE.sub(rf"\g<1>{core}\g<3>", text, count=1) if core else text


def stated_core_minutes(text: str) -> int | None:
    """Return the minutes of a source's "⭐ cốt lõi ~N phút" mention on its ⏱️ line, or None."""
    found = _STATED_CORE.search(text)
    return int(found.group(2)) if found else None


# --------------------------------------------------------------------------- building notebooks


def _cell_id(name: str, index: int) -> str:
    return hashlib.sha1(f"{name}:{index}".encode()).hexdigest()[:12]


NOTEBOOK_METADATA = {
    "accelerator": "GPU",
    "colab": {"gpuType": "T4", "provenance": []},
    "kaggle": {"accelerator": "nvidiaTeslaT4", "isGpuEnabled": True, "isInternetEnabled": True,
               "language": "python", "sourceType": "notebook"},
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}


#: A cell that builds a quiz holds its answer and explanation: its code is hidden where each tool allows it
#: (JupyterLab's collapsed source, Colab's form view, the site's remove-input tag); the question shows as now.
_QUIZ_CELL = re.compile(r"^\w+ = (?:choice|yes_no)\(", re.M)
QUIZ_TITLE = "#@title Câu hỏi (mã ẩn để không lộ đáp án; trả lời bằng nút bấm hoặc .answer(...))"
QUIZ_METADATA = {"cellView": "form", "jupyter": {"source_hidden": True}, "tags": ["remove-input"]}


def build_notebook(cells: list[Cell], name: str, repo_path: str, config: CourseConfig) -> dict:
    """Return the nbformat-4 JSON of one notebook (badge cell first, outputs empty)."""
    out = []
    all_cells = [Cell("markdown", " ".join(badges(config, repo_path))), *cells]
    for i, cell in enumerate(all_cells):
        base = {"id": _cell_id(name, i), "metadata": {"course": cell.meta} if cell.meta else {}}
        if cell.kind == "markdown":
            out.append({"cell_type": "markdown", **base, "source": cell.source})
        elif cell.kind == "code" and _QUIZ_CELL.search(cell.source):
            base["metadata"].update(json.loads(json.dumps(QUIZ_METADATA)))
            source = QUIZ_TITLE + "\n" + cell.source
            out.append({"cell_type": "code", **base, "execution_count": None, "outputs": [], "source": source})
        else:
            source = setup_cell_source(config) if cell.kind == "setup" else cell.source
            out.append({"cell_type": "code", **base, "execution_count": None, "outputs": [], "source": source})
    return {"cells": out, "metadata": NOTEBOOK_METADATA, "nbformat": 4, "nbformat_minor": 5}


def _dump(nb: dict) -> str:
    nb = json.loads(json.dumps(nb))
    for cell in nb["cells"]:  # store sources as lists of lines, as Jupyter does
        cell["source"] = cell["source"].splitlines(keepends=True)
    return json.dumps(nb, ensure_ascii=False, indent=1) + "\n"


#: Where a lesson source's relative links start from: the folder of its learner notebook (``02_x.ipynb``,
#: ``../docs/glossary.md#g-flops``), as the author sees it in the repository.
LINK_BASE = "notebooks"
_MD_LINK = re.compile(r'(\]\()([^()\s]+)((?:[ \t]+"[^"\n]*")?\))')  # [text](target "title"), ![alt](target)
_MD_LINK_DEF = re.compile(r"^([ \t]{0,3}\[[^\]\n]+\]:[ \t]*)(\S+)()", re.M)  # [name]: target
_HTML_LINK = re.compile(r"(<(?:a|img)\b[^>]*?\b(?:href|src)=\")([^\"]+)(\")", re.I)
_NOT_PROSE = re.compile(r"^```.*?^```|`[^`\n]*`|<!--.*?-->", re.S | re.M)  # code and comments keep their text
_SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:")


def repo_file_url(config: CourseConfig, path: str) -> str:
    """Return the GitHub page of the repository file at `path` (``docs/glossary.md#g-x``) at the pinned ref."""
    path, hash_, anchor = path.partition("#")
    return f"https://github.com/{config.repo}/blob/{quote(config.ref, safe='')}/{quote(path)}{hash_}{anchor}"


def absolute_links(text: str, config: CourseConfig, base: str = LINK_BASE) -> str:
    """Return Markdown `text` with every relative link made the repository's file at the pinned ref.

    A notebook opened from a badge lives at a Colab or Kaggle address, where ``../docs/glossary.md`` or
    ``03_x.ipynb`` lead nowhere: each relative target (Markdown links and definitions, HTML href/src) is read
    from `base` (a folder of the repository) and becomes ``repo_file_url``. Absolute URLs (any scheme), in-page
    anchors (``#x``) and anything in code or comments stay. tools/build_site.py turns them back into the site's
    own pages. Raise ValueError for a link that leaves the repository.
    """
    skip: list[tuple[int, int]] = []

    def rewrite(found: re.Match) -> str:
        target = found.group(2)
        if _SCHEME.match(target) or target.startswith(("#", "//")) or any(a <= found.start() < b for a, b in skip):
            return found.group(0)
        path, hash_, anchor = target.partition("#")
        resolved = posixpath.normpath(posixpath.join(base, unquote(path)))
        if resolved == ".." or resolved.startswith("../"):
            raise ValueError(f"link {target!r} (from {base}/) points outside the repository")
        return found.group(1) + repo_file_url(config, resolved + hash_ + anchor) + found.group(3)

    for pattern in (_MD_LINK, _MD_LINK_DEF, _HTML_LINK):
        skip[:] = [m.span() for m in _NOT_PROSE.finditer(text)]
        text = pattern.sub(rewrite, text)
    return text


#: The line under a lesson's "## Tiếp theo" heading that the build fills from the lesson order: the next lesson's
#: title, linked, or on the last lesson that it is the last (course_src/_template.md shows it).
NEXT_MARKER = "<!-- next-lesson -->"
LAST_LESSON = "Đây là bài cuối của Bài 14."


def with_next_lesson(text: str, following: Path | None) -> str:
    """Return a lesson source with its next-lesson marker replaced by `following`'s linked title (None: the last)."""
    section = next((body for heading, _, body in sections(text) if heading == "## Tiếp theo"), "")
    if text.count(NEXT_MARKER) != 1 or NEXT_MARKER not in section:
        raise ValueError(f"a lesson's '## Tiếp theo' section holds the line {NEXT_MARKER} once; the build writes the "
                         "next lesson there")
    if following is None:
        return text.replace(NEXT_MARKER, LAST_LESSON)
    title = following.read_text(encoding="utf-8").splitlines()[0].removeprefix("# ").strip()
    return text.replace(NEXT_MARKER, f"[{title}]({following.stem}.ipynb)")


def lesson_sources() -> list[Path]:
    """Return the lesson sources in course order (course_src/NN_*.md; _template.md is not a lesson)."""
    return sorted(SRC.glob("[0-9][0-9]_*.md"))


def planned_outputs(config: CourseConfig | None = None) -> dict[Path, str]:
    """Return every generated file (notebooks and colab_badges.md) with its expected text."""
    config = config or load_config()
    files: dict[Path, str] = {}
    terms, measured = glossary.load(), load_measured()
    sources = lesson_sources()
    for src, following in itertools.zip_longest(sources, sources[1:]):
        text = src.read_text(encoding="utf-8")
        files[src] = text = with_times(text, measured.get(src.stem))  # the ⏱️ line states the yardstick
        text = with_next_lesson(text, following)
        name = src.stem
        variants = [("learner", NOTEBOOKS / f"{name}.ipynb")]
        if has_variants(text):
            variants.append(("solution", NOTEBOOKS / "solutions" / f"{name}_solutions.ipynb"))
        for variant, target in variants:
            body = select_variant(text, variant)
            body = glossary.link_first_uses(body, terms, "../docs/glossary.md")
            body = absolute_links(body, config)  # opened in Colab/Kaggle, a relative link leads nowhere
            repo_path = target.relative_to(ROOT).as_posix()
            files[target] = _dump(build_notebook(parse_source(body), target.stem, repo_path, config))
    if TEMPLATE.is_file():  # a new lesson starts from it: its ⏱️ line and next-lesson marker hold, it is no notebook
        files[TEMPLATE] = template = with_times(TEMPLATE.read_text(encoding="utf-8"))
        with_next_lesson(template, None)
    files[SOLUTIONS] = solutions_json()
    files[BADGES_MD] = badges_markdown(config, sorted(p for p in files if p.suffix == ".ipynb"))
    lessons = {src: text for src, text in files.items() if src.parent == SRC and src != TEMPLATE}
    files[CORE_PATH] = core_path_markdown(lessons)
    files[glossary.PAGE] = glossary.page(terms)
    if GUIDE.is_file():
        files[GUIDE] = guide_with_times(GUIDE.read_text(encoding="utf-8"), lessons)
    if README.is_file():
        files[README] = readme_with_study_times(README.read_text(encoding="utf-8"), lessons)
    return files


_TIMES_REGION = re.compile(r"(<!-- lesson-times:start[^\n]*-->\n).*?(<!-- lesson-times:end -->)", re.S)
_TASK_CALL = re.compile(r"\b((?:task|ex)\w*)\.check\((\w+)")


_CHECK_CALL = re.compile(r"^\s*(\w+)\.check\(", re.M)
_SOLUTION_NOISE = re.compile(r"^(?:%%gpu|from lessons_lib\.exercises\S* import .*|\s*\w+\.check\(.*\))[ \t]*$")


def task_solutions(text: str, variant: str = "solution") -> dict[str, str]:
    """Return each task's solution (or, with variant="learner", its starter) in one lesson source.

    That is the chosen variant of the cells that hold the task's regions.

    A region belongs to the task whose ``X.check(`` is in its cell, or in the next code cell when that one holds
    no region itself; other regions (worked examples the learner completes) belong to no task. The setup of the
    cell (``%%gpu``, the task's import) and the ``check`` call itself are left out.
    """
    # A variant's own directives stand between region markers in the prose: read whole, the source drops them.
    cells = [c.source for c in parse_source(_DIRECTIVE_START.sub("", text)) if c.kind == "code"] + [""]
    found: dict[str, list[str]] = {}
    for cell, after in itertools.pairwise(cells):
        call = _CHECK_CALL.search(cell) or (None if has_variants(after) else _CHECK_CALL.search(after))
        if not has_variants(cell) or call is None:
            continue
        key = call.group(1)
        lines = select_variant(cell, variant).splitlines()
        found.setdefault(key, []).append("\n".join(ln for ln in lines if not _SOLUTION_NOISE.match(ln)).strip("\n"))
    return {key: "\n\n".join(parts) for key, parts in found.items()}


def solutions_json() -> str:
    """Return solutions.json from every lesson source: {"solution" | "learner": {group: {task: code}}} from the
    regions, and {"core": {group: [task, ...]}}, the tasks of its ⭐ sections (progress() marks them)."""
    table: dict[str, dict] = {"solution": {}, "learner": {}, "core": {}}
    for src in lesson_sources():
        group = f"lesson{src.name[:2]}"
        text = src.read_text(encoding="utf-8")
        if has_variants(text):
            for variant in ("solution", "learner"):
                table[variant][group] = task_solutions(text, variant)
            core = sorted({name for name, _ in _TASK_CALL.findall(core_source(select_variant(text, "learner")))
                           if not name.endswith("_gpu")})
            if core:
                table["core"][group] = core
    return json.dumps(table, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def _lesson_rows(lessons: dict[Path, str] | None) -> list[tuple[Path, str, str, int, int]]:
    """Return each lesson's (source, learner text, title, whole minutes, core minutes), in course order."""
    measured = load_measured()
    lessons = lessons or {src: src.read_text(encoding="utf-8") for src in lesson_sources()}
    return [(src, select_variant(text, "learner"), text.splitlines()[0].removeprefix("# ").strip(),
             *lesson_minutes(text, measured.get(src.stem))) for src, text in lessons.items()]


def lesson_times_table(lessons: dict[Path, str] | None = None) -> str:
    """Return the Markdown table of every lesson: title, yardstick minutes, GPU need and checked tasks."""
    rows = ["| bài | thời gian (thước đo) | ⭐ cốt lõi | GPU | nhiệm vụ có chấm (⭐: thuộc phần cốt lõi) |",
            "| --- | --- | --- | --- | --- |"]
    for _, learner, title, whole, core in _lesson_rows(lessons):
        time_line = next((line for line in learner.splitlines() if line.startswith("⏱️")), "")
        gpu = re.search(r"GPU: \**([^*(·]+?)\**\s*(?:\(|$)", time_line)
        core_tasks = {answer for _, answer in _TASK_CALL.findall(core_source(learner))}
        tasks = []
        for name, answer in _TASK_CALL.findall(learner):
            label = f"⭐ `{answer}`" if answer in core_tasks else f"`{answer}`"
            if not name.endswith("_gpu") and label not in tasks:
                tasks.append(label)
        rows.append(f"| {title} | ~{whole} phút | {f'~{core} phút' if core else '— (mở rộng)'} | "
                    f"{gpu.group(1).strip() if gpu else '?'} | {', '.join(tasks) or '—'} |")
    return "\n".join(rows) + "\n"


def _totals_text(rows: list[tuple]) -> str:
    """Return the course's core and whole study time, as README and the core-path page state it."""
    core, whole = sum(row[4] for row in rows), sum(row[3] for row in rows)
    return f"~{core // 60} giờ {core % 60} phút, cả khoá ~{round(whole / 60)} giờ"


def readme_with_study_times(readme: str, lessons: dict[Path, str] | None = None) -> str:
    """Return README with each notebook row's study-time cell ("~N phút (⭐ ~M)") from the yardstick."""
    rows = _lesson_rows(lessons)
    readme = re.sub(r"\*\*Lộ trình cốt lõi \([^)\n]*\):\*\*", f"**Lộ trình cốt lõi ({_totals_text(rows)}):**", readme, count=1)
    for src, _, _, whole, core in rows:
        cell = f"~{whole} phút" + (f" (⭐ ~{core})" if core else " (🔭 cả bài mở rộng)")
        row = re.compile(rf"^(\| [^\n]*\(notebooks/{re.escape(src.stem)}\.ipynb\)[^\n]*\| )~\d+ phút \([^)]*\)( \|)", re.M)
        readme = row.sub(lambda m, cell=cell: m.group(1) + cell + m.group(2), readme, count=1)
    return readme


def core_path_markdown(lessons: dict[Path, str] | None = None) -> str:
    """Return docs/core_path.md: every lesson's core sections and tasks, in order, with core and full minutes."""
    rows = _lesson_rows(lessons)
    lines = ["# Lộ trình cốt lõi", "",
             "Sinh bởi `python -m tools.build_course` từ các mục ⭐ của course_src/; đừng sửa tay.", "",
             f"**Lộ trình cốt lõi** ({_totals_text(rows)}; một cuối tuần): trong mỗi bài, học các mục ⭐ theo thứ "
             "tự và làm các nhiệm vụ ⭐; bỏ qua các mục 🔭 *mở rộng* (không ô cốt lõi nào cần đến chúng) và quay lại "
             "đọc khi cần. Số phút theo thước đo của `tools/build_course.py` (`estimate_minutes`).", ""]
    for src, learner, title, full, core in rows:
        link = f"[{title}](../notebooks/{src.stem}.ipynb)"
        if not core:
            lines += [f"## {link}", "", f"🔭 Cả bài là phần mở rộng (~{full} phút).", ""]
            continue
        lines += [f"## {link}", "", f"⭐ ~{core} phút (cả bài ~{full} phút)", ""]
        for heading, ext, body in sections(learner):
            if ext or not heading.lstrip("#").strip().startswith(CORE) and not heading.startswith("### "):
                continue
            indent = "  " if heading.startswith("### ") else ""
            tasks = sorted({answer for _, answer in _TASK_CALL.findall(body)})
            name = re.sub(r"^(\d+)\. ", r"\1\\. ", heading.lstrip("#").strip().removeprefix(CORE).strip())
            lines.append(f"{indent}- {name}"
                         + (f" · nhiệm vụ: {', '.join(f'`{t}`' for t in tasks)}" if tasks else ""))
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


_PLANS_REGION = re.compile(r"(<!-- class-plans:start[^\n]*-->\n).*?(<!-- class-plans:end -->)", re.S)
#: A 3-hour class slot: 15 min to open the notebooks and run the setup cells, a 10-min break, 10 min to sum up.
SLOT_MIN, SLOT_TEACHING_MIN = 180, 145


def class_plans(lessons: dict[Path, str] | None = None) -> str:
    """Return the class plans of the teaching guide: the core path cut into 3-hour slots by the yardstick's minutes."""
    slots: list[list[tuple[str, int, list[str]]]] = [[]]
    for _, learner, title, _, core in _lesson_rows(lessons):
        if not core:
            continue
        if slots[-1] and sum(m for _, m, _ in slots[-1]) + core > SLOT_TEACHING_MIN:
            slots.append([])
        slots[-1].append((title, core, sorted({answer for _, answer in _TASK_CALL.findall(core_source(learner))})))
    rows = [f"Lộ trình cốt lõi chia thành {len(slots)} buổi {SLOT_MIN // 60} giờ theo số phút ⭐ ở bảng trên (mỗi buổi: "
            f"15 phút mở notebook và chạy ô cài đặt, nghỉ 10 phút, tóm tắt 10 phút, còn {SLOT_TEACHING_MIN} phút học). "
            "Dạy một buổi duy nhất: dùng buổi 1, phần còn lại là bài về nhà; các bài 🔭 là phần đọc thêm.", "",
            "| buổi | bài (mục ⭐) | phút ⭐ | nhiệm vụ ⭐ làm trong lớp |", "| --- | --- | --- | --- |"]
    for number, slot in enumerate(slots, 1):
        for title, core, tasks in slot:
            rows.append(f"| {number} | {title} | ~{core} | {', '.join(f'`{t}`' for t in tasks) or '—'} |")
        rows.append(f"| {number} | **cộng** | **~{sum(m for _, m, _ in slot)}** | |")
    return "\n".join(rows) + "\n"


def guide_with_times(text: str, lessons: dict[Path, str] | None = None) -> str:
    """Return the teaching guide with its lesson-times and class-plans regions filled from the lesson sources."""
    if not _TIMES_REGION.search(text) or not _PLANS_REGION.search(text):
        raise ValueError(f"{GUIDE.relative_to(ROOT)} needs the <!-- lesson-times:start --> … <!-- lesson-times:end --> "
                         "and <!-- class-plans:start --> … <!-- class-plans:end --> regions")
    text = _TIMES_REGION.sub(lambda m: m.group(1) + lesson_times_table(lessons) + m.group(2), text, count=1)
    return _PLANS_REGION.sub(lambda m: m.group(1) + class_plans(lessons) + m.group(2), text, count=1)


def badges_markdown(config: CourseConfig, notebooks: list[Path]) -> str:
    """Return colab_badges.md: every notebook's Colab and Kaggle links."""
    lines = ["# Liên kết mở từng notebook (Colab / Kaggle)", "",
             f"Sinh bởi `python -m tools.build_course` từ `[tool.course]` trong pyproject.toml "
             f"(repo `{config.repo}`, nhánh `{config.branch}`). Đừng sửa tay.", "",
             "| notebook | Colab | Kaggle |", "| --- | --- | --- |"]
    for path in notebooks:
        rel = path.relative_to(ROOT).as_posix()
        lines.append(f"| `{rel}` | " + " | ".join(badges(config, rel)) + " |")
    return "\n".join(lines) + "\n"


def measure() -> dict:
    """Run each learner notebook once ("Run all") and return its code cells' [seconds, output syllables, figures]."""
    from tools.run import execute_notebook

    cells: dict[str, dict] = {}
    for src in lesson_sources():
        path = NOTEBOOKS / f"{src.stem}.ipynb"
        run = execute_notebook(path, "pass", timeout=600)
        if run.error:
            raise RuntimeError(f"{path.name} stops, nothing measured:\n{run.error}")
        sources_in_order = [c.source for c in parse_source(select_variant(src.read_text(encoding="utf-8"), "learner"))
                            if c.kind == "code"]
        code = [c for c in run.nb.cells[:-1] if c.cell_type == "code"][1:]  # the setup cell is counted once per notebook
        found = {}
        for source, cell in zip(sources_in_order, code, strict=True):
            timing = cell.metadata.get("execution", {})
            start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
            seconds = (_iso_seconds(end) - _iso_seconds(start)) if start and end else 0.0
            text = "".join(o.get("text", "") if o.get("output_type") == "stream" else o.get("data", {}).get("text/plain", "")
                           for o in cell.outputs if "image/png" not in o.get("data", {}))
            figures = sum("image/png" in o.get("data", {}) for o in cell.outputs)
            found[cell_key(source)] = [round(seconds, 1), len(re.findall(r"\w+", text)), figures]
        cells[src.stem] = found
    return {"about": f"python -m tools.build_course --measure, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} lõi, "
                     f"tải trung bình {os.getloadavg()[0]:.1f} lúc bắt đầu", "cells": cells}


def _iso_seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", action="store_true",
                        help=f"run every learner notebook once and write its cells' run times and outputs to "
                             f"{MEASURED.relative_to(ROOT)} (the yardstick reads them), then build")
    args = parser.parse_args(argv)
    if args.measure:
        MEASURED.write_text(json.dumps(measure(), ensure_ascii=False, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    stale = []
    for path, text in planned_outputs().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(path.relative_to(ROOT).as_posix())
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    print("written: " + (", ".join(stale) or "nothing, all up to date"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

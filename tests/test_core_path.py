"""The core path (⭐ sections; 🔭 marks extensions): fits a weekend, stands alone, and every lesson shows it."""

from __future__ import annotations

import ast
import builtins
import re
from pathlib import Path

import pytest

from tools import build_course

ROOT = Path(__file__).resolve().parent.parent


SOURCES = build_course.lesson_sources()
WITH_TEMPLATE = [*SOURCES, build_course.TEMPLATE]  # a new lesson starts from the template: it passes as one


def _code(source: str) -> str:
    """Return a cell's Python without IPython magics (``%%gpu``, ``%reload_ext``) and shell lines."""
    if source.startswith("%%writefile"):
        return ""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def _defined_and_used(source: str) -> tuple[set[str], set[str]]:
    """Return the names a cell binds at top level and the names it reads before binding them."""
    tree = ast.parse(_code(source))
    defined: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            defined.add(node.name)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return defined, used


def _lesson_cells(src: Path) -> list[tuple[bool, str]]:
    """Return (is_extension, code) for every code cell of a lesson's learner version, in order."""
    text = src.read_text(encoding="utf-8")
    text = build_course.select_variant(text, "learner") if build_course.has_variants(text) else text
    whole_ext = not build_course.core_source(text)
    return [(whole_ext or ext, cell.source) for _, ext, body in build_course.sections(text)
            for cell in build_course.parse_source(body) if cell.kind == "code"]


def test_the_core_path_fits_a_weekend():
    measured = build_course.load_measured()
    minutes = {src.stem: build_course.lesson_minutes(src.read_text(encoding="utf-8"), measured.get(src.stem))[1]
               for src in SOURCES}
    assert sum(minutes.values()) <= build_course.CORE_GOAL_MINUTES, minutes


def _extension_names_in_core(cells: list[tuple[bool, str]]) -> list[tuple[list[str], str]]:
    """Return (names, code) for each core cell that uses a name only an earlier extension cell defines."""
    core_names = set(dir(builtins)) | {"device", "torch"}  # the setup cell gives torch and device
    ext_only: set[str] = set()
    found = []
    for ext, code in cells:
        defined, used = _defined_and_used(code)
        if ext:
            ext_only |= defined - core_names
            continue
        missing = sorted((used - core_names - defined) & ext_only)
        if missing:
            found.append((missing, code))
        core_names |= defined
    return found


@pytest.mark.parametrize("src", WITH_TEMPLATE, ids=lambda p: p.stem)
def test_no_core_cell_needs_a_name_only_an_extension_defines(src):
    found = _extension_names_in_core(_lesson_cells(src))
    assert not found, f"core cells use names defined only in an extension (🔭) section: {found}"


def test_the_name_check_finds_a_core_cell_that_leans_on_an_extension():
    cells = [(False, "a = 1"), (True, "%%gpu\nb = a + 1\ndef helper(x):\n    return x"), (False, "print(a, b, helper(1))")]
    assert _extension_names_in_core(cells) == [(["b", "helper"], "print(a, b, helper(1))")]
    assert _extension_names_in_core([(True, "import numpy as np"), (False, "import numpy as np\nnp.ones(2)")]) == []


@pytest.mark.parametrize("src", WITH_TEMPLATE, ids=lambda p: p.stem)
def test_every_numbered_section_is_marked_and_the_time_line_gives_the_core(src):
    text = src.read_text(encoding="utf-8")
    for heading, _, _ in build_course.sections(text):
        if re.match(r"## (\d+\.|Bài \d|Nhiệm vụ \d)", heading) and not text.startswith(f"# {build_course.EXTENSION}"):
            pytest.fail(f"{src.name}: '{heading}' needs ⭐ (cốt lõi) or 🔭 (mở rộng) in front")
    core = build_course.lesson_minutes(text, build_course.load_measured().get(src.stem))[1]
    stated = build_course.stated_core_minutes(text)
    if core == 0:
        assert stated is None and "🔭" in text.splitlines()[0], f"{src.name}: a lesson with no core says so in its title"
        return
    assert stated == core, f"{src.name}: the ⏱️ line needs '⭐ cốt lõi ~{core} phút' (python -m tools.build_course)"


def _run_solutions_core(src: Path, tmp_path: Path):
    """Execute the core cells of a lesson's solutions alone, top to bottom."""
    import nbformat

    from tools import run

    text = src.read_text(encoding="utf-8")
    body = build_course.select_variant(text, "solution") if build_course.has_variants(text) else text
    cells = build_course.parse_source(build_course.core_source(body))
    nb = build_course.build_notebook(cells, src.stem, f"notebooks/{src.stem}.ipynb", build_course.load_config())
    path = tmp_path / f"{src.stem}_core.ipynb"
    nbformat.write(nbformat.from_dict(nb), path)
    return run.execute_notebook(path, timeout=300)


CORE_LESSONS = [s for s in WITH_TEMPLATE if build_course.core_source(s.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("src", CORE_LESSONS, ids=lambda p: p.stem)
@pytest.mark.slow
def test_core_cells_run_alone_and_every_core_task_is_solved_there(src, tmp_path):
    """The solutions' core cells, alone and in order (the learner's differ only inside task regions, and
    test_no_core_cell_needs_a_name_only_an_extension_defines covers what they read): every ⭐ check passes."""
    run = _run_solutions_core(src, tmp_path)
    assert run.error is None, f"the core path of {src.stem}'s solutions stops:\n{run.error}"
    checked = [c for c in run.nb.cells if c.cell_type == "code" and re.search(r"^\s*\w+\.check\(", c.source, re.M)
               and not c.source.startswith("%%gpu")]
    assert checked, f"{src.stem} has no ⭐ checked task"
    for cell in checked:
        shown = "".join(o.get("text", "") for o in cell.outputs)
        assert re.search(r"^✅ .* đạt", shown, re.M) and "❌" not in shown and "⏳" not in shown, (
            f"{src.stem}: a ⭐ task's solution does not pass with the core alone:\n{cell.source}\n→ {shown}")


def test_the_core_path_page_lists_every_lesson_and_core_task_in_order():
    page = build_course.core_path_markdown()
    positions = [page.index(f"(../notebooks/{src.stem}.ipynb)") for src in SOURCES]
    assert positions == sorted(positions)
    for src in SOURCES:
        text = src.read_text(encoding="utf-8")
        core = build_course.core_source(build_course.select_variant(text, "learner"))
        for _, answer in build_course._TASK_CALL.findall(core):
            assert f"`{answer}`" in page, f"{src.stem}'s core task {answer} is missing from the core path page"

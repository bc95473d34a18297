"""Notebook lint: generated files match their sources, and every notebook follows the skeleton."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import nbformat
import pytest

from tools import build_course

ROOT = Path(__file__).resolve().parent.parent

NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").rglob("*.ipynb") if ".ipynb_checkpoints" not in str(p))
SKELETON = ("## Mục tiêu", "## Cài đặt", "## Tóm tắt", "## Tiếp theo")
MAX_CODE_LINES = 16
# A `%%writefile` cell shows a whole script file (e.g. 08's train_ddp.py run by torchrun): the notebook writes it,
# it does not run it, so it may be longer and may hold CUDA-only calls behind its own checks.
MAX_WRITEFILE_LINES = 36
# Calls that fail without a CUDA GPU: allowed only in %%gpu cells.
CUDA_ONLY = re.compile(
    r"\.cuda\(|device\s*=\s*[\"']cuda|\.to\(\s*[\"']cuda|torch\.cuda\.(get_device_name|get_device_properties|"
    r"get_device_capability|set_device|current_device|synchronize|memory_allocated|memory_reserved|"
    r"max_memory_allocated|reset_peak_memory_stats|memory_summary|empty_cache|set_per_process_memory_fraction)\("
)


def code_without_strings(source: str) -> str:
    """Return `source` without comments and string literals (prose may say "cuda"), keeping "cuda"/"cuda:N"."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return source
    drop = {tokenize.STRING, tokenize.COMMENT} | {getattr(tokenize, n) for n in ("FSTRING_MIDDLE",) if hasattr(tokenize, n)}
    device_literal = re.compile(r"""^[rbuRBU]?(["'])cuda(:\d+)?\1$""")
    return " ".join(tok.string for tok in tokens
                    if tok.type not in drop or device_literal.match(tok.string))


def test_code_without_strings_keeps_calls_and_drops_prose():
    code = 'x.cuda()  # call\nprint("use torch.cuda.synchronize() here")'
    assert ".cuda (" in code_without_strings(code) or ".cuda(" in code_without_strings(code).replace(" ", "")
    assert "synchronize" not in code_without_strings(code)
    assert CUDA_ONLY.search(code_without_strings('torch.zeros(3, device="cuda")').replace(" ", ""))


def skeleton_problems(markdown: str) -> list[str]:
    """Return what a lesson's Markdown lacks of the skeleton (docs/DEVELOPING.md, "Notebook skeleton")."""
    problems = [] if re.search(r"^# (?:🔭 )?Bài 14\.\d+ · ", markdown, re.M) else ["title '# Bài 14.N · ...' missing"]
    problems += [f"section {heading!r} missing" for heading in SKELETON if not re.search(rf"^{heading}\b", markdown, re.M)]
    return problems + ([] if "GPU:" in markdown else ["the title block must say 'GPU: tuỳ chọn/cần'"])


def test_generated_files_are_up_to_date_and_every_notebook_has_a_source():
    """One build: every generated file (notebooks, their badge and setup cells, tables) is what the sources make."""
    planned = build_course.planned_outputs()
    stale = [p.relative_to(ROOT).as_posix() for p, text in planned.items()
             if not p.exists() or p.read_text(encoding="utf-8") != text]
    assert not stale, f"run `python -m tools.build_course`; out of date: {stale}"
    assert NOTEBOOKS and set(NOTEBOOKS) <= set(planned), "a notebook exists that tools/build_course.py does not generate"
    assert not skeleton_problems(build_course.TEMPLATE.read_text(encoding="utf-8"))
    assert skeleton_problems("# Bài 14.1 · T\n\n## Mục tiêu\n") == [
        "section '## Cài đặt' missing", "section '## Tóm tắt' missing", "section '## Tiếp theo' missing",
        "the title block must say 'GPU: tuỳ chọn/cần'"]
    assert build_course.TEMPLATE in planned and not any(p.stem.startswith("_template") for p in NOTEBOOKS)
    assert build_course.TEMPLATE not in build_course.lesson_sources()
    template_title = build_course.TEMPLATE.read_text(encoding="utf-8").splitlines()[0].removeprefix("# ")
    for page in (build_course.CORE_PATH, build_course.GUIDE):  # its minutes count toward no total
        assert template_title not in planned[page], page.name


def test_the_next_lesson_line_is_the_next_lessons_title_or_says_it_is_the_last(tmp_path):
    following = tmp_path / "03_next.md"
    following.write_text("# 🔭 Bài 14.3 · Tiếp\n\nthân bài\n", encoding="utf-8")
    text = f"# Bài 14.2 · T\n\n## Tiếp theo\n\n{build_course.NEXT_MARKER}: mô tả.\n\nĐọc thêm: x\n"
    filled = build_course.with_next_lesson(text, following)
    assert filled.endswith("## Tiếp theo\n\n[🔭 Bài 14.3 · Tiếp](03_next.ipynb): mô tả.\n\nĐọc thêm: x\n")
    assert build_course.LAST_LESSON in build_course.with_next_lesson(text, None)
    for bad in ("# Bài 14.2 · T\n\n## Tiếp theo\n\nhand-typed\n",
                f"# Bài 14.2 · T\n\n{build_course.NEXT_MARKER}\n\n## Tiếp theo\n"):
        with pytest.raises(ValueError, match="next-lesson"):
            build_course.with_next_lesson(bad, following)


def test_parse_source_splits_cells():
    text = "# T\n\nintro\n+++\nmore\n```python\nx = 1\n```\n```setup\n```\n```text\nkept\n```\nend\n"
    cells = build_course.parse_source(text)
    assert [c.kind for c in cells] == ["markdown", "markdown", "code", "setup", "markdown", "markdown"]
    assert cells[2].source == "x = 1"
    assert "kept" in cells[4].source


def test_select_variant_keeps_the_right_region():
    text = "a\n### BEGIN SOLUTION\nsol\n### BEGIN LEARNER\nlearn\n### END\nz\n"
    assert build_course.select_variant(text, "solution") == "a\nsol\nz"
    assert build_course.select_variant(text, "learner") == "a\nlearn\nz"
    cell = "a\n### BEGIN SOLUTION\nsol\n### BEGIN LEARNER\nlearn\n### END"  # a cell ends on its END marker
    assert build_course.select_variant(cell, "learner") == "a\nlearn"
    with pytest.raises(ValueError, match="variant"):
        build_course.select_variant(text, "teacher")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_lint(path):
    """Valid, one setup cell, the skeleton, CUDA-only calls in %%gpu cells, short code cells, quiz answers hidden.

    Outputs, badge and setup cell are the generator's: test_generated_files_are_up_to_date_and_every_notebook_has_a_source.
    """
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert [c.source for c in nb.cells if "Ô cài đặt" in c.source] == [
        build_course.setup_cell_source(build_course.load_config())]
    assert not skeleton_problems("\n".join(c.source for c in nb.cells if c.cell_type == "markdown"))
    cells = [c for c in nb.cells if c.cell_type == "code" and "Ô cài đặt" not in c.source]
    for cell in cells:
        code = code_without_strings(cell.source).replace(" ", "")
        assert cell.source.startswith(("%%gpu", "%%writefile")) or not CUDA_ONLY.search(code), (
            f"CUDA-only call outside a %%gpu cell:\n{cell.source}")
    lengths = [len(c.source.removeprefix(build_course.QUIZ_TITLE + "\n").splitlines())  # the title is generated
               for c in cells if not c.source.startswith("%%writefile")]
    assert max(lengths) <= MAX_CODE_LINES, f"a code cell has {max(lengths)} lines (max {MAX_CODE_LINES})"
    files = [len(c.source.splitlines()) for c in cells if c.source.startswith("%%writefile")]
    assert max(files, default=0) <= MAX_WRITEFILE_LINES, f"a %%writefile cell has {max(files)} lines"
    assert sorted(lengths)[len(lengths) // 2] <= 6, "median code cell must be ≤ 6 lines"
    for cell in [c for c in cells if re.search(r"\b(?:choice|yes_no)\(", c.source)]:  # a quiz cell holds its answer
        assert cell.source.startswith("#@title "), "Colab shows a form (the code folded) only under #@title"
        assert cell.metadata["cellView"] == "form" and cell.metadata["jupyter"]["source_hidden"] is True
        assert "remove-input" in cell.metadata["tags"]


def test_time_yardstick_counts_reading_cells_outputs_quizzes_tasks_and_setup():
    text = ("# T\n\n⏱️ ~12 phút\n\n" + "từ " * 200 + "[link](http://a.b/c)\n\n```setup\n```\n\n```python\nx = 1\n```\n\n"
            "```python\nq1 = choice('?', ['a', 'b'], 0, 'a')\n```\n\n"
            "```python\ndef f():\n    ### BEGIN SOLUTION\n    # a comment is not a line to write\n    return 1\n\n"
            "    ### BEGIN LEARNER\n    return ...\n    ### END\ntask1.check(f)\nex4_gpu.check(f)\n```\n")
    # 204 syllables: "T", "12 phút", 200 × "từ" and the link text (not its target); setup 3; three cells of 1, 1 and
    # 4 learner lines (0.2 + 0.1/line + 1 s unmeasured each); one quiz; task1: 4 + 1 line to write ("return 1": the
    # starter already holds "def f():", and comments, markers and check calls are not written); the _gpu variant of
    # a task is not counted twice
    cells = 3 * 0.2 + 0.1 * (1 + 1 + 4) + 3 / 60
    assert build_course.estimate_minutes(text) == pytest.approx(204 / 100 + 3 + cells + 1 + 4 + 1)
    debugging = ("```python\n### BEGIN SOLUTION\na = 1\nb = a + 1\nc = b * 2\n### BEGIN LEARNER\na = 1\nb = a - 1\n"
                 "c = b * 2\n### END\ntask2.check(c)\n```\n")
    # a debugging task counts the one line to fix; its 4 learner lines are read in the cell
    assert build_course.estimate_minutes(debugging) == pytest.approx(0.2 + 0.1 * 4 + 1 / 60 + 4 + 1)
    code = "x = 1"
    measured = {build_course.cell_key(code): [30.0, 150, 2]}  # 30 s to run, 150 syllables printed, 2 figures
    one_cell = "```python\nx = 1\n```\n"
    assert build_course.estimate_minutes(one_cell, measured) == pytest.approx(0.2 + 0.1 + 0.5 + 1.5 + 2)


def test_the_time_line_states_the_yardstick():
    text = "# T\n\n⏱️ ~999 phút · ⭐ cốt lõi ~1 phút · GPU: tuỳ chọn\n\n## ⭐ 1. A\n\n" + "từ " * 1000 + "\n"
    whole, core = build_course.lesson_minutes(text)
    assert (whole, core) == (10, 10)  # 1 000 syllables at 100 a minute, and the core is all of it
    assert build_course.with_times(text).splitlines()[2] == "⏱️ ~10 phút · ⭐ cốt lõi ~10 phút · GPU: tuỳ chọn"


def test_every_code_cell_has_a_measurement():
    measured = build_course.load_measured()
    for src in sorted((ROOT / "course_src").glob("[0-9][0-9]_*.md")):
        learner = build_course.select_variant(src.read_text(encoding="utf-8"), "learner")
        cells = [c.source for c in build_course.parse_source(learner) if c.kind == "code"]
        missing = [c.splitlines()[0] for c in cells if build_course.cell_key(c) not in measured.get(src.stem, {})]
        assert not missing, (f"{src.stem}: {len(missing)} code cell(s) changed since the last measurement (first lines: "
                             f"{missing[:3]}): run python -m tools.build_course --measure on a quiet machine")


_LINK = re.compile(r"\]\((https://[^)\s]+)\)")


def _decode_badge_target(url: str, config) -> str:
    """Return the repo path a Colab or Kaggle badge URL opens, after checking its repo and branch."""
    parts = urlsplit(url)
    if parts.netloc == "colab.research.google.com":
        prefix = f"/github/{config.repo}/blob/"
        assert parts.path.startswith(prefix), url
        branch, _, path = parts.path[len(prefix):].partition("/")
        assert unquote(branch) == config.branch, url
        return unquote(path)
    assert parts.netloc == "kaggle.com" and parts.path == "/kernels/welcome", url
    (src,) = parse_qs(parts.query)["src"]  # parse_qs decodes the percent-encoding
    prefix = f"https://github.com/{config.repo}/blob/{config.branch}/"
    assert src.startswith(prefix), src
    assert urlsplit(src).query == "" and "#" not in src, "the src must be a plain GitHub blob URL"
    return src[len(prefix):]


def test_colab_badges_md_links_every_notebook_on_colab_and_kaggle():
    config = build_course.load_config()
    text = (ROOT / "colab_badges.md").read_text(encoding="utf-8")
    targets = {"colab.research.google.com": [], "kaggle.com": []}
    for url in _LINK.findall(text):
        host = urlsplit(url).netloc
        if host in targets and not url.endswith(".svg"):
            targets[host].append(_decode_badge_target(url, config))
    expected = sorted(p.relative_to(ROOT).as_posix() for p in NOTEBOOKS)
    for host, found in targets.items():
        assert sorted(found) == expected, f"{host} links vs notebooks on disk"
        assert all((ROOT / t).is_file() for t in found)


def test_badge_urls_encode_unusual_branch_and_path_characters():
    config = build_course.CourseConfig(repo="org/repo", branch="release/2026 v1", ref="v1")
    path = "notebooks/solutions/08 bài tập.ipynb"
    for url in (build_course.colab_url(config, path), build_course.kaggle_url(config, path)):
        assert " " not in url and all(ord(ch) < 128 for ch in url), url
    assert _decode_badge_target(build_course.kaggle_url(config, path), config) == path
    assert _decode_badge_target(build_course.colab_url(config, path), config) == path


def test_teaching_guide_times_are_the_lessons_own(tmp_path):
    text = ("# Bài 14.1 · Demo\n\n⏱️ ~42–50 phút · GPU: **tuỳ chọn** (…)\n\n```python\ntask1.check(f)\n"
            "task1_gpu.check(g)\n```\n")
    table = build_course.lesson_times_table({tmp_path / "01_demo.md": text})
    whole, core = build_course.lesson_minutes(text)  # the yardstick, not the line's stale "~42–50"
    assert f"| Bài 14.1 · Demo | ~{whole} phút | ~{core} phút | tuỳ chọn | ⭐ `f` |" in table
    extension = text.replace("# Bài", "# 🔭 Bài")
    assert "| — (mở rộng) |" in build_course.lesson_times_table({tmp_path / "01_demo.md": extension})
    guide = ("intro\n<!-- lesson-times:start x -->\nold\n<!-- lesson-times:end -->\n"
             "<!-- class-plans:start -->\nold plan\n<!-- class-plans:end -->\nrest\n")
    filled = build_course.guide_with_times(guide)
    assert "old" not in filled and filled.startswith("intro\n") and filled.endswith("-->\nrest\n")
    assert build_course.lesson_times_table() in filled and build_course.class_plans() in filled
    with pytest.raises(ValueError, match="lesson-times"):
        build_course.guide_with_times("a guide without the region")


# --------------------------------------------------------------------------- output directives


DIRECTIVE_SOURCE = """# T

Chạy ô này.
<!-- expect cpu-build, cuda-no-gpu: ^→ device: cpu$ -->
<!-- expect-not any: cuda -->
<!-- allow-stderr: No CUDA runtime is found -->
```python
print("→ device: cpu")
```

```python
x = 1
```
"""


def test_directives_become_code_cell_metadata_and_leave_the_markdown():
    cells = build_course.parse_source(DIRECTIVE_SOURCE)
    assert [c.kind for c in cells] == ["markdown", "code", "code"]
    assert "<!--" not in cells[0].source and cells[0].source.endswith("Chạy ô này.")
    assert cells[1].meta == {"expect": [[["cpu-build", "cuda-no-gpu"], "^→ device: cpu$"]],
                             "expect_not": [[["any"], "cuda"]], "allow_stderr": ["No CUDA runtime is found"]}
    assert cells[2].meta is None


def test_directives_reach_learner_and_solutions_notebooks():
    """The builder's part; planned_outputs builds both variants so (its real notebooks: the up-to-date test)."""
    text = DIRECTIVE_SOURCE.replace('print("→ device: cpu")', 'print("→ device: cpu")\n### BEGIN SOLUTION\ny = 2\n'
                                    '### BEGIN LEARNER\ny = ...\n### END')
    for variant in ("learner", "solution"):
        cells = build_course.parse_source(build_course.select_variant(text, variant))
        nb = build_course.build_notebook(cells, "x", "notebooks/x.ipynb", build_course.load_config())
        (checked,) = [c for c in nb["cells"] if c["metadata"]]
        assert checked["cell_type"] == "code" and checked["metadata"]["course"]["allow_stderr"] == [
            "No CUDA runtime is found"]
        assert not any("<!--" in c["source"] for c in nb["cells"])


@pytest.mark.parametrize("source, message", [
    ("<!-- expect gpu: x -->\n```python\nx\n```\n", "unknown machine kind"),
    ("<!-- expect : x -->\n```python\nx\n```\n", "unknown machine kind"),
    ("<!-- expect cpu-build: ([a -->\n```python\nx\n```\n", "bad regular expression"),
    ("<!-- expect cpu-build x -->\n```python\nx\n```\n", "non-empty REGEX"),
    ("<!-- expect cpu-build: -->\n```python\nx\n```\n", "non-empty REGEX"),
    ("<!-- allow-stderr cuda: W -->\n```python\nx\n```\n", "takes no kinds"),
    ("<!-- expect cpu-build: x\n```python\nx\n```\n", "not a directive"),
    ("<!-- expect cpu-build: x -->\n\n```python\nx\n```\n", "directly above"),
    ("<!-- expect cpu-build: x -->\ntext\n", "after the last code fence"),
    ("<!-- expect cpu-build: x -->\n```text\nquoted\n```\n", "```text fence"),
    ("<!-- expect cpu-build: x -->\n```setup\n```\n", "```setup fence"),
])
def test_malformed_directives_fail_the_build(source, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build_course.parse_source(source)


def test_a_directive_quoted_inside_a_fence_stays_text():
    cells = build_course.parse_source("```text\n<!-- expect cpu-build: x -->\n```\n")
    assert [c.kind for c in cells] == ["markdown"] and "<!-- expect" in cells[0].source


def test_a_cell_that_builds_a_quiz_is_marked_and_others_are_not():
    config = build_course.load_config()
    cells = [build_course.Cell("code", 'q1 = yes_no("?", answer=True, explanation="vì")\nq1'),
             build_course.Cell("code", "print(choice)")]
    quiz, plain = build_course.build_notebook(cells, "x", "notebooks/x.ipynb", config)["cells"][1:]
    assert quiz["metadata"]["cellView"] == "form" and quiz["source"].startswith(build_course.QUIZ_TITLE)
    assert plain["metadata"] == {} and plain["source"] == "print(choice)"


def test_class_plans_cut_the_core_path_into_3_hour_slots(tmp_path):
    def lesson(n, words, task):
        text = (f"# Bài 14.{n} · L{n}\n\n⏱️ ~1 phút\n\n## ⭐ 1. A\n\n" + "từ " * words
                + f"\n\n```python\ndef f():\n    ### BEGIN SOLUTION\n    return 1\n    ### BEGIN LEARNER\n"
                f"    return ...\n    ### END\n{task}.check(f)\n```\n")
        return tmp_path / f"0{n}_l.md", text
    lessons = dict([lesson(1, 9000, "task1"), lesson(2, 9000, "task2"), lesson(3, 2000, "task3")])
    minutes = [build_course.lesson_minutes(text)[1] for text in lessons.values()]
    assert minutes[0] + minutes[1] > build_course.SLOT_TEACHING_MIN >= minutes[1] + minutes[2]
    plan = build_course.class_plans(lessons)
    assert f"| 1 | **cộng** | **~{minutes[0]}** |" in plan
    assert f"| 2 | **cộng** | **~{minutes[1] + minutes[2]}** |" in plan and "| 2 | Bài 14.3 · L3 |" in plan

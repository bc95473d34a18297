"""Tests of tools/build_site.py and tools/lessons_site.py (no browser: tests/e2e/test_site.py has that).

The GPU-run merge is tested with fake GPU runs: folders laid out as tools/gpu_validate.sh saves them
(environment.txt + executed/<notebook path>), whose %%gpu cells hold made-up outputs.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest

from lessons_lib.gpu_cells import SKIP_MARK, missing_hardware
from tools import build_site, lessons_site

ROOT = Path(__file__).resolve().parent.parent

# The site's Sphinx extension needs Sphinx: requirements.txt installs it; Colab's package set (the version matrix) does not.
pytest.importorskip("sphinx", reason="Sphinx builds the website; it is in requirements.txt, not in Colab's packages")


ENVIRONMENT = """date: 2026-11-30 09:15 UTC
name, driver_version, memory.total [MiB], compute_cap
Tesla T4, 550.54.15, 15360 MiB, 7.5
torch 2.11.0+cu126 | CUDA 12.6 | GPUs 1
"""
BADGE = ("[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.x) "
         "[![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)](https://kaggle.x)")
RUN = {"cpu": "AMD EPYC", "cores": 2, "gpus": [], "torch": "2.13.0+cpu", "python": "3.11.7", "date": "2026-12-01"}


def stream(text: str):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


def code(source: str, *outputs, count: int | None = 1):
    cell = nbformat.v4.new_code_cell(source, outputs=list(outputs))
    cell.execution_count = count
    return cell


def skipped(needed: int = 1, available: int = 0):
    return stream(missing_hardware(needed, available) + "\n")


def executed_notebook() -> nbformat.NotebookNode:
    """A small executed lesson: badge, title, one plain cell, three %%gpu cells (skipped on CPU), a quiz."""
    quiz = nbformat.v4.new_output("display_data", data={
        "text/plain": "❓ Q?", "application/vnd.jupyter.widget-view+json": {"model_id": "m", "version_major": 2,
                                                                             "version_minor": 0}},
        metadata={"lessons_lib": {"static_html": "<div class='lessons-quiz-static'>Q?<details>A</details></div>"}})
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(BADGE),
        nbformat.v4.new_markdown_cell("# Bài 14.9 · Thử\n\nPhụ đề.\n\n## Mục tiêu\n- đọc"),
        code("print('cpu')", stream("cpu\n")),
        code("%%gpu\nprint(torch.cuda.get_device_name(0))", skipped()),
        code("%%gpu 2\nprint('two')", skipped(2)),
        code("%%gpu\nprint('changed later')", skipped()),
        code("q1", quiz),
    ])
    nb.metadata["lessons_run"] = dict(RUN, key="k")
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    return nb


def gpu_notebook() -> nbformat.NotebookNode:
    """The same lesson as a one-GPU run executed it (the third %%gpu cell had other code then)."""
    image = nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(BADGE),
        code("print('cpu')", stream("cpu\n")),
        code("%%gpu\nprint(torch.cuda.get_device_name(0))", stream("Tesla T4\n"), image),
        code("%%gpu 2\nprint('two')", skipped(2, 1)),
        code("%%gpu\nprint('old code')", stream("old\n")),
    ])


def prepare(**kwargs) -> build_site.Prepared:
    return build_site.prepare_notebook(executed_notebook(), "https://colab.example/nb", "https://kaggle.example/nb",
                                       **kwargs)


def gpu_outputs(prepared) -> list[list]:
    return [c.outputs for c in prepared.nb.cells if c.cell_type == "code" and c.source.startswith("%%gpu")]


def html_of(output) -> str:
    return output["data"]["text/html"]


# ----------------------------------------------------------------------------------------------- environment.txt


def test_parse_environment_reads_gpu_and_date_and_counts_identical_gpus():
    assert build_site.parse_environment(ENVIRONMENT) == ("Tesla T4", "2026-11-30")
    two = ENVIRONMENT.replace("Tesla T4, 550", "Tesla T4, 550\nTesla T4, 550", 1)
    assert build_site.parse_environment(two) == ("2× Tesla T4", "2026-11-30")


def make_gpu_run(folder: Path, environment: str = ENVIRONMENT, notebooks: dict | None = None) -> Path:
    (folder / "executed").mkdir(parents=True)
    (folder / "environment.txt").write_text(environment, encoding="utf-8")
    for repo_path, nb in (notebooks or {}).items():
        (folder / "executed" / repo_path).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / "executed" / repo_path)
    return folder


def test_load_gpu_run_and_its_errors(tmp_path, capsys):
    run = build_site.load_gpu_run(make_gpu_run(tmp_path / "gpu-validation-20261130"))
    assert (run.gpu, run.date, run.label) == ("Tesla T4", "2026-11-30", "Tesla T4, 2026-11-30")
    assert run.notebook("notebooks/x.ipynb") == tmp_path / "gpu-validation-20261130" / "executed" / "notebooks/x.ipynb"
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="environment.txt and executed/"):
        build_site.load_gpu_run(tmp_path / "empty")
    with pytest.raises(ValueError, match="no GPU"):
        build_site.load_gpu_run(make_gpu_run(tmp_path / "cpu-only", "date: 2026-11-30\nnvidia-smi: not found\n"))
    assert build_site.main(["--gpu-run", str(tmp_path / "empty")]) == 1  # the command says why
    assert "needs environment.txt and executed/" in capsys.readouterr().err


def test_find_gpu_run_takes_the_newest_valid_one(tmp_path):
    assert build_site.find_gpu_run(tmp_path) is None
    make_gpu_run(tmp_path / "gpu-validation-20261001", ENVIRONMENT.replace("2026-11-30", "2026-10-01"))
    make_gpu_run(tmp_path / "gpu-validation-20261130")
    make_gpu_run(tmp_path / "gpu-validation-20261231", "date: 2026-12-31\nnvidia-smi: not found\n")  # no GPU
    (tmp_path / "gpu-validation-broken").mkdir()
    assert build_site.find_gpu_run(tmp_path).folder.name == "gpu-validation-20261130"


# ----------------------------------------------------------------------------------------------- one page


def test_a_page_has_local_buttons_under_its_title_static_quizzes_and_a_visible_note_for_each_skipped_gpu_cell():
    prepared = prepare()
    cells = prepared.nb.cells
    assert "colab.research.google.com" not in "".join(c.source for c in cells)  # no image from another host
    assert cells[0].source == "# Bài 14.9 · Thử"
    launch = cells[1]
    assert launch.id == build_site.LAUNCH_CELL_ID
    assert 'href="https://colab.example/nb"' in launch.source and 'href="https://kaggle.example/nb"' in launch.source
    assert "Mở trong Colab" in launch.source and "Mở trong Kaggle" in launch.source and "<img" not in launch.source
    assert "Chạy trên AMD EPYC, 2 lõi, torch 2.13.0+cpu, Python 3.11.7, 2026-12-01." in launch.source
    assert cells[2].source.startswith("Phụ đề.") and "## Mục tiêu" in cells[2].source
    assert "widgets" not in prepared.nb.metadata
    (quiz,) = [c for c in cells if c.cell_type == "code" and c.source == "q1"][0].outputs
    assert set(quiz["data"]) == {"text/html", "text/plain"} and "<details>" in quiz["data"]["text/html"]
    assert (prepared.gpu_measured, prepared.gpu_skipped) == (0, 3)  # no GPU run
    for outputs in gpu_outputs(prepared):
        (note,) = outputs
        assert "lessons-gpu-skipped" in html_of(note) and SKIP_MARK in html_of(note)
        assert "Chưa có lần chạy GPU" in html_of(note) and note["data"]["text/plain"].startswith(SKIP_MARK)
    assert "ít nhất 2 GPU CUDA" in html_of(gpu_outputs(prepared)[1][0])


def test_solution_title_suffix_and_deterministic_output():
    executed = executed_notebook()
    first = build_site.prepare_notebook(executed, "c", "k", title_suffix=" (lời giải)").nb
    assert first.cells[0].source == "# Bài 14.9 · Thử (lời giải)"
    again = build_site.prepare_notebook(executed, "c", "k", title_suffix=" (lời giải)").nb
    assert nbformat.writes(first) == nbformat.writes(again)  # unchanged input, byte-identical page source
    nbformat.validate(first)


def test_a_gpu_run_fills_the_cells_it_ran_with_a_label_and_explains_the_others_and_failures():
    run = build_site.GpuRun(Path("gpu-validation-20261130"), "Tesla T4", "2026-11-30")
    prepared = prepare(gpu_nb=gpu_notebook(), gpu_run=run)
    assert (prepared.gpu_measured, prepared.gpu_skipped) == (1, 2)
    measured, two_gpus, changed = gpu_outputs(prepared)
    label, text, image = measured
    assert "lessons-gpu-measured" in html_of(label) and "Đo trên Tesla T4, 2026-11-30" in html_of(label)
    assert text["text"] == "Tesla T4\n" and image["data"]["image/png"] == "iVBORw0KGgo="
    assert "cũng không đủ GPU" in html_of(two_gpus[0])  # %%gpu 2 on a one-GPU run: still skipped, and why
    assert "không có ô này với đúng mã hiện tại" in html_of(changed[0])  # the code changed since that run
    assert len(prepared.notes) == 2
    gpu_nb = gpu_notebook()  # a cell that failed or never ran on the GPU run is not shown as measured
    gpu_nb.cells[2].outputs = [nbformat.v4.new_output("error", ename="RuntimeError", evalue="x", traceback=[])]
    prepared = prepare(gpu_nb=gpu_nb, gpu_run=run)
    assert prepared.gpu_measured == 0 and "không chạy xong" in html_of(gpu_outputs(prepared)[0][0])
    gpu_nb.cells[2].outputs, gpu_nb.cells[2].execution_count = [], None
    assert prepare(gpu_nb=gpu_nb, gpu_run=run).gpu_measured == 0


def test_a_gpu_cell_that_ran_in_this_build_is_left_alone():
    nb = executed_notebook()
    nb.cells[3].outputs = [stream("Tesla T4\n")]  # a build on a GPU machine: the cell really ran here
    prepared = build_site.prepare_notebook(nb, "c", "k")
    assert prepared.gpu_skipped == 2 and gpu_outputs(prepared)[0] == [stream("Tesla T4\n")]


def test_run_label_names_gpus_and_is_empty_without_a_run():
    assert build_site.run_label({}) == ""
    label = build_site.run_label(dict(RUN, gpus=["Tesla T4", "Tesla T4"]))
    assert label.startswith("Chạy trên AMD EPYC, 2 lõi + 2× Tesla T4, torch 2.13.0+cpu")
    assert "song song" not in build_site.run_label(dict(RUN, conditions="alone"))
    busy = build_site.run_label(dict(RUN, conditions="with 2 test processes"))
    assert busy.endswith("(trong lúc bộ test chạy song song: thời gian CPU chậm hơn thật).")


def test_launch_html_escapes_links():
    page = build_site.launch_html('https://x/?a=1&b="2"', "https://k", "label <1>")
    assert 'href="https://x/?a=1&amp;b=&quot;2&quot;"' in page and "label &lt;1&gt;" in page


# ----------------------------------------------------------------------------------------------- the staged site


@pytest.mark.slow
def test_stage_merges_a_fake_gpu_run_keeps_time_stamps_of_unchanged_files_and_removes_stale_ones(tmp_path):
    """A real executed lesson (from the cache) + a fake GPU run whose %%gpu cells print a marker, staged twice."""
    lesson = next(p for p in build_site.course_notebooks() if "01_" in p.name)
    repo_path = lesson.relative_to(ROOT).as_posix()
    fake = nbformat.read(lesson, as_version=4)
    gpu_cells = 0
    for cell in fake.cells:
        if cell.cell_type == "code" and cell.source.startswith("%%gpu"):
            cell.outputs, cell.execution_count = [stream(f"FAKE GPU OUTPUT {gpu_cells}\n")], 1
            gpu_cells += 1
    run = build_site.load_gpu_run(make_gpu_run(tmp_path / "gpu-validation-20261130", notebooks={repo_path: fake}))
    stage_dir = tmp_path / "src"
    (stage_dir / "notebooks").mkdir(parents=True)
    (stage_dir / "notebooks" / "99_removed.ipynb").write_text("{}")
    build = build_site.stage(run, stage_dir=stage_dir, notebooks=[lesson])
    assert gpu_cells > 0 and build.gpu_measured == gpu_cells and build.gpu_skipped == 0
    assert not (stage_dir / "notebooks" / "99_removed.ipynb").exists()
    text = (stage_dir / repo_path).read_text(encoding="utf-8")
    assert all(f"FAKE GPU OUTPUT {i}" in text for i in range(gpu_cells))
    assert text.count("lessons-gpu-measured") == gpu_cells and "Đo trên Tesla T4, 2026-11-30" in text
    index = (stage_dir / "index.md").read_text(encoding="utf-8")
    assert f"{gpu_cells} ô hiện kết quả đo trên Tesla T4 (2026-11-30)" in index and repo_path[:-6] in index
    os.utime(stage_dir / repo_path, (1_000_000, 1_000_000))
    build = build_site.stage(run, stage_dir=stage_dir, notebooks=[lesson])
    assert (stage_dir / repo_path).stat().st_mtime == 1_000_000 and build.cached == 1 and build.executed == 0
    assert set(build.pages) >= {"index", "atlas", "core_path", "teaching_guide", "docs/glossary", repo_path[:-6]}


def test_stage_refuses_to_build_when_a_notebook_fails(tmp_path, monkeypatch):
    from tools.run import Executed

    failed = Executed(Path("x.ipynb"), None, "ValueError: boom", False, 0.1)
    monkeypatch.setattr(build_site, "execute_all_cached", lambda paths: [failed] * len(paths))
    with pytest.raises(RuntimeError, match="boom"):
        build_site.stage(None, stage_dir=tmp_path, notebooks=[ROOT / "notebooks" / "x.ipynb"])


def test_prune_pages_removes_pages_of_deleted_notebooks_only(tmp_path):
    for page in ("index", "search", "genindex", "notebooks/01_a", "notebooks/99_gone", "_static/x"):
        (tmp_path / f"{page}.html").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f"{page}.html").write_text("<html></html>")
    removed = build_site.prune_pages(tmp_path, ["index", "notebooks/01_a"])
    assert removed == [tmp_path / "notebooks" / "99_gone.html"]
    assert (tmp_path / "_static" / "x.html").exists() and (tmp_path / "search.html").exists()


def test_index_markdown_lists_lessons_then_solutions():
    text = build_site.index_markdown(["notebooks/01_a"], ["notebooks/solutions/01_a_solutions"], [RUN], None, 0, 4)
    lessons, _, solutions = text.partition(":caption: Lời giải")
    assert ":caption: Bài học" in lessons and "notebooks/01_a\n" in lessons
    assert "notebooks/solutions/01_a_solutions" in solutions
    assert "AMD EPYC, 2 lõi" in text and "4 ô đó ghi rõ là đã bị bỏ qua" in text
    assert ":caption: Cho giảng viên\n:maxdepth: 1\n\nteaching_guide\n" in solutions


# ----------------------------------------------------------------------------------------------- Sphinx extension


@pytest.mark.parametrize("word, folded", [("Thiết", "thiet"), ("BỘ", "bo"), ("nhớ", "nho"), ("Đường", "duong"),
                                          ("GPU", "gpu"), ("thiế\u0301t", "thiet")])
def test_search_folds_words_without_diacritics(word, folded):
    language = lessons_site.SearchVietnamese({})
    assert language.stem(word) == folded
    assert lessons_site.fold(word) == folded


def test_search_splits_decomposed_text_into_whole_words():
    import unicodedata

    language = lessons_site.SearchVietnamese({})
    text = unicodedata.normalize("NFD", "bộ nhớ GPU, thiết bị")
    assert language.split(text) == ["bộ", "nhớ", "GPU", "thiết", "bị"]
    assert "normalize(\"NFD\")" in language.js_stemmer_code and "đ/g" in language.js_stemmer_code


def test_licence_links_prefer_the_copy_inside_the_site(tmp_path):
    (tmp_path / "_extra").mkdir()
    (tmp_path / "_extra" / "LICENSE.txt").write_text("MIT")
    code, content = lessons_site.licence_links(tmp_path, "https://github.com/o/r", "main")
    assert code == {"covers": "Mã nguồn", "licence": "MIT", "local": True, "href": "LICENSE.txt"}
    assert content["local"] is False and content["href"] == "https://github.com/o/r/blob/main/LICENSE-CONTENT"
    assert content["licence"] == "CC BY 4.0"


# ----------------------------------------------------------------------------------------------- links


def test_site_links_turn_repository_urls_back_into_site_pages():
    """Notebooks link the repository on GitHub (for Colab); the site opens its own page where it has one."""
    from tools import build_course

    config = build_course.CourseConfig(repo="o/r", branch="main", ref="v1.0.0")
    repo = "https://github.com/o/r/blob/v1.0.0/"
    source = (f"[kernel]({repo}docs/glossary.md#g-kernel) · [Bài 3]({repo}notebooks/03_x.ipynb) · "
              f"[mục]({repo}notebooks/03_x.ipynb#muc-2) · [lộ trình]({repo}docs/core_path.md) · "
              f"[phiên bản]({repo}docs/version_notes.md#bai-14-4) · [README]({repo}README.md) · "
              f"[khác](https://github.com/o/r/blob/main/docs/glossary.md#g-x) · [web](https://e.org/docs/glossary.md)")
    pages = build_site.site_pages(["notebooks/02_y.ipynb", "notebooks/03_x.ipynb",
                                   "notebooks/solutions/02_y_solutions.ipynb"])
    assert pages["docs/glossary.md"] == "docs/glossary.md" and pages["docs/core_path.md"] == "core_path.md"
    kept = (f" · [README]({repo}README.md) · "
            "[khác](https://github.com/o/r/blob/main/docs/glossary.md#g-x) · [web](https://e.org/docs/glossary.md)")
    for page, up in (("notebooks/02_y.ipynb", ""), ("notebooks/solutions/02_y_solutions.ipynb", "../")):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(source),
                                             nbformat.v4.new_code_cell(f"# [k]({repo}docs/glossary.md#g-k)")])
        build_site.site_links(nb, page, pages, config)
        assert nb.cells[0].source == (
            f'<a href="../{up}docs/glossary.html#g-kernel">kernel</a> · [Bài 3]({up}03_x.ipynb) · '
            f'<a href="{up}03_x.html#muc-2">mục</a> · [lộ trình](../{up}core_path.md) · '
            f'<a href="../{up}docs/version_notes.html#bai-14-4">phiên bản</a>' + kept)
        assert nb.cells[1].source == f"# [k]({repo}docs/glossary.md#g-k)", "code cells are left alone"

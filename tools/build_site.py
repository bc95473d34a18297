"""Build the course website from the executed notebooks into build/site/ (Sphinx + MyST-NB, offline).

1. Every notebook under notebooks/ comes executed from tools/run.py's cache (it runs, twice in one
   kernel, only when its key changed).
2. Each one is prepared for a static page in build/site-src/: local "Mở trong Colab / Kaggle" buttons and a
   "Chạy trên <CPU>, <lõi>, torch <phiên bản>, <ngày>" label replace the badge cell; a %%gpu cell that was skipped
   gets a visible note or, when a GPU run of the course exists, that run's outputs labelled "Đo trên <GPU>,
   <ngày>"; quizzes show their static HTML (answer behind a click).
3. Sphinx renders build/site-src/ with site/conf.py into build/site/. Files whose content did not change keep
   their time stamps, so a re-build only re-renders what changed.

A GPU run is the folder tools/gpu_validate.sh saves: ``<out>/environment.txt`` (a ``date: YYYY-MM-DD`` line and
nvidia-smi's CSV with the GPU names) and ``<out>/executed/<notebook path in the repository>``. The newest
``gpu-validation-*/`` in the repository is used unless ``--gpu-run DIR`` or ``--no-gpu-run`` says otherwise.

Usage:
    python -m tools.build_site                 # → build/site/index.html
    python -m tools.build_site --gpu-run ~/gpu-validation-20261130
"""

from __future__ import annotations

import argparse
import copy
import html
import posixpath
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

import nbformat

from lessons_lib.gpu_cells import SKIP_MARK
from lessons_lib.widget_display import STATIC_HTML_KEY
from tools import atlas, glossary, site_epub, verified
from tools.build_course import (
    CORE_PATH,
    GUIDE,
    VERSION_NOTES,
    CourseConfig,
    colab_url,
    kaggle_url,
    load_config,
)
from tools.lessons_site import EXTRA_DIR, LICENCES
from tools.run import RUN_KEY, course_notebooks, execute_all_cached, needed_gpus, was_skipped

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "site"  # conf.py, templates, CSS, vendored fonts and MathJax
STAGE = ROOT / "build" / "site-src"  # the prepared notebooks Sphinx reads
DOCTREES = ROOT / "build" / "site-doctrees"
OUT = ROOT / "build" / "site"
LAUNCH_CELL_ID = "lessons-site-launch"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


# ----------------------------------------------------------------------------------------------- GPU run


@dataclass(frozen=True)
class GpuRun:
    """The executed notebooks of a GPU run of the course and where/when it ran."""

    folder: Path
    gpu: str
    date: str

    def notebook(self, repo_path: str) -> Path:
        """Return where this run keeps the executed copy of the notebook at `repo_path`."""
        return self.folder / "executed" / repo_path

    @property
    def label(self) -> str:
        return f"{self.gpu}, {self.date}"


def parse_environment(text: str) -> tuple[str | None, str | None]:
    """Return (GPU description, YYYY-MM-DD date) from a GPU run's environment.txt (None where not found)."""
    date = re.search(r"^date:\s*(\d{4}-\d{2}-\d{2})", text, re.M)
    names: list[str] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\s*name\s*,", line):  # nvidia-smi --query-gpu=name,... --format=csv: a header, one row per GPU
            for row in lines[i + 1:]:
                if "," not in row or not row.split(",")[0].strip():
                    break
                names.append(row.split(",")[0].strip())
            break
    gpu = " + ".join(f"{count}× {name}" if count > 1 else name for name, count in Counter(names).items()) or None
    return gpu, date.group(1) if date else None


def load_gpu_run(folder: Path) -> GpuRun:
    """Return the GPU run saved in `folder`; raise ValueError saying what is missing."""
    folder = Path(folder)
    environment = folder / "environment.txt"
    if not (folder / "executed").is_dir() or not environment.is_file():
        raise ValueError(f"{folder} is not a GPU run: it needs environment.txt and executed/<notebook paths> "
                         "(bash tools/gpu_validate.sh writes both)")
    gpu, date = parse_environment(environment.read_text(encoding="utf-8", errors="replace"))
    if gpu is None or date is None:
        raise ValueError(f"{environment} names no GPU or no date (expected nvidia-smi's CSV with a 'name' column "
                         "and a 'date: YYYY-MM-DD' line)")
    return GpuRun(folder=folder, gpu=gpu, date=date)


def find_gpu_run(root: Path = ROOT) -> GpuRun | None:
    """Return the newest valid GPU run among `root`/gpu-validation-*/ (by date, then name), or None."""
    runs = []
    for folder in sorted(Path(root).glob("gpu-validation-*")):
        try:
            runs.append(load_gpu_run(folder))
        except ValueError:
            continue
    return max(runs, key=lambda run: (run.date, run.folder.name)) if runs else None


# ----------------------------------------------------------------------------------------------- one notebook


@dataclass
class Prepared:
    """A notebook ready for its static page, and what happened to its %%gpu cells."""

    nb: nbformat.NotebookNode
    gpu_measured: int = 0
    gpu_skipped: int = 0
    notes: list[str] = field(default_factory=list)


def run_label(run: dict) -> str:
    """Return "Chạy trên <CPU>, <N> lõi, torch <ver>, Python <ver>, <date>" from a notebook's lessons_run."""
    if not run:
        return ""
    where = f"{run.get('cpu', '?')}, {run.get('cores', '?')} lõi"
    if run.get("gpus"):
        where += " + " + " + ".join(f"{n}× {g}" if n > 1 else g for g, n in Counter(run["gpus"]).items())
    busy = " (trong lúc bộ test chạy song song: thời gian CPU chậm hơn thật)" if run.get("conditions", "alone") != "alone" else ""
    return (f"Chạy trên {where}, torch {run.get('torch', '?')}, Python {run.get('python', '?')}, "
            f"{run.get('date', '?')}{busy}.")


def launch_html(colab: str, kaggle: str, label: str) -> str:
    """Return the HTML of the Colab / Kaggle buttons (local, no badge image from another host) and the run label."""
    def button(kind: str, href: str, text: str) -> str:
        return (f'<a class="lessons-button lessons-button-{kind}" href="{html.escape(href)}">'
                f'<span class="lessons-button-mark"></span>{text}</a>')

    return ('<div class="lessons-launch">' + button("colab", colab, "Mở trong Colab")
            + button("kaggle", kaggle, "Mở trong Kaggle") + "</div>\n"
            + (f'<p class="lessons-run-label">{html.escape(label)}</p>' if label else ""))


def _note(kind: str, text_html: str, text_plain: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_output("display_data", data={
        "text/html": f'<div class="lessons-gpu-note lessons-gpu-{kind}"><p>{text_html}</p></div>',
        "text/plain": text_plain})


def skipped_note(needed: int, reason: str) -> nbformat.NotebookNode:
    """Return the output that says, visibly, that a %%gpu cell did not run for this page, and why."""
    what = "GPU CUDA" if needed == 1 else f"ít nhất {needed} GPU CUDA"
    text = (f"Ô này cần {what}; trang này được chạy trên máy không đủ GPU nên ô bị bỏ qua. {reason} "
            "Mở notebook trên Colab hoặc Kaggle có GPU để tự chạy ô này.")
    return _note("skipped", f"{SKIP_MARK} " + html.escape(text), f"{SKIP_MARK} {text}")


def measured_note(run: GpuRun) -> nbformat.NotebookNode:
    """Return the label put above the outputs taken from the GPU run."""
    text = f"Đo trên {run.gpu}, {run.date} (lần chạy GPU của khoá học; máy dựng trang không chạy được ô này)."
    return _note("measured", "🟢 " + html.escape(text), "🟢 " + text)


def static_outputs(outputs: list) -> list:
    """Return `outputs` with each widget that carries static HTML shown as that HTML (no widget view)."""
    result = []
    for output in outputs:
        static = output.get("metadata", {}).get(STATIC_HTML_KEY, {}).get("static_html")
        if static:
            output = copy.deepcopy(output)
            output["data"] = {"text/html": static, "text/plain": output.get("data", {}).get("text/plain", "")}
            output["metadata"] = {}
        result.append(output)
    return result


def _gpu_cells_by_source(gpu_nb) -> dict[str, list]:
    cells: dict[str, list] = {}
    for cell in gpu_nb.cells if gpu_nb is not None else []:
        if cell.cell_type == "code":
            cells.setdefault(cell.source.strip(), []).append(cell)
    return cells


def prepare_notebook(nb, colab: str, kaggle: str, *, gpu_nb=None, gpu_run: GpuRun | None = None,
                     title_suffix: str = "") -> Prepared:
    """Return a copy of the executed notebook `nb` ready for its static page.

    Args:
        nb: The executed notebook (its ``lessons_run`` metadata gives the run label).
        colab: The "Mở trong Colab" link; kaggle: the "Mở trong Kaggle" link.
        gpu_nb: The same notebook executed in `gpu_run`, or None.
        gpu_run: The GPU run `gpu_nb` comes from, or None.
        title_suffix: Appended to the page's H1 (e.g. " (lời giải)").

    Returns:
        The ``Prepared`` notebook with counts of %%gpu cells measured on the GPU run and skipped.
    """
    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)  # widget state: MyST-NB would load the widget manager from a CDN
    prepared = Prepared(nb=nb)
    cells = nb.cells
    if cells and cells[0].cell_type == "markdown" and "colab.research.google.com" in cells[0].source:
        del cells[0]  # the badge cell: its images come from other hosts; replaced by local buttons below
    title = next((i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.lstrip().startswith("# ")),
                 None)
    if title is not None:  # the H1 alone in its cell, so the buttons and the run label sit right under it
        first, _, rest = cells[title].source.lstrip().partition("\n")
        cells[title].source = first + title_suffix
        if rest.strip():
            rest_cell = nbformat.v4.new_markdown_cell(rest.strip("\n"))
            rest_cell.id = f"{cells[title].get('id', 'title')}-rest"[:64]
            cells.insert(title + 1, rest_cell)
    launch = nbformat.v4.new_markdown_cell(launch_html(colab, kaggle, run_label(nb.metadata.get(RUN_KEY, {}))))
    launch.id = LAUNCH_CELL_ID  # fixed, so an unchanged page is byte-identical and Sphinx skips it
    cells.insert(0 if title is None else title + 1, launch)
    gpu_cells = _gpu_cells_by_source(gpu_nb)
    for cell in cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = static_outputs(cell.outputs)
        needed = needed_gpus(cell.source)
        if needed is None or not was_skipped(cell):
            continue  # not a GPU cell, or it ran here (a build on a GPU machine)
        matches = gpu_cells.get(cell.source.strip(), [])
        match = matches.pop(0) if matches else None
        if gpu_run is None:
            reason = "Chưa có lần chạy GPU nào của khoá học được đưa vào trang."
        elif match is None:
            reason = f"Lần chạy GPU ({gpu_run.label}) không có ô này với đúng mã hiện tại."
        elif was_skipped(match):
            reason = f"Lần chạy GPU ({gpu_run.label}) cũng không đủ GPU cho ô này."
        elif match.get("execution_count") is None or any(o.get("output_type") == "error" for o in match.outputs):
            reason = f"Lần chạy GPU ({gpu_run.label}) không chạy xong ô này."
        else:
            cell.outputs = [measured_note(gpu_run), *static_outputs(match.outputs)]
            prepared.gpu_measured += 1
            continue
        cell.outputs = [skipped_note(needed, reason)]
        prepared.gpu_skipped += 1
        if gpu_run is not None:
            prepared.notes.append(reason)
    return prepared


# ----------------------------------------------------------------------------------------------- the site


#: The repository's Markdown pages the site shows, and where the stage holds each (core path and guide at the top).
DOC_PAGES = {glossary.PAGE: f"docs/{glossary.PAGE.name}", CORE_PATH: CORE_PATH.name, GUIDE: GUIDE.name,
             VERSION_NOTES: f"docs/{VERSION_NOTES.name}"}


def site_pages(notebooks: list[str]) -> dict[str, str]:
    """Return {repository path: its page's source in the stage} for every repository file the site shows."""
    return {path: path for path in notebooks} | {file.relative_to(ROOT).as_posix(): staged
                                                  for file, staged in DOC_PAGES.items()}


def site_links(nb, page: str, pages: dict[str, str], config: CourseConfig) -> None:
    """Turn a notebook's links to repository files at the pinned ref back into the site's own pages.

    The notebooks link the repository's files on GitHub (build_course.absolute_links), which works in Colab; on
    the site a file it shows (`pages`, from site_pages) opens its page: a Markdown link relative to `page` (the
    notebook's own stage path; Sphinx checks it), or, with an #anchor, an HTML link to the .html page (MyST checks
    only heading anchors). Any other file keeps its GitHub URL.
    """
    prefix = re.escape(f"https://github.com/{config.repo}/blob/{quote(config.ref, safe='')}/")
    link = re.compile(rf"\[((?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]\({prefix}([^()\s#]+)(?:#([^()\s]*))?\)")

    def local(found: re.Match) -> str:
        text, path, anchor = found.groups()
        staged = pages.get(unquote(path))
        if staged is None:
            return found.group(0)
        relative = quote(posixpath.relpath(staged, posixpath.dirname(page)))
        if anchor is None:
            return f"[{text}]({relative})"
        return f'<a href="{html.escape(posixpath.splitext(relative)[0])}.html#{html.escape(anchor)}">{text}</a>'

    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = link.sub(local, cell.source)


def index_markdown(lessons: list[str], solutions: list[str], runs: list[dict], gpu_run: GpuRun | None,
                   measured: int, skipped: int) -> str:
    """Return the home page: the course intro (site/intro.md), how the outputs were made, and the tables of contents."""
    intro = (SITE / "intro.md").read_text(encoding="utf-8").strip()
    machines = sorted({run_label(run).removeprefix("Chạy trên ").rstrip(".") for run in runs if run})
    lines = [intro, "", site_epub.LINK, "", "## Các kết quả trên trang này", "",
             "Mỗi bài là notebook đã chạy thật từ đầu đến cuối, hai lượt liền trong một kernel (như khi bạn chạy lại "
             "các ô); trang hiện kết quả của lượt thứ hai. Máy đã chạy: " + "; ".join(machines) + ".", ""]
    if gpu_run is None:
        lines.append(f"Các ô `%%gpu` cần GPU CUDA: lần dựng này không có lần chạy GPU nào, nên {skipped} ô đó ghi "
                     "rõ là đã bị bỏ qua. Mở bài trên Colab/Kaggle có GPU để tự chạy chúng.")
    else:
        lines.append(f"Các ô `%%gpu` cần GPU CUDA: {measured} ô hiện kết quả đo trên {gpu_run.gpu} ({gpu_run.date}), "
                     f"có nhãn \"Đo trên …\"; {skipped} ô còn lại ghi rõ vì sao không có kết quả.")
    lines += ["", "```{toctree}", ":caption: Lộ trình", ":maxdepth: 1", "", CORE_PATH.stem, "```", ""]
    lines += ["```{toctree}", ":caption: Bài học", ":maxdepth: 1", "", *lessons, "```", ""]
    if solutions:
        lines += ["```{toctree}", ":caption: Lời giải", ":maxdepth: 1", "", *solutions, "```", ""]
    lines += ["```{toctree}", ":caption: Tra cứu", ":maxdepth: 1", "", "docs/glossary", atlas.PAGE,
              f"docs/{VERSION_NOTES.stem}", "```", ""]
    lines += ["```{toctree}", ":caption: Cho giảng viên", ":maxdepth: 1", "", GUIDE.stem, "```", ""]
    return "\n".join(lines)


def _write_if_changed(path: Path, data: bytes, written: set[Path]) -> None:
    written.add(path)
    if path.is_file() and path.read_bytes() == data:
        return  # keep the time stamp: Sphinx re-renders only what changed
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@dataclass
class SiteBuild:
    """What a site build did."""

    pages: list[str]
    executed: int
    cached: int
    gpu_run: GpuRun | None
    gpu_measured: int
    gpu_skipped: int
    out: Path = OUT
    epub: Path = OUT / site_epub.NAME


def stage(gpu_run: GpuRun | None, stage_dir: Path = STAGE, notebooks: list[Path] | None = None) -> SiteBuild:
    """Execute (or take from the cache) every notebook and write the Sphinx sources into `stage_dir`."""
    config = load_config()
    written: set[Path] = set()
    lessons, solutions, runs, failed, shown = [], [], [], [], []
    executed = cached = measured = skipped = 0
    paths = notebooks or course_notebooks()
    pages = site_pages([path.resolve().relative_to(ROOT).as_posix() for path in paths])
    for path, result in zip(paths, execute_all_cached(paths), strict=True):
        if result.error is not None:
            failed.append(f"{path.relative_to(ROOT)}:\n{result.error}")
            continue
        cached += result.cached
        executed += not result.cached
        repo_path = path.resolve().relative_to(ROOT).as_posix()
        gpu_nb = None
        if gpu_run is not None and gpu_run.notebook(repo_path).is_file():
            gpu_nb = nbformat.read(gpu_run.notebook(repo_path), as_version=4)
        is_solution = "solutions" in Path(repo_path).parts
        prepared = prepare_notebook(result.nb, colab_url(config, repo_path), kaggle_url(config, repo_path),
                                    gpu_nb=gpu_nb, gpu_run=gpu_run if gpu_nb is not None else None,
                                    title_suffix=" (lời giải)" if is_solution else "")
        verified.insert_block(prepared.nb, repo_path, result.run, gpu_run, gpu_nb)
        if gpu_run is not None and gpu_nb is None and prepared.gpu_skipped:
            print(f"note: the GPU run has no executed copy of {repo_path}", file=sys.stderr)
        measured += prepared.gpu_measured
        skipped += prepared.gpu_skipped
        for reason, count in Counter(prepared.notes).items():
            print(f"note: {repo_path}: {count} %%gpu cell(s) not from the GPU run: {reason}", file=sys.stderr)
        runs.append(result.run)
        site_links(prepared.nb, repo_path, pages, config)
        _write_if_changed(stage_dir / repo_path, nbformat.writes(prepared.nb).encode(), written)
        (solutions if is_solution else lessons).append(repo_path.removesuffix(".ipynb"))
        shown += [] if is_solution else atlas.shown_errors(prepared.nb, repo_path)
    if failed:
        raise RuntimeError("some notebooks fail, so the site is not built (fix them first):\n\n" + "\n\n".join(failed))
    if gpu_run is not None and measured == 0:
        print(f"note: GPU run {gpu_run.folder} matched no %%gpu cell", file=sys.stderr)
    index = index_markdown(lessons, solutions, runs, gpu_run, measured, skipped)
    _write_if_changed(stage_dir / "index.md", index.encode(), written)
    _write_if_changed(stage_dir / f"{atlas.PAGE}.md", atlas.atlas_markdown(shown).encode(), written)
    for file, staged in DOC_PAGES.items():
        data = file.read_bytes()
        if "/" not in staged:  # staged one level above docs/: so are its links to the lessons
            data = data.replace(b"](../notebooks/", b"](notebooks/")
        _write_if_changed(stage_dir / staged, data, written)
    for name, site_name, _, _ in LICENCES:
        if (ROOT / name).is_file():
            _write_if_changed(stage_dir / EXTRA_DIR / site_name, (ROOT / name).read_bytes(), written)
    for stale in [p for p in stage_dir.rglob("*") if p.is_file() and p not in written]:
        stale.unlink()
    pages = sorted(p.relative_to(stage_dir).with_suffix("").as_posix() for p in written if p.suffix in (".md", ".ipynb"))
    return SiteBuild(pages=pages, executed=executed, cached=cached, gpu_run=gpu_run, gpu_measured=measured,
                     gpu_skipped=skipped)


def run_sphinx(builder: str, out: Path) -> None:
    """Render the stage with site/conf.py's `builder` ("html" or "epub") into `out`; warnings are errors."""
    command = [sys.executable, "-m", "sphinx", "-b", builder, "-c", str(SITE), "-d", str(DOCTREES),
               "-W", "--keep-going", "-q", str(STAGE), str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"Sphinx ({builder}) failed (exit {done.returncode}):\n{done.stdout[-4000:]}\n"
                           f"{done.stderr[-6000:]}")


SPHINX_PAGES = {"search", "genindex", "py-modindex"}


def prune_pages(out: Path, pages: list[str]) -> list[Path]:
    """Delete pages Sphinx left in `out` from notebooks that no longer exist; return what was deleted."""
    keep = set(pages) | SPHINX_PAGES
    stale = [p for p in Path(out).rglob("*.html") if not {"_static", "_images"} & set(p.relative_to(out).parts)
             and p.relative_to(out).with_suffix("").as_posix() not in keep]
    for page in stale:
        page.unlink()
    return stale


def build_site(gpu_run: GpuRun | None | str = "auto") -> SiteBuild:
    """Build the whole site and its EPUB; `gpu_run` is a GpuRun, None (no GPU outputs) or "auto" (newest found)."""
    build = stage(find_gpu_run() if gpu_run == "auto" else gpu_run)
    run_sphinx("html", OUT)
    prune_pages(OUT, build.pages)
    shutil.rmtree(site_epub.EPUB_DIR, ignore_errors=True)  # from scratch: files left there would go into the book
    run_sphinx("epub", site_epub.EPUB_DIR)
    shutil.copyfile(site_epub.EPUB_DIR / site_epub.NAME, build.epub)
    return build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu-run", type=Path, help="a GPU run folder (default: the newest gpu-validation-*/ here)")
    parser.add_argument("--no-gpu-run", action="store_true", help="use no GPU run: %%gpu cells show as skipped")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        build = build_site(None if args.no_gpu_run else (load_gpu_run(args.gpu_run) if args.gpu_run else "auto"))
        print(site_epub.epubcheck(build.epub))
    except (RuntimeError, ValueError) as exc:
        print(f"build_site: {exc}", file=sys.stderr)
        return 1
    gpu = (f"GPU run {build.gpu_run.folder.name} ({build.gpu_run.label}): {build.gpu_measured} %%gpu cells measured, "
           f"{build.gpu_skipped} skipped" if build.gpu_run else f"no GPU run: {build.gpu_skipped} %%gpu cells marked skipped")
    print(f"site: {build.out / 'index.html'}\n{len(build.pages)} pages; notebooks executed {build.executed}, "
          f"from cache {build.cached}; {gpu}\ntime {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The whole course with its outputs as one EPUB, for reading offline, and its check by EPUBCheck.

tools/build_site.py renders build/site-src/ (the prepared notebooks the HTML pages come from) a second time with
Sphinx's epub builder into build/site-epub/ (one XHTML per notebook), then copies the book into the site, whose
home page links to it. EPUBCheck (Debian: ``apt-get install epubcheck``; it needs Java) validates the book in
the site's build command.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = "bai14-gpu-cuda.epub"  # site/conf.py's epub_basename + ".epub"
EPUB_DIR = ROOT / "build" / "site-epub"
# On the HTML home page only (in the book it would link the book to itself).
LINK = ("```{only} builder_html\n"
        f'<p class="lessons-epub">📖 Đọc offline: <a href="{NAME}">tải cả khoá học thành một file EPUB</a> (mọi bài, '
        "kèm kết quả đã chạy; mở bằng Apple Books, Google Play Sách, Calibre…).</p>\n```")


def build_epub(stage_dir: Path, doctrees: Path, site_out: Path, out: Path = EPUB_DIR) -> Path:
    """Render `stage_dir` as an EPUB into `out` (warnings are errors), copy it into `site_out`, return its path."""
    command = [sys.executable, "-m", "sphinx", "-b", "epub", "-c", str(ROOT / "site"), "-d", str(doctrees),
               "-W", "--keep-going", "-q", str(stage_dir), str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"Sphinx (epub) failed (exit {done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}")
    shutil.copyfile(out / NAME, Path(site_out) / NAME)
    return out / NAME


def epubcheck(book: Path) -> str:
    """Run EPUBCheck on `book`; return one line saying how it went (skipped without epubcheck or Java).

    Raises:
        RuntimeError: EPUBCheck reports an error (its report is in the message).
    """
    tool = shutil.which("epubcheck")
    if tool is None or shutil.which("java") is None:
        return "epubcheck: skipped (no epubcheck or no java here; Debian: apt-get install -y epubcheck)"
    command = ["java", "-jar", tool] if Path(tool).resolve().suffix == ".jar" else [tool]  # Debian's is a jar
    done = subprocess.run([*command, "-q", str(book)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"EPUBCheck found errors in {book}:\n{done.stdout[-6000:]}{done.stderr[-6000:]}")
    return f"epubcheck: {book.name} passed ({book.stat().st_size / 2**20:.1f} MiB)"


def _builder_inited(app) -> None:
    if app.builder.name == "epub":  # the reader's fonts and the epub theme: no web fonts, no site CSS
        app.config.html_static_path = app.config.html_extra_path = []  # nor the licences' .txt (no EPUB type)


def _page_context(app, pagename, templatename, context, doctree) -> None:
    if app.builder.name == "epub":  # MyST-NB writes its CSS only after the book is zipped
        site_css = {entry if isinstance(entry, str) else entry[0] for entry in app.config.html_css_files}
        context["css_files"] = [css for css in context.get("css_files", []) if "mystnb." not in css.filename
                                and css.filename.removeprefix("_static/") not in site_css]


def setup(app):
    """Sphinx extension (site/conf.py): what the epub builder leaves out of the site's look."""
    app.connect("builder-inited", _builder_inited)
    app.connect("html-page-context", _page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

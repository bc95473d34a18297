"""The whole course with its outputs as one EPUB (tools/build_site.py runs Sphinx's epub builder), and its EPUBCheck.

Also a Sphinx extension (site/conf.py): the book leaves out the site's web fonts, CSS and licence .txt files.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NAME = "bai14-gpu-cuda.epub"  # site/conf.py's epub_basename + ".epub"
EPUB_DIR = ROOT / "build" / "site-epub"
# On the HTML home page only (in the book it would link the book to itself).
LINK = ("```{only} builder_html\n"
        f'<p class="lessons-epub">📖 Đọc offline: <a href="{NAME}">tải cả khoá học thành một file EPUB</a> (mọi bài, '
        "kèm kết quả đã chạy; mở bằng Apple Books, Google Play Sách, Calibre…).</p>\n```")


def epubcheck(book: Path) -> str:
    """Run EPUBCheck on `book`, return one line (skipped without it or Java); raise RuntimeError on an error."""
    tool = shutil.which("epubcheck")
    if tool is None or shutil.which("java") is None:
        return "epubcheck: skipped (no epubcheck or no java here; Debian: apt-get install -y epubcheck)"
    command = ["java", "-jar", tool] if Path(tool).resolve().suffix == ".jar" else [tool]  # Debian's is a jar
    done = subprocess.run([*command, "-q", str(book)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"EPUBCheck found errors in {book}:\n{done.stdout[-6000:]}{done.stderr[-6000:]}")
    return f"epubcheck: {book.name} passed ({book.stat().st_size / 2**20:.1f} MiB)"


def _builder_inited(app) -> None:
    if app.builder.name == "epub":  # the reader's fonts and the epub theme; a .txt has no EPUB media type
        app.config.html_static_path = app.config.html_extra_path = []


def _page_context(app, pagename, templatename, context, doctree) -> None:
    if app.builder.name == "epub":  # the site's CSS is not in the book; MyST-NB's is written after the zip
        site_css = {entry if isinstance(entry, str) else entry[0] for entry in app.config.html_css_files}
        context["css_files"] = [css for css in context.get("css_files", []) if "mystnb." not in css.filename
                                and css.filename.removeprefix("_static/") not in site_css]


def setup(app):
    app.connect("builder-inited", _builder_inited)
    app.connect("html-page-context", _page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

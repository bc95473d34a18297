"""Sphinx configuration of the course website (Sphinx + MyST-NB + sphinx-book-theme).

The pages are the executed notebooks that tools/build_site.py prepares in build/site-src/; build the site with
``python -m tools.build_site`` (it calls Sphinx with ``-c site``). Nothing here reaches the network: the theme,
fonts and MathJax are local files, and notebooks are never executed by Sphinx (MyST-NB only renders outputs).
"""

from __future__ import annotations

from tools.build_course import load_config, package_version

COURSE = load_config()

project = "Bài 14: GPU và CUDA trong PyTorch"
author = "Các tác giả khoá học"
version = release = package_version()
language = "vi"
extensions = ["myst_nb", "tools.lessons_site", "tools.site_epub"]  # Sphinx runs with the repository as cwd
exclude_patterns = ["_extra", "**.ipynb_checkpoints"]
templates_path = ["_templates"]

# Notebooks arrive executed (tools/run.py); MyST-NB must not run them again.
nb_execution_mode = "off"
nb_ipywidgets_js = {}  # its default loads require.js and the widget manager from CDNs
# A widget view has no state on a static page: drop it, so the text/plain (or static HTML) form shows instead.
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_merge_streams = True
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3
suppress_warnings = ["mystnb.unknown_mime_type"]

html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["_static"]
html_css_files = ["vendor/fonts/fonts.css", "lessons.css"]
html_js_files = ["lessons.js"]
html_copy_source = False
html_show_sourcelink = False
html_last_updated_fmt = None
mathjax_path = "vendor/mathjax/tex-chtml-full.js"  # relative to _static: vendored, no CDN
html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "toc_title": "Trong bài này",
    "use_download_button": False,
    "use_fullscreen_button": False,
    "repository_url": f"https://github.com/{COURSE.repo}",
    "repository_branch": COURSE.branch,
    "use_repository_button": True,
    "footer_content_items": ["lessons-footer.html"],
}
html_context = {
    "default_mode": "auto",  # light or dark as the reader's system says (unset, the theme logs a console error)
    "lessons_repo_url": f"https://github.com/{COURSE.repo}",
    "lessons_branch": COURSE.branch,
}
# The licence files are copied into the site by tools/build_site.py (see lessons_site.licence_links).

# The offline book (tools/site_epub.py): same sources, Sphinx's epub builder, one XHTML per notebook.
epub_basename = "bai14-gpu-cuda"
epub_author = epub_publisher = author
epub_identifier = epub_uid = COURSE.repo.replace("/", ".")  # the same id in content.opf and toc.ncx
epub_copyright = "nội dung: CC BY 4.0, mã nguồn: MIT"
epub_show_urls = "no"
epub_exclude_files = ["search.html"]

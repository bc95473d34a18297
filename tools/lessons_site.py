"""Sphinx extension of the course website: Vietnamese search, the licence links, the course version, plot alt text.

Plot alt text: the course's IPython extension stores each figure's text alternative (title, axis labels, the
numbers it shows) in its PNG output's metadata (``image/png`` → ``alt``); MyST-NB names the image file after the
SHA-256 of its bytes, which is how the image node in the page finds its alt text here.

Search: Sphinx has no Vietnamese search language, and its English fallback would stem Vietnamese words with
English rules. The ``vi`` language here indexes every word without its diacritics (and đ → d), and the browser
does the same to the query, so "thiết bị" and "thiet bi" find the same pages.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import unicodedata
from pathlib import Path

from sphinx.search import SearchLanguage

LICENCES = (  # (file in the repository, its name on the site, what it covers, licence)
    ("LICENSE", "LICENSE.txt", "Mã nguồn", "MIT"),
    ("LICENSE-CONTENT", "LICENSE-CONTENT.txt", "Nội dung", "CC BY 4.0"),
)
EXTRA_DIR = "_extra"  # inside the Sphinx source folder: files copied as they are to the site's root


def fold(word: str) -> str:
    """Return `word` lower-cased, without diacritics, đ as d (how the index and the query compare words)."""
    decomposed = unicodedata.normalize("NFD", word.lower())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).replace("đ", "d")


class SearchVietnamese(SearchLanguage):
    """Search language ``vi``: whole words, compared without diacritics."""

    lang = "vi"
    language_name = "Vietnamese"
    js_stemmer_code = """
var Stemmer = function() {
  this.stemWord = function(w) {
    return w.toLowerCase().normalize("NFD").replace(/[\\u0300-\\u036f]/g, "").replace(/đ/g, "d");
  };
};
"""
    _word_re = re.compile(r"\w+")

    def split(self, input: str) -> list[str]:
        """Split text into words (composed form first, so a decomposed diacritic never splits a word)."""
        return self._word_re.findall(unicodedata.normalize("NFC", input))

    def stem(self, word: str) -> str:
        """Fold the word as the browser folds the query."""
        return fold(word)


def licence_links(srcdir: Path, repo_url: str, branch: str) -> list[dict]:
    """Return the footer's licence links: the copy inside the site when present, else the repository's file."""
    links = []
    for repo_name, site_name, covers, licence in LICENCES:
        local = (Path(srcdir) / EXTRA_DIR / site_name).is_file()
        links.append({"covers": covers, "licence": licence, "local": local,
                      "href": site_name if local else f"{repo_url}/blob/{branch}/{repo_name}"})
    return links


def _config_inited(app, config) -> None:
    extra = Path(app.srcdir) / EXTRA_DIR
    if extra.is_dir():
        config.html_extra_path = [*config.html_extra_path, str(extra)]
    context = config.html_context
    context["lessons_licences"] = licence_links(Path(app.srcdir), context.get("lessons_repo_url", ""),
                                                context.get("lessons_branch", "main"))


def _note_navigation_change(app, env, added, changed, removed) -> list[str]:
    app.lessons_rewrite_all = app.config.root_doc in added | changed  # its toctrees are every page's sidebar
    return []


def _pages_to_rewrite(app, env) -> list[str]:
    """Re-write every page when the navigation changed (Sphinx alone would leave the others' sidebars stale)."""
    return sorted(env.found_docs) if getattr(app, "lessons_rewrite_all", False) else []


def plot_alts(notebook: dict) -> dict[str, str]:
    """Return {SHA-256 of a PNG output: its alt text} for the image outputs of a notebook (JSON) that carry one."""
    alts = {}
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []):
            alt = output.get("metadata", {}).get("image/png", {}).get("alt")
            png = output.get("data", {}).get("image/png")
            if alt and png:
                alts[hashlib.sha256(base64.b64decode("".join(png))).hexdigest()] = str(alt)
    return alts


def _doctree_read(app, doctree) -> None:
    source = Path(app.env.doc2path(app.env.docname))
    if source.suffix != ".ipynb":
        return
    from docutils import nodes

    alts = plot_alts(json.loads(source.read_text(encoding="utf-8")))
    for image in doctree.findall(nodes.image):
        alt = alts.get(Path(image["uri"]).stem)
        if alt:
            image["alt"] = alt


def _build_finished(app, exception) -> None:
    """Copy the site's own CSS/JS again: Sphinx skips its static files when no page is out of date."""
    if exception is not None or app.builder.format != "html":
        return
    for source in (Path(app.confdir) / "_static").glob("lessons.*"):
        target = Path(app.outdir) / "_static" / source.name
        if not target.is_file() or target.read_bytes() != source.read_bytes():
            shutil.copyfile(source, target)


def setup(app):
    app.add_search_language(SearchVietnamese)
    app.connect("config-inited", _config_inited)
    app.connect("env-get-outdated", _note_navigation_change)
    app.connect("env-get-updated", _pages_to_rewrite)
    app.connect("doctree-read", _doctree_read)
    app.connect("build-finished", _build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

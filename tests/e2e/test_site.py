"""The course website in headless Chromium: built by tools/build_site.py, served from 127.0.0.1, nothing else.

The build reads the executed notebooks from tools/run.py's cache (the re-run test uses the same
copies, so each notebook runs once per test command). Every page is visited once: no console error, no failed
request and no request to another host; every internal link (with its #anchor) and image resolves; each lesson
shows a plot or a table; every %%gpu cell shows something; math is typeset; the vendored Vietnamese fonts are
the ones in use. Then a quiz's answer stays hidden until its "Xem đáp án" is clicked, and search finds the same
pages with and without diacritics. Screenshots of a lesson's plot and of a quiz go to the kept screenshots folder.
At a phone's width (390 px) every page is visited again: no sideways scrolling, the menu opens and leads to a
lesson, every plot has a meaningful alt; axe-core finds nothing serious or critical at either width (a11y.py).
Skip with ``-m "not site"`` (or ``-m "not browser"``).
"""

from __future__ import annotations

import functools
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import a11y
import pytest

from tools import build_site, site_epub
from tools import version_matrix as vm
from tools.build_course import colab_url, kaggle_url, load_config, package_version

REPO = Path(__file__).resolve().parents[2]


pytestmark = [pytest.mark.browser, pytest.mark.site, pytest.mark.slow]
VIEWPORT = {"width": 1400, "height": 1000}

# Everything the checks need from one page, read in one evaluation after MathJax and the fonts are done.
READ_PAGE = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  await document.fonts.ready;
  const visible = (el) => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  const cells = [...document.querySelectorAll('div.cell')];
  const gpuCells = cells.filter((c) => (c.querySelector('.cell_input pre')?.innerText || '').startsWith('%%gpu'));
  const loadedFaces = [...document.fonts].filter((f) => f.status === 'loaded');
  return {
    links: [...document.querySelectorAll('a[href]')].map((a) => a.href),
    assets: [...document.querySelectorAll('link[href], script[src]')].map((e) => e.href || e.src),
    images: [...document.querySelectorAll('img')].map((i) => ({src: i.src, ok: i.complete && i.naturalWidth > 0})),
    plotsOrTables: [...document.querySelectorAll('.cell_output img, .cell_output table')].filter(visible).length,
    launch: [...document.querySelectorAll('.lessons-launch a')].map((a) => a.href),
    runLabel: document.querySelector('p.lessons-run-label')?.innerText || '',
    gpuCells: gpuCells.length,
    blankGpuCells: gpuCells.filter((c) => !(c.querySelector('.cell_output')?.innerText || '').trim()).length,
    gpuNotes: [...document.querySelectorAll('div.lessons-gpu-note')].filter(visible).map((n) => n.className),
    quizzes: document.querySelectorAll('div.lessons-quiz-static').length,
    mathSource: document.querySelectorAll('span.math, div.math').length,
    mathTypeset: document.querySelectorAll('mjx-container').length,
    textFont: getComputedStyle(document.body).fontFamily,
    codeFont: document.querySelector('pre') ? getComputedStyle(document.querySelector('pre')).fontFamily : null,
    vietnameseFaces: loadedFaces.filter((f) => f.unicodeRange.includes('1EA0')).map((f) => f.family),
    footer: document.querySelector('.lessons-footer')?.innerText || '',
  };
}"""


@dataclass
class Visit:
    """One page as the browser saw it."""

    problems: list[str]
    data: dict


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep the test output clean
        pass


@pytest.fixture(scope="module")
def site(e2e_summary):
    start = time.monotonic()
    build = build_site.build_site()
    gpu = (f"{build.gpu_measured} %%gpu cells from {build.gpu_run.folder.name}" if build.gpu_run
           else "no GPU run")
    e2e_summary["site build"] = (f"{time.monotonic() - start:.1f} s ({len(build.pages)} pages; notebooks executed "
                                 f"{build.executed}, from cache {build.cached}; {gpu}) → {build.out}")
    return build


@pytest.fixture(scope="module")
def server(site):
    """Serve the built site on 127.0.0.1 (a free port); yield its base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site.out)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def site_page(offline_page, server):
    """A page that records console errors, failed requests, HTTP errors and any request to another host."""
    return offline_page(server, viewport=VIEWPORT)


def _page_paths(out: Path) -> list[str]:
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*.html")
                  if not {"_static", "_images", "_sources"} & set(p.relative_to(out).parts))


def _open(page, server: str, path: str) -> list[str]:
    page.problems.clear()
    page.goto(server + path, wait_until="load")
    page.wait_for_load_state("networkidle")
    return page.problems


@pytest.fixture(scope="module")
def visits(site, server, site_page) -> dict[str, Visit]:
    """Every page of the site, visited once."""
    result = {}
    for path in _page_paths(site.out):
        _open(site_page, server, path)
        data = {**site_page.evaluate(READ_PAGE), "axe": a11y.audit(site_page)}
        result[path] = Visit(list(site_page.problems), data)  # includes what loaded while reading
    return result


def _lesson_paths(visits) -> list[str]:
    return [p for p in visits if p.startswith("notebooks/")]


def _teaching_paths(visits) -> list[str]:
    """Lesson pages that teach (not the exercise set, not solutions)."""
    return [p for p in _lesson_paths(visits) if "/solutions/" not in p and "_exercises" not in p]


# ----------------------------------------------------------------------------------------------- every page


def test_the_site_has_every_notebook_as_a_page_and_the_footer_the_licences_and_version(site, visits):
    expected = {p.relative_to(REPO).with_suffix(".html").as_posix() for p in build_site.course_notebooks()}
    assert expected <= set(visits) and "index.html" in visits and "search.html" in visits
    footer = visits["index.html"].data["footer"]
    assert f"phiên bản {package_version()}" in footer and "MIT" in footer and "CC BY 4.0" in footer


def test_every_page_loads_with_no_console_error_and_no_failed_or_outside_request(visits):
    bad = {path: visit.problems for path, visit in visits.items() if visit.problems}
    assert not bad, "\n".join(f"{path}:\n  " + "\n  ".join(problems) for path, problems in bad.items())


def _status(url: str, cache: dict) -> tuple[int, str]:
    if url not in cache:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                cache[url] = (response.status, response.read().decode("utf-8", "replace"))
        except urllib.error.HTTPError as error:
            cache[url] = (error.code, "")
    return cache[url]


def test_every_internal_link_anchor_and_image_resolves(visits, server):
    fetched: dict[str, tuple[int, str]] = {}
    broken = []
    for path, visit in visits.items():
        for image in visit.data["images"]:
            if not image["ok"]:
                broken.append(f"{path}: image not shown: {image['src']}")
        for url in visit.data["links"] + visit.data["assets"]:
            if not url.startswith(server):
                continue
            target, _, anchor = url.partition("#")
            status, body = _status(target, fetched)
            if status != 200:
                broken.append(f"{path}: HTTP {status} for {target}")
            elif anchor and f'id="{urllib.parse.unquote(anchor)}"' not in body:
                broken.append(f"{path}: no #{anchor} in {target}")
    assert not broken, "\n".join(sorted(set(broken)))
    assert len(fetched) > 20  # the check really followed the site's links


def _has_plot_or_table(staged: Path) -> bool:
    """Return True when an executed notebook of the stage holds a plot (PNG) or an HTML table among its outputs."""
    import nbformat

    outputs = [o for c in nbformat.read(staged, as_version=4).cells if c.cell_type == "code" for o in c.outputs]
    return any("image/png" in o.get("data", {}) or "<table" in str(o.get("data", {}).get("text/html", ""))
               for o in outputs)


def test_each_lesson_that_draws_a_plot_or_a_table_shows_it(site, visits):
    lessons = _teaching_paths(visits)
    drawn = [p for p in lessons if _has_plot_or_table(build_site.STAGE / p.replace(".html", ".ipynb"))]
    assert len(drawn) >= len(lessons) - 2, f"most lessons draw a plot or a table; only these do: {drawn}"
    empty = [p for p in drawn if visits[p].data["plotsOrTables"] == 0]
    assert not empty, f"lesson pages whose notebook draws a plot or a table, not shown on the page: {empty}"


def test_each_notebook_page_opens_the_same_notebook_in_colab_and_kaggle_and_says_where_it_ran(site, visits):
    config, rows = load_config(), len(vm.load_results()["combos"])
    for path in _lesson_paths(visits):
        notebook = path.removesuffix(".html") + ".ipynb"
        data = visits[path].data
        assert data["launch"] == [colab_url(config, notebook), kaggle_url(config, notebook)], path
        label = data["runLabel"]
        assert label.startswith("Chạy trên ") and " lõi" in label and "torch " in label, (path, label)
        assert any(ch.isdigit() for ch in label.rsplit(",", 1)[-1]), (path, label)  # ends with the run's date
        # where it last ran: this build, each version-matrix row, a GPU
        block = (site.out / path).read_text(encoding="utf-8").split('class="lessons-verified"')[1].split("</div>")[0]
        assert "CPU, bản dựng trang này" in block and block.count("ma trận phiên bản") == rows, path
        assert "GPU" in block, path


def test_no_gpu_cell_is_blank_and_each_says_skipped_or_where_it_was_measured(site, visits):
    cells = sum(v.data["gpuCells"] for v in visits.values())
    notes = [n for v in visits.values() for n in v.data["gpuNotes"]]
    assert cells > 0 and all(v.data["blankGpuCells"] == 0 for v in visits.values())
    assert sum("lessons-gpu-skipped" in n for n in notes) == site.gpu_skipped
    assert sum("lessons-gpu-measured" in n for n in notes) == site.gpu_measured
    assert site.gpu_skipped + site.gpu_measured <= cells


def test_math_is_typeset_offline(visits):
    with_math = [p for p, v in visits.items() if v.data["mathSource"]]
    assert with_math, "no page has math: nothing proves MathJax works"
    for path in with_math:
        assert visits[path].data["mathTypeset"] >= visits[path].data["mathSource"], path


def test_text_and_code_use_the_vendored_fonts_with_vietnamese_glyphs(visits):
    for path, visit in visits.items():
        assert visit.data["textFont"].startswith('"Be Vietnam Pro"'), (path, visit.data["textFont"])
        code_font = visit.data["codeFont"]
        assert code_font is None or code_font.startswith('"JetBrains Mono"'), (path, code_font)
    lesson = visits[_teaching_paths(visits)[0]].data
    assert lesson["codeFont"] is not None
    assert {"Be Vietnam Pro", "JetBrains Mono"} <= set(lesson["vietnameseFaces"]), lesson["vietnameseFaces"]


# ----------------------------------------------------------------------------------------------- interactions


def test_quiz_answer_is_hidden_until_clicked(visits, server, site_page, screenshots):
    path = next(p for p in _lesson_paths(visits) if visits[p].data["quizzes"])
    assert not _open(site_page, server, path)
    quiz = site_page.locator("div.lessons-quiz-static").first
    answer = quiz.locator("details > p").first
    assert quiz.locator("details").evaluate("d => d.open") is False
    assert answer.is_hidden()
    quiz.scroll_into_view_if_needed()
    quiz.locator("summary").click()
    assert answer.is_visible() and "✅" in answer.inner_text()
    site_page.evaluate("() => window.scrollBy(0, -150)")
    site_page.screenshot(path=str(screenshots / "site-quiz.png"))


def test_lesson_plot_screenshot(visits, server, site_page, screenshots):
    lessons = _teaching_paths(visits)
    path = next((p for p in lessons if "04_" in p and visits[p].data["plotsOrTables"]), lessons[0])
    assert not _open(site_page, server, path)
    plot = site_page.locator(".cell_output img").first
    plot.scroll_into_view_if_needed()
    site_page.evaluate("() => window.scrollBy(0, -200)")
    site_page.screenshot(path=str(screenshots / "site-plot.png"))
    assert plot.evaluate("i => i.naturalWidth") > 100


def _search(page, server: str, query: str) -> list[str]:
    assert not _open(page, server, "search.html?q=" + urllib.parse.quote(query))
    page.wait_for_function("() => document.querySelector('#search-results p.search-summary') !== null")
    return sorted(page.eval_on_selector_all("#search-results ul.search li > a", "els => els.map(e => e.href)"))


def test_search_works_offline_with_and_without_diacritics(server, site_page):
    with_marks = _search(site_page, server, "bộ nhớ")
    assert with_marks, "searching 'bộ nhớ' found nothing"
    assert _search(site_page, server, "bo nho") == with_marks
    assert _search(site_page, server, "BỘ NHỚ") == with_marks


def test_glossary_page_is_in_the_navigation_and_its_anchors_resolve(visits, server):
    from tools import glossary

    lesson = visits["notebooks/02_moving_tensors.html"].data["links"]
    assert server + "docs/glossary.html" in lesson, "the glossary page is not in the navigation"
    status, body = _status(server + "docs/glossary.html", {})
    missing = [e["vi"] for e in glossary.load() if f'id="{glossary.anchor(e["vi"])}"' not in body]
    assert status == 200 and not missing, f"no anchor for {missing}"
    assert any(link.startswith(server + "docs/glossary.html#g-") for link in lesson)


def test_the_error_atlas_is_in_the_navigation_links_to_lessons_and_a_pasted_error_finds_it(
        visits, server, site_page, screenshots):
    atlas = server + "atlas.html"
    assert atlas in visits[_teaching_paths(visits)[0]].data["links"], "the atlas is not in the site's navigation"
    sections = {u for u in visits["atlas.html"].data["links"] if "/notebooks/" in u and "#" in u}
    assert len(sections) >= 10  # each resolves: test_every_internal_link_anchor_and_image_resolves checks every page
    _open(site_page, server, "atlas.html")
    site_page.evaluate("() => localStorage.clear()")  # a search (another test's too) highlights its words on pages
    for width, height in ((1400, 1000), (390, 844)):
        site_page.set_viewport_size({"width": width, "height": height})
        assert not _open(site_page, server, "atlas.html")
        site_page.screenshot(path=str(screenshots / f"site-atlas-{width}.png"))
    site_page.set_viewport_size(VIEWPORT)
    pasted = "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"
    assert atlas in [u.partition("#")[0] for u in _search(site_page, server, pasted)]


# ----------------------------------------------------------------------------------------------- EPUB


def test_the_epub_holds_every_notebook_and_image_and_the_home_page_links_to_it(site, visits, server):
    assert server + site_epub.NAME in visits["index.html"].data["links"]
    with zipfile.ZipFile(site.out / site_epub.NAME) as book:
        first = book.infolist()[0]
        assert (first.filename, first.compress_type, book.read(first)) == \
            ("mimetype", zipfile.ZIP_STORED, b"application/epub+zip")
        names = set(book.namelist())
    lessons = {p.relative_to(REPO).with_suffix(".xhtml").as_posix() for p in build_site.course_notebooks()}
    assert lessons <= names, sorted(lessons - names)
    # the images the pages show, not the folder: a re-used build/site/_images keeps an earlier build's images
    images = {"_images/" + Path(urllib.parse.urlparse(image["src"]).path).name for visit in visits.values()
              for image in visit.data["images"] if "/_images/" in image["src"]}
    assert images and images <= names, sorted(images - names)


# ----------------------------------------------------------------------------------------------- phones, everyone


@pytest.fixture(scope="module")
def phone_page(offline_page, server):
    """A page at a phone's width (390 px, touch) that records problems as site_page does."""
    return offline_page(server, viewport=a11y.PHONE, is_mobile=True, has_touch=True)


@pytest.fixture(scope="module")
def phone_visits(site, server, phone_page, visits, e2e_summary) -> dict[str, dict]:
    """Every page at 390 px: its width, what sticks out, the plots' alt text, axe-core's violations."""
    start, result = time.monotonic(), {}
    for path in _page_paths(site.out):
        _open(phone_page, server, path)
        result[path] = {**phone_page.evaluate(a11y.READ_PHONE, a11y.PHONE["width"]), "axe": a11y.audit(phone_page, again=True)}
    e2e_summary["phone pass (390 px, axe)"] = f"{time.monotonic() - start:.1f} s for {len(result)} pages"
    e2e_summary["axe at 1400 px"] = a11y.count({p: v.data["axe"] for p, v in visits.items()})
    e2e_summary["axe at 390 px"] = a11y.count({p: v["axe"] for p, v in result.items()})
    return result


def test_at_a_phones_width_no_page_scrolls_sideways(phone_visits):
    wide = {p: f"{v['scrollWidth']} px > {v['screen']} px: {v['sticksOut']}" for p, v in phone_visits.items()
            if v["scrollWidth"] > v["screen"]}
    assert not wide, "\n".join(f"{p}: {why}" for p, why in wide.items())


def test_no_serious_or_critical_accessibility_violation_at_either_width(visits, phone_visits):
    found = a11y.blocking({p: v.data["axe"] for p, v in visits.items()})
    found += [f"(390 px) {line}" for line in a11y.blocking({p: v["axe"] for p, v in phone_visits.items()})]
    assert not found, "\n".join(found)


def test_every_plot_has_a_text_alternative_from_what_it_shows(phone_visits):
    alts = [(p, alt) for p, v in phone_visits.items() for alt in v["plotAlts"]]
    assert len(alts) > 10
    bad = [(p, alt) for p, alt in alts if alt.strip().lower() in a11y.GENERIC_ALTS or len(alt) < 25]
    assert not bad, bad


def test_on_a_phone_the_menu_opens_and_a_lesson_link_in_it_works(visits, server, phone_page, screenshots):
    lessons = _teaching_paths(visits)
    assert not _open(phone_page, server, lessons[0])
    phone_page.screenshot(path=str(screenshots / "site-phone-lesson.png"))
    link = phone_page.locator(f'.bd-sidebar-primary a[href$="{lessons[1].rsplit("/", 1)[-1]}"]').first
    assert link.is_hidden()
    phone_page.locator("button.primary-toggle").first.click()
    link.wait_for(state="visible")
    phone_page.wait_for_function("() => document.querySelector('.bd-sidebar-primary').getBoundingClientRect().left >= 0")
    phone_page.screenshot(path=str(screenshots / "site-phone-menu.png"))
    link.click()
    phone_page.wait_for_url("**/" + lessons[1])
    assert phone_page.locator("article.bd-article h1").first.is_visible()
    assert not _open(phone_page, server, "docs/glossary.html")  # the other reference page at 390 px (atlas: above)
    phone_page.screenshot(path=str(screenshots / "site-glossary-390.png"))

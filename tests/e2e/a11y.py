"""Phone-width and accessibility checks of the course website (helpers of test_site.py).

axe-core comes from the pinned PyPI package axe-playwright-python (its wheel ships axe.min.js, MPL-2.0); the
script is injected into the page (no request), and only violations with "serious" or "critical" impact fail.
"""

from __future__ import annotations

from collections import Counter
from importlib import resources

PHONE = {"width": 390, "height": 844}
BLOCKING = ("serious", "critical")
GENERIC_ALTS = {"", "image", "png", "plot", "figure", "biểu đồ", "hình", "<figure>"}
AXE_JS = (resources.files("axe_playwright_python") / "axe.min.js").read_text(encoding="utf-8")
# preload: false: axe would re-fetch every stylesheet and resolve its @import against the page (a 404 here); at
# the second width the colours are the same, so color-contrast (axe's slowest rule) runs at the first only.
RUN_AXE = """async (again) => {
  const options = {resultTypes: ['violations'], preload: false, rules: {'color-contrast': {enabled: !again}}};
  const results = await axe.run(document, options);
  return results.violations.map((v) => ({id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' '))}));
}"""
# The page's width, what sticks out past a phone's screen (outermost, not inside a scrolling box, not fixed; a
# phone would widen its layout to fit, so compare with the screen, not innerWidth), the plots' alt text.
READ_PHONE = """(screen) => {
  const out = (e) => e.getBoundingClientRect().right > screen + 1 && getComputedStyle(e).position !== 'fixed';
  const inScroller = (e) => { for (let x = e.parentElement; x && x !== document.body; x = x.parentElement) {
    if (getComputedStyle(x).overflowX !== 'visible') { return true; } } return false; };
  const wide = [...document.querySelectorAll('body *')].filter((e) => out(e) && !inScroller(e)
    && !(e.parentElement && out(e.parentElement)));
  return {
    scrollWidth: document.documentElement.scrollWidth, screen,
    sticksOut: wide.slice(0, 5).map((e) => `${e.tagName.toLowerCase()}.${[...e.classList].join('.')}`),
    plotAlts: [...document.querySelectorAll('.cell_output img')].map((i) => i.getAttribute('alt') || ''),
  };
}"""


def audit(page, again: bool = False) -> list[dict]:
    """Return axe-core's violations on the page open in `page`: [{id, impact, nodes: [CSS selector]}].

    `again`: the page was audited at another width already (colour contrast is not checked twice).
    """
    page.add_script_tag(content=AXE_JS)
    return page.evaluate(RUN_AXE, again)


def count(violations_by_page: dict[str, list[dict]]) -> str:
    """Return "impact: rules/elements" over every page, e.g. "serious: 0 rules, moderate: 1 rule on 24 elements"."""
    rules: Counter = Counter()
    nodes: Counter = Counter()
    for violations in violations_by_page.values():
        for v in violations:
            rules[(v["impact"], v["id"])] += 1
            nodes[v["impact"]] += len(v["nodes"])
    impacts = sorted(nodes, key=["critical", "serious", "moderate", "minor"].index)
    return ", ".join(f"{i} {nodes[i]} elements ({', '.join(r for (k, r) in rules if k == i)})"
                     for i in impacts) or "none"


def blocking(violations_by_page: dict[str, list[dict]]) -> list[str]:
    """Return one line per serious or critical violation."""
    return [f"{path}: {v['impact']} {v['id']}: {', '.join(v['nodes'][:3])}" for path, violations in
            violations_by_page.items() for v in violations if v["impact"] in BLOCKING]

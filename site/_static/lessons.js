/* Course website. The left sidebar (course title, search, lessons) is one navigation landmark, so no content is
   outside a landmark (axe: region). A region that scrolls sideways (a wide table, a long formula, on a phone) can be reached and
   scrolled with the keyboard and is named for screen readers, as the theme already does for code and outputs. */
(() => {
  const SCROLLERS = ".bd-article .pst-scrollable-table-container, .bd-article mjx-container[display='true']";
  const mark = () => document.querySelectorAll(SCROLLERS).forEach((el) => {
    if (el.scrollWidth > el.clientWidth) {
      el.tabIndex = 0;
      el.setAttribute("role", "region");
      el.setAttribute("aria-label", el.tagName === "MJX-CONTAINER" ? "Công thức (cuộn ngang)" : "Bảng (cuộn ngang)");
    } else if (el.hasAttribute("role")) {
      ["tabindex", "role", "aria-label"].forEach((name) => el.removeAttribute(name));
    }
  });
  let timer = null;
  window.addEventListener("resize", () => { clearTimeout(timer); timer = setTimeout(mark, 200); });
  window.addEventListener("load", () => {
    const sidebar = document.querySelector(".bd-sidebar-primary");
    if (sidebar) { sidebar.setAttribute("role", "navigation"); sidebar.setAttribute("aria-label", "Khoá học"); }
    mark();
    if (window.MathJax && MathJax.startup && MathJax.startup.promise) { MathJax.startup.promise.then(mark); }
  });
})();

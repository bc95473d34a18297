"""Show an ipywidgets box with a plain-text fallback, on ipywidgets 7.7.1 (Colab) and 8.x alike.

A widget may also carry static HTML for pages without a kernel (the course website). It goes in the output's
metadata under ``STATIC_HTML_KEY``, never in the data bundle, so Jupyter, Colab and VS Code render exactly what
they rendered before (their choice between text/html and a widget view differs); the site build moves it into
``text/html``.
"""

from __future__ import annotations

STATIC_HTML_KEY = "lessons_lib"  # output metadata: {"lessons_lib": {"static_html": "<div>...</div>"}}


def _widget_frontend_possible() -> bool:
    """Return True when code runs in an IPython kernel that can talk to a widget frontend."""
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def show_widget(make_box, text: str, static_html: str | None = None) -> None:
    """Display the box `make_box()` builds, with `text` as its plain-text form; print `text` outside a kernel.

    `static_html` is stored in the output's metadata for a static page of the executed notebook.
    """
    if not _widget_frontend_possible():
        print(text)
        return
    from IPython.display import display

    box = make_box()
    bundle = {
        "text/plain": text,
        "application/vnd.jupyter.widget-view+json": {"version_major": 2, "version_minor": 0, "model_id": box.model_id},
    }
    display(bundle, raw=True, metadata={STATIC_HTML_KEY: {"static_html": static_html}} if static_html else None)

"""Show an ipywidgets box with a plain-text fallback, on ipywidgets 7.7.1 (Colab) and 8.x alike."""

from __future__ import annotations

STATIC_HTML_KEY = "lessons_lib"  # output metadata: {"lessons_lib": {"static_html": "<div>...</div>"}}


def _widget_frontend_possible() -> bool:
    """Return True when code runs in an IPython kernel that can talk to a widget frontend."""
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def show_widget(make_box, text: str, static_html: str | None = None) -> None:
    """Display `make_box()` with `text` as its plain-text form (printed outside a kernel) and `static_html`."""
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

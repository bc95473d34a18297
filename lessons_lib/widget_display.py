"""Show an ipywidgets box with a plain-text fallback, on ipywidgets 7.7.1 (Colab) and 8.x alike."""

from __future__ import annotations


def widget_frontend_possible() -> bool:
    """Return True when code runs in an IPython kernel that can talk to a widget frontend."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def show_widget(make_box, text: str) -> None:
    """Display the box `make_box()` builds, with `text` as the plain-text form; print `text` outside a kernel.

    Args:
        make_box: A function returning the ipywidgets box (called only when a kernel is there).
        text: What frontends without widget support (and plain Python) show instead.
    """
    if not callable(make_box):
        raise TypeError(f"make_box must be a function that returns a widget, got {type(make_box).__name__}")
    if not isinstance(text, str):
        raise TypeError(f"text must be a str (the plain-text fallback), got {type(text).__name__}")
    if not widget_frontend_possible():
        print(text)
        return
    from IPython.display import display

    box = make_box()
    bundle = {
        "text/plain": text,
        "application/vnd.jupyter.widget-view+json": {"version_major": 2, "version_minor": 0, "model_id": box.model_id},
    }
    display(bundle, raw=True)

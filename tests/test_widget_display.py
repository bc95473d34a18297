import pytest

from lessons_lib import widget_display


def test_outside_a_kernel_prints_text_and_builds_nothing(capsys):
    built = []
    widget_display.show_widget(lambda: built.append(1), "plain text form")
    assert capsys.readouterr().out.strip() == "plain text form"
    assert built == [] and widget_display._widget_frontend_possible() is False


@pytest.mark.parametrize("static_html", [None, "<p>static</p>"])
def test_in_a_kernel_displays_a_widget_bundle_and_static_html_as_metadata(monkeypatch, static_html):
    import IPython.display
    import ipywidgets

    shown = []
    monkeypatch.setattr(widget_display, "_widget_frontend_possible", lambda: True)
    monkeypatch.setattr(IPython.display, "display",
                        lambda obj, raw=False, metadata=None: shown.append((obj, raw, metadata)))
    box = ipywidgets.VBox([])
    widget_display.show_widget(lambda: box, "fallback", static_html=static_html)
    (bundle, raw, metadata), = shown
    assert raw and bundle["text/plain"] == "fallback"
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == box.model_id
    # no text/html in the bundle: Jupyter, Colab and VS Code keep choosing between the same two forms
    assert set(bundle) == {"text/plain", "application/vnd.jupyter.widget-view+json"}
    assert metadata == (static_html and {widget_display.STATIC_HTML_KEY: {"static_html": static_html}})


def test_static_html_in_a_real_kernel_shell_output(monkeypatch):
    """Through IPython's real display machinery, the metadata reaches the published output."""
    import ipywidgets
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    published = []
    monkeypatch.setattr(shell.display_pub, "publish",
                        lambda data, metadata=None, **kwargs: published.append((data, metadata)))
    monkeypatch.setattr(widget_display, "_widget_frontend_possible", lambda: True)
    widget_display.show_widget(lambda: ipywidgets.VBox([]), "fallback", static_html="<p>s</p>")
    (data, metadata), = published
    assert data["text/plain"] == "fallback" and metadata["lessons_lib"]["static_html"] == "<p>s</p>"

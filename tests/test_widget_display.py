import pytest

from lessons_lib import widget_display


def test_outside_a_kernel_prints_text_and_builds_nothing(capsys):
    built = []
    widget_display.show_widget(lambda: built.append(1), "plain text form")
    assert capsys.readouterr().out.strip() == "plain text form"
    assert built == [] and widget_display.widget_frontend_possible() is False


def test_in_a_kernel_displays_a_widget_bundle(monkeypatch):
    import IPython.display
    import ipywidgets

    shown = []
    monkeypatch.setattr(widget_display, "widget_frontend_possible", lambda: True)
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False: shown.append((obj, raw)))
    box = ipywidgets.VBox([])
    widget_display.show_widget(lambda: box, "fallback")
    (bundle, raw), = shown
    assert raw and bundle["text/plain"] == "fallback"
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == box.model_id


@pytest.mark.parametrize("make_box, text, match", [(None, "t", "make_box"), (lambda: None, 3, "text")])
def test_rejects_bad_arguments(make_box, text, match):
    with pytest.raises(TypeError, match=match):
        widget_display.show_widget(make_box, text)

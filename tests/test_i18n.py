import pytest

from lessons_lib import i18n


def test_default_is_vietnamese_and_english_switch_works():
    assert i18n.tr("xin chào", "hello") == "xin chào"
    i18n.set_language("en")
    assert i18n.get_language() == "en"
    assert i18n.tr("xin chào", "hello") == "hello"


@pytest.mark.parametrize("bad, error", [(1, TypeError), ("fr", ValueError), ("", ValueError)])
def test_set_language_rejects_bad_input(bad, error):
    with pytest.raises(error, match="language"):
        i18n.set_language(bad)

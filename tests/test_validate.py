import math

import pytest

from lessons_lib._validate import check_int, check_number


def test_check_int_returns_the_value():
    assert check_int("n", 3) == 3
    assert check_int("n", 0, minimum=0) == 0


@pytest.mark.parametrize("value, minimum, error, match", [
    (True, None, TypeError, "n must be an int"),
    (2.0, None, TypeError, "n must be an int"),
    (0, 1, ValueError, "n must be >= 1, got 0"),
])
def test_check_int_rejects(value, minimum, error, match):
    from lessons_lib import i18n

    i18n.set_language("en")
    with pytest.raises(error, match=match):
        check_int("n", value, minimum)


def test_check_number_accepts_ints_and_floats():
    assert check_number("x", 0) == 0
    assert check_number("x", 2.5, positive=True) == 2.5
    assert check_number("x", -1.0, minimum=-2) == -1.0


@pytest.mark.parametrize("value, kwargs, error, match", [
    ("1", {}, TypeError, "x must be a number"),
    (False, {}, TypeError, "x must be a number"),
    (math.nan, {}, ValueError, "x must be finite"),
    (math.inf, {"positive": True}, ValueError, "positive finite"),
    (0, {"positive": True}, ValueError, "positive finite"),
    (-1, {"minimum": 0}, ValueError, "x must be >= 0"),
])
def test_check_number_rejects(value, kwargs, error, match):
    from lessons_lib import i18n

    i18n.set_language("en")
    with pytest.raises(error, match=match):
        check_number("x", value, **kwargs)


def test_messages_are_vietnamese_by_default():
    with pytest.raises(ValueError, match="phải là số dương hữu hạn"):
        check_number("x", 0, positive=True)

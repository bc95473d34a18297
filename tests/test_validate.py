import math

import pytest

from lessons_lib._validate import check_int, check_number


def test_the_checks_return_what_they_accept():
    assert check_int("n", 3) == 3 and check_int("n", 0, minimum=0) == 0
    assert check_number("x", 0) == 0 and check_number("x", 2.5, positive=True) == 2.5
    assert check_number("x", -1.0, minimum=-2) == -1.0


@pytest.mark.parametrize("value, minimum, error, match", [
    (True, None, TypeError, "n phải là số nguyên"),
    (2.0, None, TypeError, "n phải là số nguyên"),
    (0, 1, ValueError, "n phải ≥ 1, nhận được 0"),
])
def test_check_int_rejects(value, minimum, error, match):
    with pytest.raises(error, match=match):
        check_int("n", value, minimum)


@pytest.mark.parametrize("value, kwargs, error, match", [
    ("1", {}, TypeError, "x phải là một số"),
    (False, {}, TypeError, "x phải là một số"),
    (math.nan, {}, ValueError, "x phải là số hữu hạn"),
    (math.inf, {"positive": True}, ValueError, "số dương hữu hạn"),
    (0, {"positive": True}, ValueError, "số dương hữu hạn"),
    (-1, {"minimum": 0}, ValueError, "x phải ≥ 0"),
])
def test_check_number_rejects(value, kwargs, error, match):
    with pytest.raises(error, match=match):
        check_number("x", value, **kwargs)

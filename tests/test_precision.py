import math

import pytest
import torch

from lessons_lib.precision import Table, _round_trip, facts_table, format_facts, format_name, round_trip_table


@pytest.mark.parametrize(
    ("given", "name"),
    [("fp16", "fp16"), ("half", "fp16"), ("torch.float16", "fp16"), (" BF16 ", "bf16"), ("bfloat16", "bf16"),
     ("float32", "fp32"), (torch.float32, "fp32"), (torch.bfloat16, "bf16"), (torch.float16, "fp16")],
)
def test_format_name_accepts_aliases_and_dtypes(given, name):
    assert format_name(given) == name


def test_format_name_rejects_bad_input():
    with pytest.raises(TypeError, match="'fp16'"):
        format_name(16)
    with pytest.raises(ValueError, match="'fp32', 'fp16' hoặc 'bf16'"):
        format_name("fp8")
    with pytest.raises(ValueError, match="torch.float16"):
        format_name(torch.int32)


@pytest.mark.parametrize(
    ("name", "exponent", "mantissa", "max_value"),
    [("fp32", 8, 23, 3.4028234663852886e38), ("fp16", 5, 10, 65504.0), ("bf16", 8, 7, 3.3895313892515355e38)],
)
def test_format_facts_match_ieee_layouts(name, exponent, mantissa, max_value):
    f = format_facts(name)
    assert (f.bits, f.exponent_bits, f.mantissa_bits) == (1 + exponent + mantissa, exponent, mantissa)
    assert f.max == max_value
    assert f.eps == 2.0 ** -mantissa
    assert f.smallest_subnormal == f.smallest_normal * 2.0 ** -mantissa
    assert f.decimal_digits == pytest.approx(mantissa * math.log10(2))


def test_fp16_limits_are_the_known_ones():
    f = format_facts(torch.float16)
    assert f.smallest_normal == 2.0 ** -14
    assert f.smallest_subnormal == 2.0 ** -24


def test_round_trip_shows_overflow_underflow_and_rounding():
    assert _round_trip(70000, "fp16") == math.inf
    assert _round_trip(1e-8, "fp16") == 0.0
    assert _round_trip(1e-8, "bf16") == pytest.approx(1e-8, rel=1e-2)
    assert _round_trip(70000, "bf16") == 70144.0
    assert _round_trip(257, "bf16") == 256.0
    assert _round_trip(2049, "fp16") == 2048.0
    assert _round_trip(2049, "fp32") == 2049.0


def test_round_trip_table_rejects_bad_input():
    with pytest.raises(TypeError, match="số"):
        round_trip_table(["1.0"])
    with pytest.raises(TypeError, match="số"):
        round_trip_table([True])


def test_facts_table_has_one_row_per_format():
    table = facts_table()
    assert [row[0] for row in table.rows] == ["fp32", "fp16", "bf16"]
    assert table.rows[1][4] == "65504"
    assert len(table.headers) == len(table.rows[0])


def test_round_trip_table_values():
    table = round_trip_table([70000, 1e-8])
    assert table.headers[1:] == ("fp32", "fp16", "bf16")
    assert table.rows[0][2] == "inf" and table.rows[1][2] == "0"


def test_tables_reject_empty_and_bad_values():
    with pytest.raises(TypeError, match="values"):
        round_trip_table("70000")
    with pytest.raises(ValueError, match="values"):
        round_trip_table([])


def test_table_prints_aligned_columns():
    text = str(Table(("a", "bb"), (("xxx", "y"), ("z", "w"))))
    lines = text.splitlines()
    assert lines[0] == "a    bb"
    assert lines[1] == "---  --"
    assert lines[2] == "xxx  y"
    assert all(line == line.rstrip() for line in lines)

import pytest
import torch

from lessons_lib.precision import Table, format_name, to_dtype


@pytest.mark.parametrize(
    ("given", "name"),
    [("fp16", "fp16"), ("torch.float16", "fp16"), (" BF16 ", "bf16"), ("bfloat16", "bf16"),
     ("float32", "fp32"), (torch.float32, "fp32"), (torch.bfloat16, "bf16"), (torch.float16, "fp16")],
)
def test_format_name_accepts_aliases_and_dtypes(given, name):
    assert format_name(given) == name
    assert format_name(to_dtype(given)) == name


@pytest.mark.parametrize(
    ("given", "error", "names"),
    [(16, TypeError, "'fp16'"), ("fp8", ValueError, "'fp32', 'fp16' hoặc 'bf16'"),
     (torch.int32, ValueError, "torch.float16")],
)
def test_format_name_rejects_bad_input(given, error, names):
    with pytest.raises(error, match=names):
        format_name(given)


def test_table_prints_aligned_columns():
    table = Table(("a", "bb"), (("xxx", "y"), ("z", "w")))
    assert str(table).splitlines() == ["a    bb", "---  --", "xxx  y", "z    w"]
    assert repr(table) == str(table)

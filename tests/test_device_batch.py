"""to_device() moves nested batches; describe() tables where tensors live and flags the odd ones out."""

from __future__ import annotations

import collections
import dataclasses
import types
from collections.abc import Mapping

import pytest
import torch
import torch.nn as nn
from IPython.lib.pretty import pretty
from torch.nn.utils.rnn import pack_padded_sequence
from torch.overrides import TorchFunctionMode

from lessons_lib.device import describe, to_device
from lessons_lib.placement import DeviceReport

Pair = collections.namedtuple("Pair", "image label")


@dataclasses.dataclass
class Sample:
    pixels: torch.Tensor
    name: str
    extra: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class FrozenSample:
    pixels: torch.Tensor
    weight: float


class ReadOnlyMapping(Mapping):
    """A mapping that cannot be rebuilt from a dict (its constructor takes no arguments)."""

    def __init__(self):
        self._data = {"x": torch.ones(2)}

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


def _batch():
    return {
        "pixels": torch.rand(2, 3),
        "labels": torch.tensor([0, 1]),
        "pairs": [Pair(torch.rand(2), "cat"), Pair(torch.rand(2), "dog")],
        "tuple": (torch.zeros(1), "s", 3),
        "sample": Sample(torch.ones(2), "a", [torch.ones(1)]),
        "frozen": FrozenSample(torch.ones(2), 0.5),
        "ordered": collections.OrderedDict(b=torch.ones(1), a=torch.zeros(1)),
        "default": collections.defaultdict(list, {"k": torch.ones(1)}),
        "proxy": types.MappingProxyType({"p": torch.ones(1)}),
        "none": None,
        "number": 1.5,
    }


def _tensors(obj):
    """Return every tensor in a nested batch, depth first."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, Mapping):
        return [t for v in obj.values() for t in _tensors(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _tensors(v)]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [t for f in dataclasses.fields(obj) for t in _tensors(getattr(obj, f.name))]
    return []


# --------------------------------------------------------------------------- to_device


def test_to_device_moves_every_tensor_and_keeps_every_container_type_shape_and_dtype():
    batch = _batch()
    moved = to_device(batch, torch.device("meta"))
    assert type(moved) is dict and list(moved) == list(batch)
    assert all(t.device.type == "meta" for t in _tensors(moved))
    assert len(_tensors(moved)) == len(_tensors(batch)) == 12
    assert type(moved["pairs"]) is list and type(moved["pairs"][0]) is Pair
    assert moved["pairs"][1].label == "dog"
    assert type(moved["tuple"]) is tuple and moved["tuple"][1:] == ("s", 3)
    assert type(moved["sample"]) is Sample and moved["sample"].name == "a"
    assert moved["sample"].extra[0].device.type == "meta"
    assert type(moved["frozen"]) is FrozenSample and moved["frozen"].weight == 0.5
    assert type(moved["ordered"]) is collections.OrderedDict and list(moved["ordered"]) == ["b", "a"]
    assert type(moved["default"]) is collections.defaultdict and moved["default"].default_factory is list
    assert isinstance(moved["proxy"], types.MappingProxyType)
    assert moved["none"] is None and moved["number"] == 1.5
    assert [(t.dtype, t.shape) for t in _tensors(moved)] == [(t.dtype, t.shape) for t in _tensors(batch)]
    assert all(t.device.type == "cpu" for t in _tensors(batch))  # the original is left alone
    assert moved["pairs"] is not batch["pairs"] and moved["sample"] is not batch["sample"]


def test_to_device_round_trip_to_the_same_device_keeps_values_and_tensor_objects():
    batch = _batch()
    back = to_device(batch, "cpu")
    assert [t is u for t, u in zip(_tensors(batch), _tensors(back), strict=True)] == [True] * 12
    assert all(torch.equal(t, u) for t, u in zip(_tensors(batch), _tensors(back), strict=True))
    assert back["pairs"][0].label == "cat" and back["tuple"][1] == "s"


def test_to_device_leaves_non_tensors_untouched():
    marker = object()
    moved = to_device({"a": marker, "b": "text", "c": [marker]}, "meta")
    assert moved["a"] is marker and moved["b"] == "text" and moved["c"][0] is marker
    assert to_device(marker, "meta") is marker
    assert to_device(torch.ones(2), "meta").device.type == "meta"  # a bare tensor works too
    moved = to_device(ReadOnlyMapping(), "meta")  # a mapping it cannot rebuild becomes a dict
    assert type(moved) is dict and moved["x"].device.type == "meta"


def test_to_device_moves_packed_sequence_data_but_keeps_batch_sizes_on_cpu():
    padded = torch.rand(3, 2, 4)
    packed = pack_padded_sequence(padded, torch.tensor([3, 2]))
    moved = to_device({"seq": packed}, "meta")["seq"]
    assert type(moved) is type(packed)
    assert moved.data.device.type == "meta"
    assert moved.batch_sizes.device.type == "cpu"


class _RecordTo(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.Tensor.to:
            self.calls.append(kwargs.get("non_blocking"))
        return func(*args, **kwargs)


@pytest.mark.parametrize("flag", [True, False])
def test_to_device_passes_non_blocking_to_every_copy(flag):
    with _RecordTo() as mode:
        to_device({"a": torch.ones(1), "b": [torch.ones(1), torch.ones(1)]}, "meta", non_blocking=flag)
    assert mode.calls == [flag, flag, flag]


# --------------------------------------------------------------------------- describe


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.bn = nn.BatchNorm1d(2)
        self.register_buffer("scale", torch.ones(2))
        self.plain = torch.zeros(2)  # not registered: model.to() leaves it behind

    def forward(self, x):
        return self.bn(self.fc(x)) * self.scale + self.plain


def test_describe_lists_parameters_buffers_and_plain_tensor_attributes():
    report = describe(Net())
    kinds = {row.name: row.kind for row in report.rows}
    assert kinds == {
        "fc.weight": "parameter", "fc.bias": "parameter", "bn.weight": "parameter", "bn.bias": "parameter",
        "scale": "buffer", "bn.running_mean": "buffer", "bn.running_var": "buffer",
        "bn.num_batches_tracked": "buffer", "plain": "attribute",
    }
    row = next(r for r in report.rows if r.name == "fc.weight")
    assert (row.device, row.dtype, row.shape) == ("cpu", "float32", (2, 4))
    assert report.main_device == "cpu" and report.main_dtype == "float32"
    assert report.odd_ones == []  # the int64 counter of BatchNorm is not a dtype outlier


def test_describe_flags_the_attribute_that_model_to_leaves_behind():
    report = describe(Net().to("meta"))
    assert report.main_device == "meta"
    assert [row.name for row in report.odd_ones] == ["plain"]
    odd = report.odd_ones[0]
    assert odd.odd_device and not odd.odd_dtype and odd.device == "cpu"
    assert collections.Counter(row.device for row in report.rows) == {"meta": 8, "cpu": 1}
    text = str(report)  # the text table marks the odd row and explains plain attributes
    assert "9 tensor · thiết bị chính: meta · dtype chính: float32" in text
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("plain"))
    assert "cpu ⚠️" in line and "thuộc tính*" in line
    assert "register_buffer" in text
    assert "⚠️ 1 tensor lệch: plain (ở cpu, không phải meta)" in text


def test_describe_flags_a_floating_point_dtype_outlier_but_not_integer_labels():
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
    model[1].double()
    report = describe(model)
    assert [row.name for row in report.odd_ones] == ["1.weight", "1.bias"]
    assert all(row.odd_dtype and not row.odd_device for row in report.odd_ones)
    batch = describe({"x": torch.rand(2, 3), "y": torch.tensor([1, 0])})
    assert batch.odd_ones == [] and batch.main_dtype == "float32"


def test_describe_a_tie_goes_to_the_accelerator_device():
    report = describe({"x": torch.ones(2), "y": torch.ones(2, device="meta")})
    assert report.main_device == "meta"
    assert [row.name for row in report.odd_ones] == ["x"]


def test_describe_nested_batch_names_and_modules_inside_containers():
    report = describe({"model": nn.Linear(2, 2), "batch": [Pair(torch.ones(1, 2, device="meta"), "cat")],
                       "sample": Sample(torch.ones(1), "s"), "meta": {"ids": torch.arange(3)}})
    names = [row.name for row in report.rows]
    assert names == ["model.weight", "model.bias", "batch[0].image", "sample.pixels", "meta.ids"]
    assert [row.name for row in report.odd_ones] == ["batch[0].image"]


def test_describe_a_single_tensor_and_an_empty_container():
    one = describe(torch.ones(2, 2, dtype=torch.float16))
    assert [(r.name, r.kind, r.dtype) for r in one.rows] == [("tensor", "tensor", "float16")]
    empty = describe([1, "a", None])
    assert empty.rows == [] and empty.main_device is None and empty.odd_ones == []
    assert "Không tìm thấy tensor nào" in str(empty)


def test_describe_html_highlights_only_odd_rows_and_escapes_names():
    html = describe({"<x>": torch.ones(1), "y": torch.ones(1, device="meta"), "z": torch.ones(1, device="meta")})._repr_html_()
    assert "&lt;x&gt;" in html and "<x>" not in html
    assert html.count("background:#fde2e1") == 1
    assert html.startswith("<p>") and "<table>" in html


def test_describe_returns_a_report_usable_by_ipython():
    report = describe(nn.Linear(2, 2))
    assert isinstance(report, DeviceReport)
    assert pretty(report) == str(report) == repr(report) and "✅" in str(report)


_LOOP = [torch.ones(1)]
_LOOP.append(_LOOP)


@pytest.mark.parametrize("call, error, named", [
    *[((to_device, torch.ones(1), device), TypeError, "device") for device in (0, None, 1.5, ["cpu"])],
    *[((to_device, torch.ones(1), device), ValueError, repr(device)) for device in ("gpu", "cuda:x", "")],
    ((to_device, torch.ones(1), "cpu", "yes"), TypeError, "non_blocking"),
    ((to_device, _LOOP, "meta"), ValueError, "chính nó"),
    *[((describe, bad), TypeError, type(bad).__name__) for bad in (5, "model", None, 2.0, object())],
])
def test_argument_checks_name_what_to_pass(call, error, named):
    fn, *args = call
    with pytest.raises(error) as raised:
        fn(*args)
    assert named in str(raised.value)

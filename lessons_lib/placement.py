"""Move nested batches between devices (`to_device`) and show where a model's tensors live (`describe`)."""

from __future__ import annotations

import collections
import copy
import dataclasses
import html
from collections.abc import Mapping
from dataclasses import dataclass

import torch


def _is_namedtuple(obj: object) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def _is_container(obj: object) -> bool:
    return isinstance(obj, (Mapping, list, tuple)) or (dataclasses.is_dataclass(obj) and not isinstance(obj, type))


def _rebuild(obj, values):
    """Return a container of `obj`'s type holding `values` (a dict for a mapping, else a list)."""
    if isinstance(obj, collections.defaultdict):
        return type(obj)(obj.default_factory, values)
    if _is_namedtuple(obj):
        return type(obj)(*values)
    try:
        return type(obj)(values)
    except TypeError:  # a type that cannot be built from a dict / list
        return tuple(values) if isinstance(obj, tuple) else values


def _map_tensors(obj, fn, active: set[int]):
    """Return `obj` with `fn` applied to every tensor inside dicts, lists, tuples and dataclasses."""
    from torch.nn.utils.rnn import PackedSequence

    if isinstance(obj, (torch.Tensor, PackedSequence)):
        return fn(obj)
    if not _is_container(obj):
        return obj
    if id(obj) in active:
        raise ValueError("batch chứa chính nó (vòng lặp); không thể chuyển.")
    active.add(id(obj))
    try:
        if isinstance(obj, Mapping):
            return _rebuild(obj, {key: _map_tensors(value, fn, active) for key, value in obj.items()})
        if isinstance(obj, (list, tuple)):
            return _rebuild(obj, [_map_tensors(value, fn, active) for value in obj])
        moved = copy.copy(obj)  # dataclass: a shallow copy whose fields are then replaced
        for f in dataclasses.fields(obj):
            object.__setattr__(moved, f.name, _map_tensors(getattr(obj, f.name), fn, active))
        return moved
    finally:
        active.discard(id(obj))


def to_device(batch, device: str | torch.device, non_blocking: bool = False):
    """Return a copy of `batch` (nested mappings, sequences, dataclasses) with every tensor moved to `device`."""
    from .device import as_device  # device imports this module: import it when called

    target = as_device(device, "device", "'cpu', 'cuda', 'cuda:0', 'mps', 'meta'")
    if not isinstance(non_blocking, bool):
        raise TypeError(f"non_blocking phải là True hoặc False, không phải {type(non_blocking).__name__}")
    return _map_tensors(batch, lambda t: t.to(target, non_blocking=non_blocking), set())


@dataclass(frozen=True)
class TensorPlace:
    """Where one tensor of a model or batch lives, and whether it disagrees with the majority."""

    name: str
    kind: str  # "parameter", "buffer", "attribute" (a plain, unregistered tensor attribute) or "tensor"
    device: str
    dtype: str
    shape: tuple[int, ...]
    odd_device: bool = False
    odd_dtype: bool = False

    @property
    def odd(self) -> bool:
        """Return True when the device or the (floating-point) dtype differs from the majority."""
        return self.odd_device or self.odd_dtype

    def _cells(self) -> tuple[str, ...]:
        return (self.name, _KIND_LABELS[self.kind], self.device + (" ⚠️" if self.odd_device else ""),
                self.dtype + (" ⚠️" if self.odd_dtype else ""), str(tuple(self.shape)))


_KIND_LABELS = {"parameter": "tham số", "buffer": "buffer", "attribute": "thuộc tính*", "tensor": "tensor"}
_HEADER = ("tên", "loại", "thiết bị", "dtype", "shape")


@dataclass(repr=False)
class DeviceReport:
    """The table `describe()` returns: one `TensorPlace` per tensor, the majority device/dtype, the odd ones."""

    rows: list[TensorPlace]
    main_device: str | None
    main_dtype: str | None

    @property
    def odd_ones(self) -> list[TensorPlace]:
        """Return the tensors whose device or floating-point dtype disagrees with the majority."""
        return [row for row in self.rows if row.odd]

    def _header(self) -> str:
        if not self.rows:
            return "Không tìm thấy tensor nào."
        dtype = f" · dtype chính: {self.main_dtype}" if self.main_dtype else ""
        return f"{len(self.rows)} tensor · thiết bị chính: {self.main_device}{dtype}"

    def _verdict(self) -> str:
        if not self.odd_ones:
            return "✅ Mọi tensor cùng thiết bị và dtype."
        parts = []
        for row in self.odd_ones:
            what = ([f"ở {row.device}, không phải {self.main_device}"] if row.odd_device else []) + (
                [f"dtype {row.dtype}, không phải {self.main_dtype}"] if row.odd_dtype else [])
            parts.append(f"{row.name} ({', '.join(what)})")
        return f"⚠️ {len(parts)} tensor lệch: " + "; ".join(parts)

    def __repr__(self) -> str:
        lines = [self._header()]
        if not self.rows:
            return lines[0]
        table = [_HEADER] + [r._cells() for r in self.rows]
        widths = [max(len(row[i]) for row in table) for i in range(len(_HEADER))]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table]
        if any(r.kind == "attribute" for r in self.rows):
            lines.append("  * tensor gán thẳng làm thuộc tính (không đăng ký): model.to() không di chuyển nó; "
                         "dùng self.register_buffer(...).")
        return "\n".join([*lines, self._verdict()])

    def _repr_html_(self) -> str:
        def esc(text: str) -> str:
            return html.escape(str(text), quote=False)

        if not self.rows:
            return f"<p>{esc(self._header())}</p>"
        head = "".join(f"<th>{esc(h)}</th>" for h in _HEADER)
        odd = ' style="background:#fde2e1"'
        body = "".join(f"<tr{odd if r.odd else ''}>" + "".join(f"<td><code>{esc(c)}</code></td>" for c in r._cells())
                       + "</tr>" for r in self.rows)
        return (f"<p>{esc(self._header())}</p><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
                f"<p>{esc(self._verdict())}</p>")


def _collect(obj, prefix: str, out: list, active: set[int]) -> None:
    """Append (name, kind, tensor) for every tensor in `obj` (a module, tensor or nested container)."""
    def join(name) -> str:
        return f"{prefix}.{name}" if prefix else str(name)

    if isinstance(obj, torch.nn.Module):
        out += [(join(name), "parameter", t) for name, t in obj.named_parameters()]
        out += [(join(name), "buffer", t) for name, t in obj.named_buffers()]
        out += [(join(f"{mod_name}.{attr}" if mod_name else attr), "attribute", value)
                for mod_name, mod in obj.named_modules() for attr, value in vars(mod).items()
                if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter)]
        return
    if isinstance(obj, torch.Tensor):
        out.append((prefix or "tensor", "tensor", obj))
        return
    if id(obj) in active or not _is_container(obj):
        return
    active.add(id(obj))
    if isinstance(obj, Mapping):
        children = [(join(key), value) for key, value in obj.items()]
    elif _is_namedtuple(obj):
        children = [(join(key), value) for key, value in zip(obj._fields, obj, strict=True)]
    elif isinstance(obj, (list, tuple)):
        children = [(f"{prefix}[{i}]", value) for i, value in enumerate(obj)]
    else:
        children = [(join(f.name), getattr(obj, f.name)) for f in dataclasses.fields(obj)]
    for name, value in children:
        _collect(value, name, out, active)
    active.discard(id(obj))


def _majority(values: list[str], prefer=lambda value: False) -> str | None:
    """Return the most common value; ties go to a preferred value, then to the one seen first."""
    if not values:
        return None
    counts = collections.Counter(values)
    tied = [v for v in dict.fromkeys(values) if counts[v] == max(counts.values())]
    return ([v for v in tied if prefer(v)] or tied)[0]


def describe(obj) -> DeviceReport:
    """Return where each tensor of a model, tensor or batch lives, flagging a device or float dtype off the majority."""
    if not isinstance(obj, (torch.nn.Module, torch.Tensor)) and not _is_container(obj):
        raise TypeError("describe() cần một model (nn.Module), một tensor, hoặc dict/list/tuple/dataclass chứa "
                        f"tensor, không phải {type(obj).__name__}")
    found: list = []
    _collect(obj, "", found, set())
    main_device = _majority([str(t.device) for _, _, t in found], prefer=lambda d: not d.startswith("cpu"))

    def dtype(t) -> str:
        return str(t.dtype).replace("torch.", "")

    def is_float(t) -> bool:
        return t.is_floating_point() or t.is_complex()

    main_dtype = _majority([dtype(t) for _, _, t in found if is_float(t)])
    rows = [TensorPlace(name, kind, str(t.device), dtype(t), tuple(t.shape), str(t.device) != main_device,
                        is_float(t) and dtype(t) != main_dtype) for name, kind, t in found]
    return DeviceReport(rows=rows, main_device=main_device, main_dtype=main_dtype)

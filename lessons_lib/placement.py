"""Move nested batches between devices (`to_device`) and show where a model's tensors live (`describe`)."""

from __future__ import annotations

import collections
import copy
import dataclasses
import html
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from .i18n import tr


def _as_device(device: object) -> torch.device:
    """Return `device` as a torch.device, or raise a clear TypeError/ValueError."""
    if not isinstance(device, (str, torch.device)):
        raise TypeError(
            tr(
                f"device phải là str (vd 'cuda', 'cpu', 'cuda:1') hoặc torch.device, không phải {type(device).__name__}",
                f"device must be a str (e.g. 'cuda', 'cpu', 'cuda:1') or a torch.device, not {type(device).__name__}",
            )
        )
    try:
        return torch.device(device)
    except (RuntimeError, ValueError):
        raise ValueError(
            tr(
                f"Không hiểu thiết bị {device!r}. Ví dụ hợp lệ: 'cpu', 'cuda', 'cuda:0', 'mps'.",
                f"Unknown device {device!r}. Valid examples: 'cpu', 'cuda', 'cuda:0', 'mps'.",
            )
        ) from None


def _is_namedtuple(obj: object) -> bool:
    return isinstance(obj, tuple) and hasattr(type(obj), "_fields")


def _is_dataclass_instance(obj: object) -> bool:
    return dataclasses.is_dataclass(obj) and not isinstance(obj, type)


def _rebuild_mapping(obj, items: dict):
    if isinstance(obj, collections.defaultdict):
        return type(obj)(obj.default_factory, items)
    try:
        return type(obj)(items)
    except TypeError:  # a mapping type that cannot be built from a dict
        return items


def _rebuild_sequence(obj, values: list):
    if _is_namedtuple(obj):
        return type(obj)(*values)
    if type(obj) in (list, tuple):
        return type(obj)(values)
    try:
        return type(obj)(values)
    except TypeError:
        return tuple(values) if isinstance(obj, tuple) else values


def _map_tensors(obj, fn, active: set[int]):
    """Return `obj` with `fn` applied to every tensor inside dicts, lists, tuples and dataclasses."""
    from torch.nn.utils.rnn import PackedSequence

    if isinstance(obj, (torch.Tensor, PackedSequence)):
        return fn(obj)
    is_container = isinstance(obj, (Mapping, list, tuple)) or _is_dataclass_instance(obj)
    if not is_container:
        return obj
    if id(obj) in active:
        raise ValueError(tr("batch chứa chính nó (vòng lặp); không thể chuyển.", "the batch contains itself (a cycle)."))
    active.add(id(obj))
    try:
        if isinstance(obj, Mapping):
            return _rebuild_mapping(obj, {key: _map_tensors(value, fn, active) for key, value in obj.items()})
        if isinstance(obj, (list, tuple)):
            return _rebuild_sequence(obj, [_map_tensors(value, fn, active) for value in obj])
        moved = copy.copy(obj)  # dataclass: a shallow copy whose fields are then replaced
        for f in dataclasses.fields(obj):
            object.__setattr__(moved, f.name, _map_tensors(getattr(obj, f.name), fn, active))
        return moved
    finally:
        active.discard(id(obj))


def to_device(batch, device: str | torch.device, non_blocking: bool = False):
    """Return a copy of `batch` with every tensor moved to `device`; everything else is left as it is.

    Tensors may sit at any depth inside dicts (and other mappings), lists, tuples, namedtuples and
    dataclass instances; the containers are rebuilt with the same types. A ``PackedSequence`` is moved
    with its own ``.to()`` (its ``batch_sizes`` stay on the CPU, as PyTorch requires).

    Args:
        batch: A tensor or a nested container of tensors, e.g. ``{"x": x, "y": y}`` or ``(x, y)``.
        device: Where to put the tensors: "cpu", "cuda", "cuda:1", "mps", "meta" or a ``torch.device``.
        non_blocking: Passed to ``Tensor.to``; with pinned CPU memory the copy to a GPU can overlap
            other work (call ``torch.cuda.synchronize()`` before timing it).

    Returns:
        The moved batch: new containers, tensors from ``Tensor.to`` (the same tensor object when it
        already was on `device`), non-tensor values unchanged.

    Raises:
        TypeError: `device` is not a str / torch.device, or `non_blocking` is not a bool.
        ValueError: `device` is not a device name, or the batch contains itself.
    """
    target = _as_device(device)
    if not isinstance(non_blocking, bool):
        raise TypeError(
            tr(
                f"non_blocking phải là True hoặc False, không phải {type(non_blocking).__name__}",
                f"non_blocking must be True or False, not {type(non_blocking).__name__}",
            )
        )
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


_KIND_LABELS = {
    "parameter": ("tham số", "parameter"),
    "buffer": ("buffer", "buffer"),
    "attribute": ("thuộc tính*", "attribute*"),
    "tensor": ("tensor", "tensor"),
}


@dataclass
class DeviceReport:
    """The table `describe()` returns: one `TensorPlace` per tensor, the majority device/dtype, the odd ones."""

    rows: list[TensorPlace]
    main_device: str | None
    main_dtype: str | None

    @property
    def odd_ones(self) -> list[TensorPlace]:
        """Return the tensors whose device or floating-point dtype disagrees with the majority."""
        return [row for row in self.rows if row.odd]

    @property
    def devices(self) -> dict[str, int]:
        """Return how many tensors live on each device, e.g. {"cuda:0": 4, "cpu": 1}."""
        return dict(collections.Counter(row.device for row in self.rows))

    def _header(self) -> str:
        if not self.rows:
            return tr("Không tìm thấy tensor nào.", "No tensors found.")
        head = tr(
            f"{len(self.rows)} tensor · thiết bị chính: {self.main_device}",
            f"{len(self.rows)} tensors · main device: {self.main_device}",
        )
        if self.main_dtype:
            head += tr(f" · dtype chính: {self.main_dtype}", f" · main dtype: {self.main_dtype}")
        return head

    def _verdict(self) -> str:
        odd = self.odd_ones
        if not odd:
            return tr("✅ Mọi tensor cùng thiết bị và dtype.", "✅ All tensors share one device and dtype.")
        parts = []
        for row in odd:
            what = []
            if row.odd_device:
                what.append(tr(f"ở {row.device}, không phải {self.main_device}", f"on {row.device}, not {self.main_device}"))
            if row.odd_dtype:
                what.append(tr(f"dtype {row.dtype}, không phải {self.main_dtype}", f"dtype {row.dtype}, not {self.main_dtype}"))
            parts.append(f"{row.name} ({', '.join(what)})")
        return tr(f"⚠️ {len(odd)} tensor lệch: ", f"⚠️ {len(odd)} odd one(s) out: ") + "; ".join(parts)

    def to_text(self, max_rows: int | None = 40) -> str:
        """Return the table as text; beyond `max_rows` rows only the odd ones are listed."""
        if max_rows is not None and (not isinstance(max_rows, int) or isinstance(max_rows, bool) or max_rows < 1):
            raise ValueError(f"max_rows must be a positive int or None, got {max_rows!r}")
        lines = [self._header()]
        if self.rows:
            shown = self.rows if max_rows is None or len(self.rows) <= max_rows else (
                self.rows[:max_rows] + [r for r in self.rows[max_rows:] if r.odd])
            header = (tr("tên", "name"), tr("loại", "kind"), tr("thiết bị", "device"), "dtype", "shape")
            table = [header] + [
                (
                    r.name,
                    tr(*_KIND_LABELS[r.kind]),
                    r.device + (" ⚠️" if r.odd_device else ""),
                    r.dtype + (" ⚠️" if r.odd_dtype else ""),
                    str(tuple(r.shape)),
                )
                for r in shown
            ]
            widths = [max(len(row[i]) for row in table) for i in range(len(header))]
            lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in table]
            if len(shown) < len(self.rows):
                lines.append(tr(f"  … ({len(self.rows) - len(shown)} dòng nữa, không lệch)",
                                f"  … ({len(self.rows) - len(shown)} more rows, none odd)"))
            if any(r.kind == "attribute" for r in self.rows):
                lines.append(tr("  * tensor gán thẳng làm thuộc tính (không đăng ký): model.to() không di chuyển nó; "
                                "dùng self.register_buffer(...).",
                                "  * tensor stored as a plain attribute (not registered): model.to() does not move it; "
                                "use self.register_buffer(...)."))
            lines.append(self._verdict())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return self.to_text()

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython plain-text display
        printer.text(self.to_text())

    def _repr_html_(self) -> str:
        def esc(text: str) -> str:
            return html.escape(str(text), quote=False)

        if not self.rows:
            return f"<p>{esc(self._header())}</p>"
        head = "".join(f"<th>{esc(h)}</th>" for h in (tr("tên", "name"), tr("loại", "kind"), tr("thiết bị", "device"),
                                                       "dtype", "shape"))
        body = []
        for r in self.rows:
            style = ' style="background:#fde2e1"' if r.odd else ""
            cells = (r.name, tr(*_KIND_LABELS[r.kind]), r.device + (" ⚠️" if r.odd_device else ""),
                     r.dtype + (" ⚠️" if r.odd_dtype else ""), str(tuple(r.shape)))
            body.append(f"<tr{style}>" + "".join(f"<td><code>{esc(c)}</code></td>" for c in cells) + "</tr>")
        return (f"<p>{esc(self._header())}</p><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
                f"<p>{esc(self._verdict())}</p>")


def _collect_module(module: torch.nn.Module, prefix: str, out: list) -> None:
    join = (lambda name: f"{prefix}.{name}") if prefix else (lambda name: name)
    for name, tensor in module.named_parameters():
        out.append((join(name), "parameter", tensor))
    for name, tensor in module.named_buffers():
        out.append((join(name), "buffer", tensor))
    for mod_name, mod in module.named_modules():
        for attr, value in vars(mod).items():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                out.append((join(f"{mod_name}.{attr}" if mod_name else attr), "attribute", value))


def _collect(obj, prefix: str, out: list, active: set[int]) -> None:
    if isinstance(obj, torch.nn.Module):
        _collect_module(obj, prefix, out)
        return
    if isinstance(obj, torch.Tensor):
        out.append((prefix or "tensor", "tensor", obj))
        return
    if id(obj) in active:
        return
    active.add(id(obj))
    try:
        if isinstance(obj, Mapping):
            children = [((f"{prefix}.{key}" if prefix else str(key)), value) for key, value in obj.items()]
        elif _is_namedtuple(obj):
            children = [((f"{prefix}.{key}" if prefix else key), value) for key, value in zip(obj._fields, obj, strict=True)]
        elif isinstance(obj, (list, tuple)):
            children = [(f"{prefix}[{i}]", value) for i, value in enumerate(obj)]
        elif _is_dataclass_instance(obj):
            children = [((f"{prefix}.{f.name}" if prefix else f.name), getattr(obj, f.name))
                        for f in dataclasses.fields(obj)]
        else:
            return
        for name, value in children:
            _collect(value, name, out, active)
    finally:
        active.discard(id(obj))


def _majority(values: list[str], prefer=lambda value: False) -> str | None:
    """Return the most common value; ties go to a preferred value, then to the one seen first."""
    if not values:
        return None
    counts = collections.Counter(values)
    best = max(counts.values())
    tied = [v for v in dict.fromkeys(values) if counts[v] == best]
    preferred = [v for v in tied if prefer(v)]
    return (preferred or tied)[0]


def describe(obj) -> DeviceReport:
    """Return a table of where each parameter, buffer and tensor of `obj` lives, flagging the odd ones out.

    `obj` may be a model (``nn.Module``: its parameters, buffers, and tensors stored as plain attributes,
    which ``model.to()`` does not move), a tensor, or a nested batch (dicts, lists, tuples, namedtuples,
    dataclasses; modules inside it are described too). A tensor is odd when its device differs from the
    device most tensors are on (a tie goes to the non-CPU device), or when it is a floating-point tensor
    whose dtype differs from the most common floating-point dtype (integer labels are never odd).

    Returns:
        A ``DeviceReport``: shows as a table in a notebook; ``.odd_ones`` lists the odd tensors.

    Raises:
        TypeError: `obj` is not a module, a tensor or a container (dict, list, tuple, dataclass).
    """
    is_container = isinstance(obj, (Mapping, list, tuple)) or _is_dataclass_instance(obj)
    if not isinstance(obj, (torch.nn.Module, torch.Tensor)) and not is_container:
        raise TypeError(
            tr(
                "describe() cần một model (nn.Module), một tensor, hoặc dict/list/tuple/dataclass chứa tensor, "
                f"không phải {type(obj).__name__}",
                "describe() needs a model (nn.Module), a tensor, or a dict/list/tuple/dataclass holding tensors, "
                f"not {type(obj).__name__}",
            )
        )
    found: list = []
    _collect(obj, "", found, set())
    devices = [str(t.device) for _, _, t in found]
    main_device = _majority(devices, prefer=lambda d: not d.startswith("cpu"))
    floats = [str(t.dtype).replace("torch.", "") for _, _, t in found if t.is_floating_point() or t.is_complex()]
    main_dtype = _majority(floats)
    rows = []
    for name, kind, tensor in found:
        dtype = str(tensor.dtype).replace("torch.", "")
        is_float = tensor.is_floating_point() or tensor.is_complex()
        rows.append(
            TensorPlace(
                name=name,
                kind=kind,
                device=str(tensor.device),
                dtype=dtype,
                shape=tuple(tensor.shape),
                odd_device=str(tensor.device) != main_device,
                odd_dtype=is_float and dtype != main_dtype,
            )
        )
    return DeviceReport(rows=rows, main_device=main_device, main_dtype=main_dtype)

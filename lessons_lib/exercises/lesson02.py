"""Lesson 02's checked tasks: ``add_noise`` makes its noise on x's device, ``move_keep`` moves a nested batch."""

from __future__ import annotations

from collections import namedtuple
from itertools import zip_longest
from types import SimpleNamespace

import torch

from ._core import Exercise, Report, Wrong, raised
from ._tracking import MoveTracker

_META, _CPU = torch.device("meta"), torch.device("cpu")  # meta: a device without data, like a GPU seen from here

_RANDN_LIKE = "torch.randn_like(x)"
_ON_META = (  # what an error of add_noise(x) with x on meta means
    Wrong("copied to the CPU", raised(NotImplementedError, "copy out of meta"),
          "add_noise chép tensor về CPU (.cpu(), .item()…), trên GPU là một lần chép mỗi lần gọi: mọi thứ phải ở lại "
          "thiết bị của x."),
    Wrong("noise made on the CPU", raised(RuntimeError, "device"),
          f"nhiễu được tạo trên CPU, x ở thiết bị khác nên phép cộng báo lỗi: dùng {_RANDN_LIKE} hoặc "
          "device=x.device."),
)
_NOISE_WRONGS = (
    *_ON_META,
    Wrong("moved elsewhere", lambda n: n.result.device != n.x.device,
          lambda n: f"với x ở {n.x.device}, kết quả lại ở {n.result.device}: kết quả phải ở thiết bị của x."),
    Wrong("other shape", lambda n: n.result.shape != n.x.shape, lambda n: (
        f"kết quả có shape {tuple(n.result.shape)}, x có {tuple(n.x.shape)}: nhiễu phải cùng shape với x.")),
    Wrong("float32 noise", lambda n: n.result.dtype != n.x.dtype, lambda n: (
        f"kết quả là {str(n.result.dtype).removeprefix('torch.')}, x là float16: thêm dtype=x.dtype, hoặc dùng "
        f"{_RANDN_LIKE}.")),
    Wrong("made then copied", lambda n: n.copied,
          f"nhiễu được tạo trên CPU rồi mới chép sang (một lần chép mỗi lần gọi): tạo thẳng ở đích, {_RANDN_LIKE}."),
    Wrong("in place", lambda n: n.changed,
          "add_noise sửa x tại chỗ (x += ..., x.add_(...)): trả về tensor MỚI, để nguyên x."),
    Wrong("forgot x", lambda n: abs(n.mean) < 0.1,
          lambda n: f"với x toàn số 3, kết quả có trung bình {n.mean:.2f}: trả về x + std * nhiễu."),
    Wrong("uniform noise", lambda n: abs(n.mean - 3.25) < 0.02 and abs(n.spread - 0.5 / 12**0.5) < 0.02,
          "nhiễu có trung bình 0,25: torch.rand là phân phối đều; nhiễu Gauss là torch.randn / randn_like."),
    Wrong("mean off", lambda n: abs(n.mean - 3.0) > 0.05,
          lambda n: f"với x toàn số 3, kết quả có trung bình {n.mean:.2f}, lẽ ra ≈ 3 (nhiễu có trung bình 0)."),
    Wrong("no std", lambda n: abs(n.spread - 1.0) < 0.05, "nhiễu có độ lệch chuẩn 1 dù std=0.5: nhân nhiễu với std."),
    Wrong("std squared", lambda n: abs(n.spread - 0.25) < 0.03,
          "độ lệch chuẩn của nhiễu là 0,25 với std=0.5: bạn nhân với std**2; hãy nhân với std."),
    Wrong("spread off", lambda n: abs(n.spread - 0.5) > 0.05,
          lambda n: f"với std=0.5, độ lệch chuẩn đo được của nhiễu là {n.spread:.2f}, lẽ ra ≈ 0.5."),
)


def _evaluate_noise(report: Report, add_noise=None) -> None:
    report.require_function(add_noise, "add_noise(x, std)")
    x = torch.zeros(4, 8, device=_META, dtype=torch.float16)
    with MoveTracker() as tracker:
        result = report.call("add_noise(x, 0.1)", add_noise, x, 0.1, mistakes=_ON_META)
    report.require_return(result, "add_noise")
    if not isinstance(result, torch.Tensor):
        report.problem(f"add_noise phải trả về một tensor, không phải {type(result).__name__}.", stop=True)
    copied = any(m.source.device.type == "cpu" and m.target.type == "meta" and m.source.numel() > 1
                 for m in tracker.moves)
    report.diagnose(_NOISE_WRONGS[2:6], SimpleNamespace(x=x, result=result, copied=copied))
    x = torch.full((20_000,), 3.0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        result = report.call("add_noise(x, 0.5)", add_noise, x, 0.5)
    if not isinstance(result, torch.Tensor) or result.shape != x.shape or not result.is_floating_point():
        report.problem("với x = torch.full((20000,), 3.0), kết quả phải là tensor float cùng shape với x.", stop=True)
    report.diagnose(_NOISE_WRONGS[6:], SimpleNamespace(changed=not torch.equal(x, torch.full_like(x, 3.0)),
                                                       mean=float(result.mean()), spread=float(result.std())))
    report.success("nhiễu sinh ngay trên thiết bị và dtype của x, đúng phân phối chuẩn nhân std, x không bị sửa.")
    report.note("Trên GPU: randn_like(x) sinh số ngay trong VRAM, không tốn lần chép CPU → GPU nào.")


task1 = Exercise("task1", "Bài 14.2 · Nhiệm vụ 1 · Tạo nhiễu ngay trên thiết bị", _evaluate_noise,
                 wrongs=_NOISE_WRONGS, hints=["torch.randn_like(x) lấy shape, dtype và thiết bị của x.",
                                              "return x + std * torch.randn_like(x)"])

_Box = namedtuple("Box", "coords label")
_Sample = namedtuple("Sample", "image caption")


def _sample_batch() -> dict:
    """Return the nested CPU batch the checker moves (dict, list, tuple, two namedtuples, str, float)."""
    return {"pixels": torch.rand(2, 3), "labels": torch.tensor([0, 1]),
            "boxes": [_Box(torch.rand(2, 4), "mèo"), _Box(torch.rand(1, 4), "chó")], "pair": (torch.zeros(2), "x"),
            "ids": ("a", "b"), "scale": 0.5, "extra": {"deep": [_Sample(torch.ones(1), "ảnh 1")]}}


def _leaves(obj, path: str = "batch", out: list | None = None) -> list:
    """Return (path, object) for every value in a nested batch, containers included."""
    out = [] if out is None else out
    out.append((path, obj))
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, (list, tuple)) else ()
    for key, value in items:
        _leaves(value, f"{path}[{key!r}]", out)
    return out


def _size(obj) -> list | str:
    return list(obj) if isinstance(obj, dict) else f"{len(obj)} phần tử"


def _kind(obj) -> str:
    return f"namedtuple {type(obj).__name__}" if hasattr(obj, "_fields") else type(obj).__name__


def _compare(report: Report, before, after, path: str = "batch") -> None:
    """Stop at the first place where `after` is not `before` moved to meta with its types kept."""
    if isinstance(before, torch.Tensor):
        if not isinstance(after, torch.Tensor):
            report.problem(f"{path} là tensor nhưng kết quả ở đó là {_kind(after)}.", stop=True)
        if after.device != _META:
            report.problem(f"{path} vẫn ở {after.device}: đệ quy vào mọi dict, list, tuple, namedtuple.", stop=True)
        if (after.dtype, after.shape) != (before.dtype, before.shape):
            report.problem(f"{path} đổi dtype hay shape: chỉ đổi thiết bị, .to(device).", stop=True)
    elif isinstance(before, (dict, list, tuple)):
        if type(after) is not type(before):
            fix = ("dựng lại bằng type(batch)(*các phần tử), có dấu *" if hasattr(before, "_fields")
                   and isinstance(after, tuple) else "giữ nguyên kiểu")
            report.problem(f"{path} là {_kind(before)} nhưng kết quả là {_kind(after)}: {fix}.", stop=True)
        if (size := _size(before)) != _size(after):
            report.problem(f"{path} có {size}, kết quả có {_size(after)}: giữ nguyên mọi khoá, mọi phần tử.", stop=True)
        fields = getattr(before, "_fields", None)
        for key in before if isinstance(before, dict) else range(len(before)):
            sub = f"{path}.{fields[key]}" if fields else f"{path}[{key!r}]"
            _compare(report, before[key], after[key], sub)
    elif after is not before and after != before:
        report.problem(f"{path} = {before!r} không phải tensor nên phải giữ nguyên, không thành {after!r}.", stop=True)


_MOVE_MISTAKES = (
    Wrong("a string as a sequence", raised(RecursionError),
          "move_keep đệ quy không dừng (RecursionError): chuỗi cũng là Sequence; chỉ đi vào dict, list và tuple."),
    Wrong(".to on a non-tensor", raised(AttributeError, "'to'"),
          lambda exc: f"move_keep gọi .to() trên giá trị không phải tensor ({exc}): trả về nguyên giá trị đó."),
    Wrong("only Box", raised(TypeError, r"^(?!Box)\w+\.__new__.*missing.*positional argument"), lambda exc: (
        f"move_keep: {exc}: hàm chỉ nhận ra namedtuple Box; nhận ra mọi namedtuple bằng hasattr(batch, '_fields').")),
    Wrong("namedtuple from an iterable", raised(TypeError, r"__new__.*missing.*positional argument"), lambda exc: (
        f"move_keep: {exc}: namedtuple nhận từng trường riêng, dựng lại bằng type(batch)(*các phần tử).")),
)


def _evaluate_move(report: Report, move_keep=None) -> None:
    report.require_function(move_keep, "move_keep(batch, device)")
    batch = _sample_batch()
    saved = _leaves(batch)
    result = report.call("move_keep(batch, 'meta')", move_keep, batch, _META, mistakes=_MOVE_MISTAKES)
    changed = [path for (path, old), (_, new) in zip_longest(saved, _leaves(batch), fillvalue=("batch", None))
               if old is not new or getattr(new, "device", _CPU) != _CPU]
    if changed:
        report.problem(f"move_keep đã sửa batch gốc ({changed[0]} bị thay): dựng dict/list/tuple MỚI, để nguyên "
                       "batch gốc.", stop=True)
    report.require_return(result, "move_keep")
    _compare(report, batch, result)
    single = report.call("move_keep(torch.ones(2), 'meta')", move_keep, torch.ones(2), _META,
                         mistakes=_MOVE_MISTAKES)
    if not isinstance(single, torch.Tensor) or single.device != _META:
        report.problem("move_keep(torch.ones(2), 'meta') phải trả về tensor đó trên meta (batch có thể chỉ là một "
                       "tensor).", stop=True)
    report.success("mọi tensor đã sang meta, mọi container giữ nguyên kiểu, batch gốc không bị sửa.")
    report.note("Trên GPU: gọi move_keep(batch, device) ngay khi lấy batch ra khỏi DataLoader.")


task2 = Exercise("task2", "Bài 14.2 · Nhiệm vụ 2 · Chuyển batch mà giữ nguyên kiểu", _evaluate_move,
                 wrongs=_MOVE_MISTAKES, hints=[
    "Như move(), thêm nhánh namedtuple (hasattr(batch, '_fields')) trước list/tuple: type(batch)(*items), có dấu *.",
    "Thứ tự: tensor → dict → namedtuple → list/tuple → còn lại trả về nguyên giá trị; mỗi container gọi lại "
    "move_keep cho từng phần tử."])

"""Lesson 02's checked tasks: make the noise on x's device, and move a nested batch keeping its types.

``add_noise`` is tried on a ``meta`` float16 tensor under a `MoveTracker` (so "made on the CPU, then copied"
shows without a GPU), then on a CPU tensor for its values; ``move_keep`` moves a nested batch to ``meta``.
"""

from __future__ import annotations

from collections import namedtuple
from types import SimpleNamespace

import torch

from ._core import Exercise, Report, Wrong, raised
from ._tracking import MoveTracker

_META = torch.device("meta")

_RANDN_LIKE = "torch.randn_like(x)"
_ON_META = (  # what an error of add_noise(x) with x on meta means
    Wrong("copied to the CPU", raised(NotImplementedError, "copy out of meta"),
          "add_noise chép tensor về CPU (.cpu(), .to('cpu'), .item(), .numpy()…): với x ở meta (không có dữ liệu) việc "
          "đó không làm được, còn trên GPU nó tốn một lần chép GPU → CPU mỗi lần gọi. Mọi thứ phải ở lại thiết bị "
          "của x."),
    Wrong("noise made on the CPU", raised(RuntimeError, "device"),
          "nhiễu được tạo trên CPU trong khi x nằm ở thiết bị khác (ở đây là meta; trên GPU là cuda:0), nên phép cộng "
          f"báo lỗi lệch thiết bị. Tạo nhiễu ngay trên thiết bị của x: {_RANDN_LIKE}, hoặc torch.randn(x.shape, "
          "device=x.device, dtype=x.dtype)."),
)


_NOISE_WRONGS = (
    *_ON_META,
    Wrong("moved elsewhere", lambda n: n.result.device != n.x.device, lambda n: (
        f"với x ở {n.x.device}, kết quả lại ở {n.result.device}: kết quả phải ở đúng thiết bị của x (đừng chuyển nó đi "
        "đâu cả).")),
    Wrong("other shape", lambda n: n.result.shape != n.x.shape, lambda n: (
        f"kết quả có shape {tuple(n.result.shape)}, x có shape {tuple(n.x.shape)}: nhiễu phải cùng shape với x "
        f"({_RANDN_LIKE} lo việc này).")),
    Wrong("float32 noise", lambda n: n.result.dtype != n.x.dtype, lambda n: (
        f"kết quả là {str(n.result.dtype).replace('torch.', '')} trong khi x là float16: torch.randn mặc định tạo "
        "float32 và phép cộng đẩy cả kết quả lên float32 (gấp đôi bộ nhớ, và lỗi dtype ở lớp sau). Thêm "
        f"dtype=x.dtype, hoặc dùng {_RANDN_LIKE} (giữ shape, dtype, device).")),
    Wrong("made then copied", lambda n: n.copied,
          "kết quả đúng chỗ, nhưng nhiễu được tạo trên CPU rồi mới chép sang (.to(...)). Trên GPU, mỗi lần gọi là một "
          f"lần sinh số trên CPU cộng một lần chép qua PCIe. Tạo thẳng ở đích: {_RANDN_LIKE} hoặc device=x.device."),
    Wrong("in place", lambda n: n.changed,
          "add_noise sửa x tại chỗ (x += ..., x.add_(...)): hàm phải trả về tensor MỚI và để nguyên x (x có thể là "
          "đầu vào mà autograd còn cần)."),
    Wrong("forgot x", lambda n: abs(n.mean) < 0.1, lambda n: (
        f"với x toàn số 3, kết quả có trung bình {n.mean:.2f}: bạn trả về nhiễu mà quên cộng x. Trả về x + std * "
        "nhiễu.")),
    Wrong("uniform noise", lambda n: abs(n.mean - 3.25) < 0.02 and abs(n.spread - 0.5 / 12**0.5) < 0.02,
          "nhiễu có trung bình 0,25 chứ không quanh 0: torch.rand / rand_like cho phân phối đều trên [0, 1). Nhiễu "
          "Gauss dùng torch.randn / randn_like (phân phối chuẩn, trung bình 0, độ lệch 1)."),
    Wrong("mean off", lambda n: abs(n.mean - 3.0) > 0.05, lambda n: (
        f"với x toàn số 3, kết quả có trung bình {n.mean:.2f}, lẽ ra ≈ 3 (nhiễu có trung bình 0).")),
    Wrong("no std", lambda n: abs(n.spread - 1.0) < 0.05,
          "độ lệch chuẩn của nhiễu là 1 dù std=0.5: quên nhân nhiễu với std."),
    Wrong("std squared", lambda n: abs(n.spread - 0.25) < 0.03,
          "độ lệch chuẩn của nhiễu là 0,25 với std=0.5: bạn nhân với std**2 (phương sai); hãy nhân với std."),
    Wrong("spread off", lambda n: abs(n.spread - 0.5) > 0.05,
          lambda n: f"với std=0.5, độ lệch chuẩn đo được của nhiễu là {n.spread:.2f}, lẽ ra ≈ 0.5."),
)


def _evaluate_noise(report: Report, add_noise=None) -> None:
    report.require_function(add_noise, "add_noise(x, std)")
    x = torch.zeros(4, 8, device=_META, dtype=torch.float16)  # meta: a device without data, like a GPU seen from here
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
    report.success("nhiễu được sinh ngay trên thiết bị và dtype của x (x ở meta/float16 → kết quả meta/float16, "
                   "không có lần chép nào), đúng phân phối chuẩn nhân std, và x không bị sửa.")
    report.note("Trên GPU: randn_like(x) sinh số ngẫu nhiên ngay trong VRAM; mỗi bước train không tốn lần chép "
                "CPU → GPU nào cho nhiễu.")


task1 = Exercise("task1", "Bài 14.2 · Nhiệm vụ 1 · Tạo nhiễu ngay trên thiết bị", _evaluate_noise,
                 wrongs=_NOISE_WRONGS, hints=[
    "Nhiễu phải có cùng shape, dtype và thiết bị với x. Hàm *_like của PyTorch lấy cả ba từ một tensor có sẵn.",
    "return x + std * torch.randn_like(x)",
])

_Box = namedtuple("Box", "coords label")
_Sample = namedtuple("Sample", "image caption")


def _sample_batch() -> dict:
    """Return the nested CPU batch the checker moves (dict, list, tuple, two namedtuples, str, float)."""
    return {
        "pixels": torch.rand(2, 3), "labels": torch.tensor([0, 1]),
        "boxes": [_Box(torch.rand(2, 4), "mèo"), _Box(torch.rand(1, 4), "chó")],
        "pair": (torch.zeros(2), "x"), "ids": ("a", "b"), "scale": 0.5,
        "extra": {"deep": [_Sample(torch.ones(1), "ảnh 1")]},
    }


def _leaves(obj, path: str, out: list) -> list:
    """Return (path, object) for every value in a nested batch, containers included."""
    out.append((path, obj))
    if isinstance(obj, dict):
        for key, value in obj.items():
            _leaves(value, f"{path}[{key!r}]", out)
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            _leaves(value, f"{path}[{i}]", out)
    return out


def _kind(obj) -> str:
    if isinstance(obj, tuple) and hasattr(type(obj), "_fields"):
        return f"namedtuple {type(obj).__name__}"
    return type(obj).__name__


def _compare(report: Report, before, after, path: str) -> None:
    """Stop at the first place where `after` is not `before` moved to meta with its types kept."""
    if isinstance(before, torch.Tensor):
        if not isinstance(after, torch.Tensor):
            report.problem(f"{path} là tensor nhưng kết quả ở đó là {type(after).__name__}.", stop=True)
        if after.device != _META:
            report.problem(f"{path} vẫn ở {after.device}, chưa sang meta: hàm chưa đi vào tới chỗ này (đệ quy vào "
                           "mọi dict, list, tuple, namedtuple).", stop=True)
        if after.dtype != before.dtype or after.shape != before.shape:
            report.problem(f"{path} đổi dtype/shape ({before.dtype}, {tuple(before.shape)} → {after.dtype}, "
                           f"{tuple(after.shape)}): chỉ đổi thiết bị, .to(device).", stop=True)
        return
    if isinstance(before, (dict, list, tuple)):
        if type(after) is not type(before):
            if _kind(before).startswith("namedtuple") and isinstance(after, tuple):
                report.problem(f"{path} là {_kind(before)} nhưng kết quả là tuple thường: mất tên trường (vd "
                               f"{path}.{before._fields[-1]}). Dựng lại đúng kiểu: type(batch)(*các phần tử đã "
                               "chuyển), có dấu * vì namedtuple nhận từng trường riêng.", stop=True)
            report.problem(f"{path} là {_kind(before)} nhưng kết quả là {_kind(after)}: giữ nguyên kiểu container "
                           "(tuple vẫn là tuple, list vẫn là list).", stop=True)
        if isinstance(before, dict):
            if list(after) != list(before):
                report.problem(f"{path} có các khoá {list(before)}, kết quả có {list(after)}: giữ nguyên mọi khoá.",
                               stop=True)
            for key in before:
                _compare(report, before[key], after[key], f"{path}[{key!r}]")
            return
        if len(after) != len(before):
            report.problem(f"{path} có {len(before)} phần tử, kết quả có {len(after)}.", stop=True)
        fields = getattr(type(before), "_fields", None)
        for i, (b, a) in enumerate(zip(before, after, strict=True)):
            _compare(report, b, a, f"{path}.{fields[i]}" if fields else f"{path}[{i}]")
        return
    if after is not before and after != before:
        report.problem(f"{path} = {before!r} không phải tensor nên phải giữ nguyên, nhưng kết quả là {after!r}.",
                       stop=True)


_MOVE_MISTAKES = (
    Wrong("a string as a sequence", raised(RecursionError),
          "move_keep: đệ quy không dừng (RecursionError). Có lẽ bạn coi chuỗi là một dãy (str cũng là Sequence: "
          "'a'[0] lại là 'a'). Chỉ đi vào dict, list và tuple."),
    Wrong(".to on a non-tensor", raised(AttributeError, "'to'"), lambda exc: (
        f"move_keep gọi .to() trên một giá trị không phải tensor ({exc}). Chuỗi, số… không có .to(): trả về nguyên "
        "giá trị đó.")),
    Wrong("only Box", raised(TypeError, r"^(?!Box)\w+\.__new__.*missing.*positional argument"), lambda exc: (
        f"move_keep: {exc}. Hàm chỉ nhận ra namedtuple tên Box; batch thật có thể chứa namedtuple khác. Nhận ra mọi "
        "namedtuple bằng isinstance(batch, tuple) and hasattr(batch, '_fields').")),
    Wrong("namedtuple from an iterable", raised(TypeError, r"__new__.*missing.*positional argument"), lambda exc: (
        f"move_keep: {exc}. Một namedtuple không nhận một iterable như tuple thường: type(batch)(*các phần tử đã "
        "chuyển), có dấu *.")),
)


def _evaluate_move(report: Report, move_keep=None) -> None:
    report.require_function(move_keep, "move_keep(batch, device)")
    batch = _sample_batch()
    saved = _leaves(batch, "batch", [])
    result = report.call("move_keep(batch, 'meta')", move_keep, batch, _META, mistakes=_MOVE_MISTAKES)
    changed = [path for (path, obj), (_, now) in zip(saved, _leaves(batch, "batch", []), strict=False)
               if obj is not now or (isinstance(now, torch.Tensor) and now.device != torch.device("cpu"))]
    if changed or len(_leaves(batch, "batch", [])) != len(saved):
        where = changed[0] if changed else "batch"
        report.problem(f"move_keep đã sửa batch gốc ({where} bị thay): hãy dựng dict/list/tuple MỚI và để nguyên "
                       "batch gốc (người gọi có thể vẫn cần nó, vd để ghi log trên CPU).", stop=True)
    report.require_return(result, "move_keep")
    _compare(report, batch, result, "batch")
    single = report.call("move_keep(torch.ones(2), 'meta')", move_keep, torch.ones(2), _META,
                         mistakes=_MOVE_MISTAKES)
    if not isinstance(single, torch.Tensor) or single.device != _META:
        report.problem("move_keep(torch.ones(2), 'meta') phải trả về chính tensor đó trên meta (batch có thể chỉ là "
                       "một tensor).", stop=True)
    report.success("mọi tensor (kể cả trong list lồng trong dict, và trong namedtuple) đã sang meta; dict, list, "
                   "tuple và namedtuple (Box, Sample) giữ nguyên kiểu; chuỗi và số giữ nguyên; batch gốc không bị sửa.")
    report.note("Trên GPU: gọi move_keep(batch, device) ngay khi lấy batch ra khỏi DataLoader; với pin_memory=True "
                "thì thêm non_blocking=True vào .to().")


task2 = Exercise("task2", "Bài 14.2 · Nhiệm vụ 2 · Chuyển batch mà giữ nguyên kiểu", _evaluate_move,
                 wrongs=_MOVE_MISTAKES, hints=[
    "Bắt đầu từ move() ở trên. Một namedtuple là một tuple có thuộc tính _fields; với nó, dựng lại bằng "
     "type(batch)(*items) (có dấu *), còn tuple/list thường thì type(batch)(items).",
    "Thứ tự các nhánh: tensor → dict → namedtuple (hasattr(batch, '_fields')) → list/tuple → còn lại trả về "
     "nguyên giá trị. Mỗi nhánh container gọi lại move_keep cho từng phần tử.",
])

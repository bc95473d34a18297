"""Lesson 03's checked tasks: find the misplaced tensors of a model, load a GPU checkpoint anywhere.

``misplaced`` is tried on ``meta``/CPU models, once with ``cpu:0`` (the same place as ``cpu`` but an unequal
``torch.device``, like ``cuda`` and ``cuda:0``), and once on a model of fake tensors (``FakeTensor``: a device, no
data, no GPU needed) on ``cuda:0`` with one parameter on ``cuda:1``, checked against ``cuda``: a comparison of
``.type`` alone misses it, as it would on a two-GPU machine; ``load_weights`` gets a checkpoint tagged with a GPU this
machine lacks, so a forgotten ``map_location`` fails here as it does on a laptop.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import nullcontext
from unittest import mock

import torch
import torch.nn as nn

from ..device import pick_device
from ._core import Exercise, Report, on_gpu_note, same_device
from ._tracking import MoveTracker


class _Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        self.head = nn.Linear(3, 2)
        self.register_buffer("scale", torch.ones(2))
        self.register_buffer("mask", torch.ones(3))


def _cases() -> list[tuple[str, nn.Module, torch.device, set[str]]]:
    meta = torch.device("meta")
    mixed = _Probe().to(meta)
    mixed.head.bias = nn.Parameter(torch.zeros(2))      # a parameter left on the CPU
    mixed.mask = torch.ones(3)                          # a buffer left on the CPU
    tidy = _Probe().to(meta)
    one_off = _Probe()
    one_off.body[0].weight = nn.Parameter(torch.zeros(8, 4, device=meta))
    return [
        ("model trên meta, head.bias và buffer mask còn ở CPU", mixed, meta, {"head.bias", "mask"}),
        ("mọi tensor đã trên meta", tidy, meta, set()),
        ("model trên CPU, riêng body.0.weight trên meta", one_off, torch.device("cpu"), {"body.0.weight"}),
        ("mọi tensor trên CPU, device truyền vào là cpu:0", _Probe(), torch.device("cpu:0"), set()),
    ]


_TWO_GPUS = "model trên cuda:0, riêng head.bias trên cuda:1 (tensor giả, không cần GPU), device truyền vào là cuda"


def _two_gpu_case():
    """Return (what, model, device, expected, mode): a fake-tensor model on cuda:0 with head.bias on cuda:1.

    The learner's function runs inside `mode`, where ``torch.empty(0, device="cuda")`` gives a fake ``cuda:0``
    tensor on any machine. None when this PyTorch has no FakeTensor.
    """
    try:
        from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    except ImportError:  # pragma: no cover - every supported PyTorch has it
        return None
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    model = _Probe().to(torch.device("meta"))
    for module_name, module in model.named_modules():
        for name, p in list(module._parameters.items()):
            index = 1 if f"{module_name}.{name}" == "head.bias" else 0
            module._parameters[name] = nn.Parameter(FakeTensor(mode, p.data, torch.device("cuda", index)))
        for name, b in list(module._buffers.items()):
            module._buffers[name] = FakeTensor(mode, b, torch.device("cuda", 0))
    return _TWO_GPUS, model, torch.device("cuda"), {"head.bias"}, mode


def _evaluate_misplaced(report: Report, misplaced=None) -> None:
    report.require_function(misplaced, "misplaced(model, device)")
    cases = [(*case, nullcontext()) for case in _cases()]
    two_gpus = _two_gpu_case()
    if two_gpus is not None:
        cases.append(two_gpus)
    for what, model, device, expected, context in cases:
        with context:
            got = report.call(f"misplaced(model, {str(device)!r})", misplaced, model, device)
        report.require_return(got, "misplaced")
        if not isinstance(got, (list, tuple, set, frozenset)):
            report.problem(f"misplaced phải trả về một list tên (str), không phải {type(got).__name__}.",
                           stop=True)
        names = list(got)
        if any(isinstance(n, torch.Tensor) for n in names):
            report.problem("misplaced trả về tensor; hãy trả về TÊN của chúng, vd 'head.bias': "
                           "named_parameters() cho cả (tên, tensor).", stop=True)
        if not all(isinstance(n, str) for n in names):
            report.problem("mỗi phần tử phải là tên dạng str, vd 'head.bias'.", stop=True)
        found = set(names)
        if found == expected:
            continue
        buffers = {name for name, _ in model.named_buffers()}
        everything = {name for name, _ in model.named_parameters()} | buffers
        report.first([
            (what == _TWO_GPUS and not found,
             "head.bias nằm trên cuda:1, mọi tensor khác trên cuda:0, device truyền vào là cuda: hàm trả về rỗng. "
             "Có lẽ bạn chỉ so .type ('cuda' == 'cuda'), nên GPU thứ hai lọt qua; trên máy hai GPU đó chính là lỗi "
             "'cuda:0 and cuda:1'. So cả số thứ tự: want = torch.empty(0, device=device).device (cuda → cuda:0), "
             "rồi so t.device != want."),
            (what == _TWO_GPUS and found == everything,
             "với device = cuda, mọi tensor (đều trên GPU) bị coi là lệch: torch.device('cuda:0') != "
             "torch.device('cuda') dù là cùng một GPU. Chuẩn hoá trước: want = torch.empty(0, device=device).device, "
             "rồi so t.device != want."),
            (str(device) == "cpu:0" and found == everything,
             "với device = cpu:0, mọi tensor (đều ở cpu) bị coi là lệch: torch.device('cpu:0') != "
             "torch.device('cpu') dù là cùng một chỗ; trên GPU cũng vậy với 'cuda' và 'cuda:0' (dòng chọn device "
             "của bài cho torch.device('cuda')). Chuẩn hoá trước: want = torch.empty(0, device=device).device, rồi so t.device != want."),
            (expected and found == expected - buffers,
             f"thiếu buffer ({', '.join(sorted(expected & buffers))}): buffer cũng phải theo model; duyệt cả "
             "model.named_buffers(), không chỉ named_parameters()."),
            (expected and found == expected & buffers,
             "thiếu tham số: duyệt cả model.named_parameters(), không chỉ named_buffers()."),
            (found and found == everything - expected,
             f"kết quả bị đảo ngược ({what}): cần tên các tensor KHÔNG nằm trên device, nhận được các tensor đang "
             "nằm đúng chỗ."),
            (found == everything and expected != everything,
             f"trả về mọi tên ({what}); chỉ lấy tensor có t.device khác device."),
            (expected and found == {n.rsplit(".", 1)[-1] for n in expected},
             f"tên thiếu phần đầu: cần tên đầy đủ như named_parameters() trả về ({sorted(expected)}), không phải "
             f"{sorted(found)}."),
            (True, f"{what}: cần {sorted(expected)}, nhận được {sorted(found)}."),
        ])
    report.success(f"misplaced tìm đúng tham số và buffer lệch thiết bị trong cả {len(cases)} trường hợp, kể cả khi "
                   "device được viết 'cpu:0' (như 'cuda' và 'cuda:0' trên GPU) và khi một tham số nằm trên GPU thứ hai "
                   "(cuda:1).")


task1 = Exercise("task1", "Bài 14.3 · Nhiệm vụ 1 · Tìm tensor lạc chỗ", _evaluate_misplaced, hints=[
    "Duyệt cả hai: for name, t in model.named_parameters() và for name, t in model.named_buffers(); "
     "giữ name khi t.device khác device.",
    "torch.device('cuda') != torch.device('cuda:0') (và 'cpu:0' != 'cpu'): chuẩn hoá trước bằng "
     "want = torch.empty(0, device=device).device. Đừng chỉ so .type: cuda:1 cũng có type 'cuda'.",
])


def _missing_gpu() -> str:
    """Return a GPU name this machine lacks: cuda:0 without CUDA, cuda:N with N GPUs."""
    return f"cuda:{torch.cuda.device_count() if torch.cuda.is_available() else 0}"


def _save_as_if_on_gpu(state: dict, path: str, tag: str) -> None:
    """Save `state` with every storage tagged `tag` (e.g. "cuda:0"), as torch.save does on that GPU."""
    with mock.patch.object(torch.serialization, "location_tag", lambda storage: tag):
        torch.save(state, path)


def _evaluate_load(report: Report, load_weights=None) -> None:
    report.require_function(load_weights, "load_weights(model, path, device)")
    device = pick_device()
    torch.manual_seed(3)
    saved = nn.Linear(3, 2).state_dict()
    tag = _missing_gpu()
    model = nn.Linear(3, 2)                                   # fresh weights on the CPU, different from `saved`
    params = list(model.parameters())
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trained_on_gpu.pt")
        _save_as_if_on_gpu(saved, path, tag)
        with mock.patch.object(torch, "load", wraps=torch.load) as load, MoveTracker() as tracker:
            result = report.call("load_weights(model, path, device)", load_weights, model, path, device, mistakes=[
                (Exception, "deserialize object on", f"torch.load báo lỗi: file được lưu trên {tag}, máy này không "
                                                     "có GPU đó. Thêm map_location=\"cpu\" (hoặc map_location=device) "
                                                     "vào torch.load.")])
            tracker.mark_used(result)
    loads = [call.kwargs for call in load.call_args_list]
    if result is None and not loads:
        report.missing_part("load_weights chưa làm gì (thân hàm còn là ...).", stop=True)
    if not loads:
        report.problem("load_weights không gọi torch.load(path, ...).", stop=True)
    if any(call.get("weights_only") is False for call in loads):
        report.problem("đừng tắt weights_only: weights_only=False cho phép file chạy code tuỳ ý khi nạp. "
                       "state_dict chỉ có tensor, nên weights_only=True là đủ.")
    elif not all("weights_only" in call for call in loads):
        report.note("ghi rõ weights_only=True: từ PyTorch 2.6 đây là mặc định, nhưng bản cũ hơn mặc định False.")
    if result is None:
        report.missing_part("load_weights chưa trả về mô hình (thiếu return model).", stop=True)
    if isinstance(result, dict):
        report.problem("load_weights trả về dict (state_dict), chưa phải mô hình: nạp nó vào model bằng "
                       "model.load_state_dict(...), rồi return model.", stop=True)
    if isinstance(result, tuple) and hasattr(result, "missing_keys"):
        report.problem("load_state_dict(...) trả về danh sách khoá thiếu/thừa, không phải mô hình: gọi nó rồi "
                       "return model.", stop=True)
    if result is not model:
        report.problem(f"hãy trả về chính model được truyền vào, không phải {type(result).__name__}.",
                       stop=True)
    if not any(m.source is p for m in tracker.moves for p in params):
        report.problem("chưa đưa mô hình lên device: thêm model.to(device) (map_location chỉ quyết định nơi tensor "
                       "của FILE được nạp vào; load_state_dict chép chúng vào tham số, tham số đang ở đâu thì vẫn ở đó).",
                       stop=True)
    wrong = [name for name, p in model.named_parameters() if not same_device(p.device, device)]
    if wrong:
        report.problem(f"sau load_weights, {', '.join(wrong)} không nằm trên {device}.", stop=True)
    for name, value in saved.items():
        if not torch.equal(model.state_dict()[name].cpu(), value):
            report.problem(f"trọng số {name} không khớp file: gọi model.load_state_dict(torch.load(path, ...)).",
                           stop=True)
    report.success(f"file lưu trên {tag} (GPU mà máy này không có) được nạp, trọng số khớp, mô hình nằm trên {device}.")
    on_gpu_note(report, device, "cùng hàm này nạp được checkpoint lưu trên Colab/Kaggle vào laptop không có GPU, "
                "và ngược lại.")


task2 = Exercise("task2", "Bài 14.3 · Nhiệm vụ 2 · Nạp checkpoint GPU ở mọi nơi", _evaluate_load, hints=[
    "Ba bước: state = torch.load(path, map_location=\"cpu\", weights_only=True); "
     "model.load_state_dict(state); model.to(device). Rồi return model.",
    "map_location quyết định nơi tensor trong FILE được nạp vào; model.to(device) quyết định nơi mô hình nằm. "
     "Cần cả hai.",
])

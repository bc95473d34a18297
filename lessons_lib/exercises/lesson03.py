"""Lesson 03's checked tasks: find a model's misplaced tensors (``cpu:0``, fake ``cuda:1``), load a GPU checkpoint."""

from __future__ import annotations

import os
import tempfile
from types import SimpleNamespace
from unittest import mock

import torch
import torch.nn as nn

from ..device import pick_device
from ._core import Case, Exercise, Report, Wrong, on_gpu_note, raised, run_cases
from ._tracking import MoveTracker


class _Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        self.head = nn.Linear(3, 2)
        self.register_buffer("scale", torch.ones(2))
        self.register_buffer("mask", torch.ones(3))


def _two_gpus() -> Case:
    """Return the case of fake tensors on cuda:0 with head.bias on cuda:1, run in a FakeTensorMode (no GPU needed)."""
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    model = _Probe().to("meta")._apply(lambda t: FakeTensor(mode, t, torch.device("cuda", 0)))
    model.head.bias = nn.Parameter(FakeTensor(mode, torch.empty(2, device="meta"), torch.device("cuda", 1)))
    return _case("model trên cuda:0, riêng head.bias trên cuda:1 (tensor giả)", model, "cuda", {"head.bias"},
                 setup=lambda: mode)


def _case(what: str, model: nn.Module, device: str, want: set[str], **setup) -> Case:
    return Case(f"misplaced(model, {device!r}) với {what}", (model, torch.device(device)), want, **setup)


def _cases() -> list[Case]:
    """Return fresh models (the learner's function may change them) and what misplaced must find in each."""
    meta = torch.device("meta")
    mixed = _Probe().to(meta)
    mixed.head.bias = nn.Parameter(torch.zeros(2))      # a parameter left on the CPU
    mixed.mask = torch.ones(3)                          # a buffer left on the CPU
    one_off = _Probe()
    one_off.body[0].weight = nn.Parameter(torch.zeros(8, 4, device=meta))
    return [_case("model trên meta, head.bias và buffer mask còn ở CPU", mixed, "meta", {"head.bias", "mask"}),
            _case("mọi tensor đã trên meta", _Probe().to(meta), "meta", set()),
            _case("model trên CPU, riêng body.0.weight trên meta", one_off, "cpu", {"body.0.weight"}),
            _case("mọi tensor trên CPU", _Probe(), "cpu:0", set()),
            _two_gpus()]


def _names(a, kind: str = "") -> set[str]:
    """Return the names of the case's model's parameters and buffers (or only of `kind`)."""
    model = a.case.args[0]
    return {n for n, _ in (model.named_parameters() if kind != "buffers" else ())} | {
        n for n, _ in (model.named_buffers() if kind != "parameters" else ())}


_NORMALISE = "chuẩn hoá trước: want = torch.empty(0, device=device).device, rồi so t.device != want."
_MISPLACED_WRONGS = (
    Wrong(".type only", lambda a: str(a.case.args[1]) == "cuda" and not a.got, lambda a: (
        f"{a.case.label}: hàm trả về rỗng, có lẽ chỉ so .type nên cuda:1 lọt qua; {_NORMALISE}")),
    Wrong("cuda not normalised", lambda a: str(a.case.args[1]) == "cuda" and a.got == _names(a),
          f"với device = cuda, mọi tensor bị coi là lệch vì torch.device('cuda:0') != torch.device('cuda'); "
          f"{_NORMALISE}"),
    Wrong("naive comparison", lambda a: str(a.case.args[1]) == "cpu:0" and a.got == _names(a),
          f"với device = cpu:0, mọi tensor bị coi là lệch vì torch.device('cpu:0') != torch.device('cpu'); "
          f"{_NORMALISE}"),
    Wrong("parameters only", lambda a: a.case.want and a.got == a.case.want - _names(a, "buffers"), lambda a: (
        f"thiếu buffer ({', '.join(sorted(a.case.want & _names(a, 'buffers')))}): duyệt cả model.named_buffers().")),
    Wrong("buffers only", lambda a: a.case.want and a.got == a.case.want & _names(a, "buffers"),
          "thiếu tham số: duyệt cả model.named_parameters()."),
    Wrong("inverted", lambda a: a.got and a.got == _names(a) - a.case.want,
          lambda a: f"{a.case.label}: kết quả bị đảo, cần tên các tensor KHÔNG nằm trên device."),
    Wrong("every name", lambda a: a.got == _names(a),
          lambda a: f"{a.case.label}: trả về mọi tên; chỉ lấy tensor có t.device khác device."),
    Wrong("short names", lambda a: a.case.want and a.got == {n.rsplit(".", 1)[-1] for n in a.case.want}, lambda a: (
        f"cần tên đầy đủ như named_parameters() cho ({sorted(a.case.want)}), không phải {sorted(a.got)}.")),
)


def _read_names(report: Report, got) -> set:
    """Return the learner's answer as a set of names, or record why it is not one and stop."""
    if not all(isinstance(n, str) for n in got):
        report.problem("misplaced trả về tensor; hãy trả về TÊN của chúng, như named_parameters() cho."
                       if any(isinstance(n, torch.Tensor) for n in got)
                       else "mỗi phần tử phải là tên dạng str, vd 'head.bias'.", stop=True)
    return set(got)


def _evaluate_misplaced(report: Report, misplaced=None) -> None:
    run_cases(report, misplaced, "misplaced(model, device)", _cases(), _MISPLACED_WRONGS,
              returns=(list, tuple, set, frozenset), read=_read_names)
    report.success("misplaced tìm đúng tham số và buffer lệch thiết bị, kể cả với 'cpu:0' và GPU thứ hai (cuda:1).")


task1 = Exercise("task1", "Bài 14.3 · Nhiệm vụ 1 · Tìm tensor lạc chỗ", _evaluate_misplaced, wrongs=_MISPLACED_WRONGS,
                 hints=["Duyệt cả named_parameters() và named_buffers(), giữ name khi t.device khác device.",
                        "Chuẩn hoá trước (cuda != cuda:0): want = torch.empty(0, device=device).device; đừng chỉ "
                        "so .type, cuda:1 cũng là 'cuda'."])


def _missing_gpu() -> str:
    """Return a GPU name this machine lacks: cuda:0 without CUDA, cuda:N with N GPUs."""
    return f"cuda:{torch.cuda.device_count() if torch.cuda.is_available() else 0}"


def _save_as_if_on_gpu(state: dict, path: str, tag: str) -> None:
    """Save `state` with every storage tagged `tag` (e.g. "cuda:0"), as torch.save does on that GPU."""
    with mock.patch.object(torch.serialization, "location_tag", lambda storage: tag):
        torch.save(state, path)


def _mismatch(x) -> str | None:
    return next((k for k, v in x.saved.items() if not torch.equal(x.model.state_dict()[k].cpu(), v)), None)


_LOAD_WRONGS = (
    Wrong("no map_location", raised(Exception, "deserialize object on"), lambda exc: (
        f"file được lưu trên {_missing_gpu()}, máy này không có GPU đó: thêm map_location=\"cpu\" vào torch.load.")),
    Wrong("no torch.load", lambda x: not x.loads, "load_weights không gọi torch.load(path, ...)."),
    Wrong("weights_only=False", lambda x: any(call.get("weights_only") is False for call in x.loads),
          "weights_only=False cho phép file chạy code tuỳ ý khi nạp: state_dict chỉ cần weights_only=True."),
    Wrong("returns the state_dict", lambda x: isinstance(x.result, dict),
          "load_weights trả về state_dict: nạp nó bằng model.load_state_dict(...), rồi return model."),
    Wrong("returns load_state_dict's keys", lambda x: isinstance(x.result, tuple) and hasattr(x.result, "missing_keys"),
          "load_state_dict(...) trả về các khoá thiếu/thừa, không phải mô hình: gọi nó rồi return model."),
    Wrong("not the model", lambda x: x.result is not x.model,
          lambda x: f"hãy trả về chính model được truyền vào, không phải {type(x.result).__name__}."),
    Wrong("model not moved", lambda x: not x.moved,
          "chưa đưa mô hình lên device (map_location chỉ nói nơi tensor của FILE được nạp vào): model.to(device)."),
    Wrong("wrong device", lambda x: any(p.device != torch.empty(0, device=x.device).device
                                        for p in x.model.parameters()),
          lambda x: f"sau load_weights, mô hình không nằm trên {x.device}: model.to(device)."),
    Wrong("never loads", lambda x: _mismatch(x) is not None, lambda x: (
        f"trọng số {_mismatch(x)} không khớp file: gọi model.load_state_dict(torch.load(path, ...)).")),
)


def _evaluate_load(report: Report, load_weights=None) -> None:
    report.require_function(load_weights, "load_weights(model, path, device)")
    device = pick_device()
    torch.manual_seed(3)
    saved = nn.Linear(3, 2).state_dict()
    model = nn.Linear(3, 2)                                   # fresh weights on the CPU, different from `saved`
    params = list(model.parameters())
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "trained_on_gpu.pt")
        _save_as_if_on_gpu(saved, path, _missing_gpu())
        with mock.patch.object(torch, "load", wraps=torch.load) as load, MoveTracker() as tracker:
            result = report.call("load_weights(model, path, device)", load_weights, model, path, device,
                                 mistakes=_LOAD_WRONGS[:1])
    loads = [call.kwargs for call in load.call_args_list]
    if result is None:
        report.missing_part("load_weights chưa trả về mô hình (thiếu return model).", stop=True)
    if not all("weights_only" in call for call in loads):
        report.note("ghi rõ weights_only=True: từ PyTorch 2.6 đây là mặc định, nhưng bản cũ hơn mặc định False.")
    moved = any(m.source is p for m in tracker.moves for p in params)
    report.diagnose(_LOAD_WRONGS[1:], SimpleNamespace(result=result, model=model, loads=loads, moved=moved,
                                                      saved=saved, device=device))
    report.success(f"file lưu trên {_missing_gpu()} được nạp, trọng số khớp, mô hình nằm trên {device}.")
    on_gpu_note(report, device, "cùng hàm này nạp được checkpoint lưu trên Colab/Kaggle vào laptop không có GPU.")


task2 = Exercise("task2", "Bài 14.3 · Nhiệm vụ 2 · Nạp checkpoint GPU ở mọi nơi", _evaluate_load, wrongs=_LOAD_WRONGS,
                 hints=["map_location quyết định nơi tensor của FILE được nạp vào, model.to(device) nơi mô hình nằm.",
                        "model.load_state_dict(torch.load(path, map_location=\"cpu\", weights_only=True)); "
                        "return model.to(device)"])

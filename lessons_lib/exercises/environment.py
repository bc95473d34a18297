"""Exercise 1: what does this machine have? (availability, GPU count, the device to use; GPU name and properties)."""

from __future__ import annotations

import os

import torch

from ..device import available_devices, pick_device
from ._core import Exercise, Report, as_device, is_blank


def _best_device() -> torch.device:
    """Return the device a device-agnostic program should pick here: CUDA > MPS > CPU (ignoring overrides)."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def _check_called(report: Report, name: str, value: object, call: str) -> None:
    if callable(value):
        report.problem(
            f"{name} đang là một hàm chứ không phải kết quả: bạn quên gọi nó, viết {call}() (có dấu ngoặc).",
            f"{name} is a function, not its result: call it, write {call}() (with the parentheses).",
            stop=True,
        )


def _evaluate_env(report: Report, cuda_available=None, gpu_count=None, device=None) -> None:
    names = {"cuda_available": cuda_available, "gpu_count": gpu_count, "device": device}
    blank = [name for name, value in names.items() if is_blank(value)]
    if blank:
        report.missing_part(f"chưa điền {', '.join(blank)}.", f"{', '.join(blank)} not filled in yet.", stop=True)
    _check_called(report, "cuda_available", cuda_available, "torch.cuda.is_available")
    _check_called(report, "gpu_count", gpu_count, "torch.cuda.device_count")
    actual_available, actual_count = torch.cuda.is_available(), torch.cuda.device_count()
    if not isinstance(cuda_available, bool):
        report.problem(f"cuda_available phải là True/False (kết quả của torch.cuda.is_available()), không phải "
                       f"{type(cuda_available).__name__}.",
                       f"cuda_available must be True/False (from torch.cuda.is_available()), not "
                       f"{type(cuda_available).__name__}.")
    elif cuda_available != actual_available:
        report.problem(f"cuda_available = {cuda_available}, nhưng trên máy này torch.cuda.is_available() trả về "
                       f"{actual_available}. Đừng gõ tay: gọi hàm để hỏi PyTorch.",
                       f"cuda_available = {cuda_available}, but here torch.cuda.is_available() returns "
                       f"{actual_available}. Don't type it: ask PyTorch.")
    if isinstance(gpu_count, bool) or not isinstance(gpu_count, int):
        report.problem(f"gpu_count phải là số nguyên (torch.cuda.device_count()), không phải {type(gpu_count).__name__}.",
                       f"gpu_count must be an int (torch.cuda.device_count()), not {type(gpu_count).__name__}.")
    elif gpu_count != actual_count:
        report.problem(f"gpu_count = {gpu_count}, nhưng máy này thấy {actual_count} GPU (torch.cuda.device_count()).",
                       f"gpu_count = {gpu_count}, but this machine sees {actual_count} GPU(s) (torch.cuda.device_count()).")
    chosen = as_device(device)
    best = _best_device()
    if chosen is None:
        report.problem(f"device phải là torch.device (vd torch.device('cpu')) hoặc tên như 'cuda', không phải "
                       f"{type(device).__name__} {device!r}.",
                       f"device must be a torch.device (e.g. torch.device('cpu')) or a name like 'cuda', not "
                       f"{type(device).__name__} {device!r}.")
    elif chosen.type != best.type:
        override = os.environ.get("LESSONS_DEVICE")
        if override and chosen.type == pick_device().type:
            pass  # the learner asked for this device on purpose (LESSONS_DEVICE)
        elif chosen.type == "cuda":
            report.problem("device là 'cuda' nhưng máy này không có GPU CUDA: viết cứng 'cuda' sẽ lỗi ở đây. "
                           "Chọn theo thứ tự: cuda nếu is_available(), rồi mps, rồi cpu.",
                           "device is 'cuda' but this machine has no CUDA GPU: hard-coding 'cuda' fails here. "
                           "Choose in order: cuda if is_available(), then mps, then cpu.")
        else:
            report.problem(f"device = {chosen}, nhưng máy này có {best} (các thiết bị: {', '.join(available_devices())}). "
                           "Code device-agnostic chọn thiết bị mạnh nhất có sẵn: cuda > mps > cpu.",
                           f"device = {chosen}, but this machine has {best} (devices: {', '.join(available_devices())}). "
                           "Device-agnostic code picks the best one available: cuda > mps > cpu.")
    if report.problems:
        return
    if actual_available:
        report.success(f"máy này có {actual_count} GPU CUDA và bạn chọn {chosen}. Làm tiếp ô %%gpu bên dưới "
                       "để đọc tên và thuộc tính GPU.",
                       f"this machine has {actual_count} CUDA GPU(s) and you chose {chosen}. Go on with the %%gpu "
                       "cell below to read the GPU's name and properties.")
    else:
        report.success(f"đúng với máy này: không có GPU CUDA, thiết bị dùng là {chosen}.",
                       f"right for this machine: no CUDA GPU, the device to use is {chosen}.")
        report.note("Trên GPU (vd Colab T4): cuda_available là True, gpu_count ≥ 1, device là cuda, và ô %%gpu "
                    "in tên GPU, compute capability và dung lượng VRAM. Cùng một đoạn code, không sửa dòng nào.",
                    "On a GPU (e.g. a Colab T4): cuda_available is True, gpu_count ≥ 1, device is cuda, and the "
                    "%%gpu cell prints the GPU's name, compute capability and memory. Same code, no line changed.")


ex1 = Exercise(
    "ex1",
    ("Bài 1 · Máy của bạn có gì?", "Exercise 1 · What does this machine have?"),
    _evaluate_env,
    hints=[
        ("Ba hàm cần dùng: torch.cuda.is_available(), torch.cuda.device_count(), và một khối if/elif/else "
         "để chọn device.",
         "Three calls: torch.cuda.is_available(), torch.cuda.device_count(), and an if/elif/else choosing the device."),
        ("Thứ tự ưu tiên: torch.device('cuda') nếu CUDA có, torch.device('mps') nếu torch.backends.mps.is_available(), "
         "còn lại torch.device('cpu'). Hoặc gọn hơn: pick_device().",
         "Order: torch.device('cuda') if CUDA is there, torch.device('mps') if torch.backends.mps.is_available(), "
         "else torch.device('cpu'). Or simply pick_device()."),
    ],
    solution='''
cuda_available = torch.cuda.is_available()
gpu_count = torch.cuda.device_count()
if cuda_available:
    device = torch.device("cuda")
elif torch.backends.mps.is_available():
    device = torch.device("mps")
else:
    device = torch.device("cpu")
''',
)


def _evaluate_gpu(report: Report, gpu_name=None, props=None) -> None:
    if not torch.cuda.is_available():
        report.problem("phần này cần GPU CUDA; máy này không có (ô %%gpu lẽ ra đã bỏ qua nó).",
                       "this part needs a CUDA GPU; this machine has none (the %%gpu cell should have skipped it).",
                       stop=True)
    blank = [name for name, value in (("gpu_name", gpu_name), ("props", props)) if is_blank(value)]
    if blank:
        report.missing_part(f"chưa điền {', '.join(blank)}.", f"{', '.join(blank)} not filled in yet.", stop=True)
    _check_called(report, "gpu_name", gpu_name, "torch.cuda.get_device_name")
    _check_called(report, "props", props, "torch.cuda.get_device_properties")
    real = torch.cuda.get_device_properties(0)
    if not isinstance(gpu_name, str):
        report.problem(f"gpu_name phải là chuỗi (torch.cuda.get_device_name(0)), không phải {type(gpu_name).__name__}.",
                       f"gpu_name must be a str (torch.cuda.get_device_name(0)), not {type(gpu_name).__name__}.")
    elif gpu_name != real.name:
        report.problem(f"gpu_name = {gpu_name!r}, nhưng GPU 0 tên là {real.name!r}.",
                       f"gpu_name = {gpu_name!r}, but GPU 0 is called {real.name!r}.")
    if not hasattr(props, "total_memory") or not hasattr(props, "multi_processor_count"):
        report.problem("props phải là kết quả của torch.cuda.get_device_properties(0) (có total_memory, "
                       "multi_processor_count, major, minor).",
                       "props must be the result of torch.cuda.get_device_properties(0) (with total_memory, "
                       "multi_processor_count, major, minor).")
    elif props.total_memory != real.total_memory:
        report.problem("props không phải thuộc tính của GPU 0: dùng torch.cuda.get_device_properties(0).",
                       "props are not GPU 0's properties: use torch.cuda.get_device_properties(0).")
    if report.problems:
        return
    gib = real.total_memory / 2**30
    report.success(f"{real.name}: compute capability {real.major}.{real.minor}, {gib:.1f} GiB VRAM, "
                   f"{real.multi_processor_count} SM (đọc từ máy này).",
                   f"{real.name}: compute capability {real.major}.{real.minor}, {gib:.1f} GiB memory, "
                   f"{real.multi_processor_count} SMs (read from this machine).")


ex1_gpu = Exercise(
    "ex1_gpu",
    ("Bài 1 (GPU) · Tên và thuộc tính GPU", "Exercise 1 (GPU) · GPU name and properties"),
    _evaluate_gpu,
    hints=[("torch.cuda.get_device_name(0) và torch.cuda.get_device_properties(0).",
            "torch.cuda.get_device_name(0) and torch.cuda.get_device_properties(0).")],
    solution='''
gpu_name = torch.cuda.get_device_name(0)
props = torch.cuda.get_device_properties(0)
''',
    gpu=True,
)

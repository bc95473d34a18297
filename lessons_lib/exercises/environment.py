"""Exercise 1: what does this machine have? (availability, GPU count, the device to use; GPU name and properties)."""

from __future__ import annotations

import torch

from ..device import available_devices, pick_device
from ._core import Exercise, Report, as_device


def _not_a_function(report: Report, name: str, value: object, call: str) -> None:
    if callable(value):
        report.problem(f"{name} đang là một hàm chứ không phải kết quả: bạn quên gọi nó, viết {call}() "
                       "(có dấu ngoặc).", stop=True)


def _evaluate_env(report: Report, cuda_available=None, gpu_count=None, device=None) -> None:
    report.require_filled(cuda_available=cuda_available, gpu_count=gpu_count, device=device)
    _not_a_function(report, "cuda_available", cuda_available, "torch.cuda.is_available")
    _not_a_function(report, "gpu_count", gpu_count, "torch.cuda.device_count")
    available, count = torch.cuda.is_available(), torch.cuda.device_count()
    if not isinstance(cuda_available, bool):
        report.problem(f"cuda_available phải là True/False (kết quả của torch.cuda.is_available()), không phải "
                       f"{type(cuda_available).__name__}.")
    elif cuda_available != available:
        report.problem(f"cuda_available = {cuda_available}, nhưng trên máy này torch.cuda.is_available() trả về "
                       f"{available}. Đừng gõ tay: gọi hàm để hỏi PyTorch.")
    if isinstance(gpu_count, bool) or not isinstance(gpu_count, int):
        report.problem(f"gpu_count phải là số nguyên (torch.cuda.device_count()), không phải {type(gpu_count).__name__}.")
    elif gpu_count != count:
        report.problem(f"gpu_count = {gpu_count}, nhưng máy này thấy {count} GPU (torch.cuda.device_count()).")
    chosen = as_device(device)
    best = "cuda" if available else "mps" if torch.backends.mps.is_available() else "cpu"
    if chosen is None:
        report.problem(f"device phải là torch.device (vd torch.device('cpu')) hoặc tên như 'cuda', không phải "
                       f"{type(device).__name__} {device!r}.")
    elif chosen.type not in {best, pick_device().type}:  # pick_device() follows LESSONS_DEVICE, chosen on purpose
        if chosen.type == "cuda":
            report.problem("device là 'cuda' nhưng máy này không có GPU CUDA: viết cứng 'cuda' sẽ lỗi ở đây. "
                           "Chọn theo thứ tự: cuda nếu is_available(), rồi mps, rồi cpu.")
        else:
            report.problem(f"device = {chosen}, nhưng máy này có {best} (các thiết bị: "
                           f"{', '.join(available_devices())}). Code device-agnostic chọn thiết bị mạnh nhất có sẵn: "
                           "cuda > mps > cpu.")
    if report.problems:
        return
    if available:
        report.success(f"máy này có {count} GPU CUDA và bạn chọn {chosen}. Làm tiếp ô %%gpu bên dưới "
                       "để đọc tên và thuộc tính GPU.")
        return
    report.success(f"đúng với máy này: không có GPU CUDA, thiết bị dùng là {chosen}.")
    report.note("Trên GPU (vd Colab T4): cuda_available là True, gpu_count ≥ 1, device là cuda, và ô %%gpu "
                "in tên GPU, compute capability và dung lượng VRAM. Cùng một đoạn code, không sửa dòng nào.")


ex1 = Exercise(
    "ex1", "Bài 1 · Máy của bạn có gì?", _evaluate_env,
    hints=[
        "Ba hàm cần dùng: torch.cuda.is_available(), torch.cuda.device_count(), và một khối if/elif/else "
        "để chọn device.",
        "Thứ tự ưu tiên: torch.device('cuda') nếu CUDA có, torch.device('mps') nếu torch.backends.mps.is_available(), "
        "còn lại torch.device('cpu'). Hoặc gọn hơn: pick_device().",
    ],
)


def _evaluate_gpu(report: Report, gpu_name=None, props=None) -> None:
    report.require_gpu()
    report.require_filled(gpu_name=gpu_name, props=props)
    _not_a_function(report, "gpu_name", gpu_name, "torch.cuda.get_device_name")
    _not_a_function(report, "props", props, "torch.cuda.get_device_properties")
    real = torch.cuda.get_device_properties(0)
    if not isinstance(gpu_name, str):
        report.problem(f"gpu_name phải là chuỗi (torch.cuda.get_device_name(0)), không phải {type(gpu_name).__name__}.")
    elif gpu_name != real.name:
        report.problem(f"gpu_name = {gpu_name!r}, nhưng GPU 0 tên là {real.name!r}.")
    if not hasattr(props, "total_memory") or not hasattr(props, "multi_processor_count"):
        report.problem("props phải là kết quả của torch.cuda.get_device_properties(0) (có total_memory, "
                       "multi_processor_count, major, minor).")
    elif props.total_memory != real.total_memory:
        report.problem("props không phải thuộc tính của GPU 0: dùng torch.cuda.get_device_properties(0).")
    report.success(f"{real.name}: compute capability {real.major}.{real.minor}, {real.total_memory / 2**30:.1f} GiB "
                   f"VRAM, {real.multi_processor_count} SM (đọc từ máy này).")


ex1_gpu = Exercise(
    "ex1_gpu", "Bài 1 (GPU) · Tên và thuộc tính GPU", _evaluate_gpu,
    hints=["torch.cuda.get_device_name(0) và torch.cuda.get_device_properties(0)."], gpu=True,
)

"""Lesson 01's checked task: ``choose_device(prefer=None)`` on four simulated machines, then on this one."""

from __future__ import annotations

import contextlib
import inspect
from dataclasses import dataclass
from types import SimpleNamespace
from unittest import mock

import torch

from ..device import as_device
from ._core import Case, Exercise, Report, Wrong, on_gpu_note, raised, run_cases, source_has


@dataclass(frozen=True)
class _Machine:
    """A simulated machine: what is usable at run time and the accelerator its build was compiled for."""

    name: str
    cuda: bool
    mps: bool
    built: str | None = None

    @property
    def best(self) -> str:
        return "cuda" if self.cuda else "mps" if self.mps else "cpu"


_CPU_ONLY = _Machine("máy chỉ có CPU (giả lập)", cuda=False, mps=False)
_CUDA_NO_GPU = _Machine("bản CUDA trên máy không có GPU (giả lập)", cuda=False, mps=False, built="cuda")
_COLAB_T4 = _Machine("Colab T4 (giả lập)", cuda=True, mps=False, built="cuda")
_MAC = _Machine("Mac chip Apple, MPS (giả lập)", cuda=False, mps=True, built="mps")
_MACHINES = (_CPU_ONLY, _CUDA_NO_GPU, _COLAB_T4, _MAC)


def _has_check_available() -> bool:
    """Return True when this torch's ``current_accelerator`` takes ``check_available`` (torch 2.7+)."""
    return "check_available" in inspect.signature(torch.accelerator.current_accelerator).parameters


def _fake_current_accelerator(machine: _Machine, probe: SimpleNamespace):
    built, usable = torch.device(machine.built) if machine.built else None, machine.best != "cpu"
    if _has_check_available():  # torch >= 2.7: the compile-time accelerator, checked at run time only on request
        def current_accelerator(check_available: bool = False):
            if not check_available:
                probe.compile_time_calls.append(built)
            return built if usable or not check_available else None
    else:  # torch 2.6: no argument; raises when no accelerator is available
        def current_accelerator():
            if not usable:
                raise RuntimeError("Cannot access accelerator device when none is available.")
            return built
    return current_accelerator


@contextlib.contextmanager
def _simulated(machine: _Machine):
    """Make PyTorch's build and availability checks answer as on `machine`; yield a probe of what was asked."""
    # compile_time_calls: the calls of current_accelerator() without the runtime check
    probe = SimpleNamespace(machine=machine, cuda_check=mock.Mock(return_value=machine.cuda), compile_time_calls=[])
    usable = machine.best != "cpu"
    patches = [(torch.cuda, "is_available", probe.cuda_check),
               (torch.cuda, "device_count", mock.Mock(return_value=int(machine.cuda))),
               (torch.backends.mps, "is_available", mock.Mock(return_value=machine.mps)),
               (torch.backends.mps, "is_built", mock.Mock(return_value=machine.built == "mps")),
               (torch.backends.cuda, "is_built", mock.Mock(return_value=machine.built == "cuda")),
               (torch.version, "cuda", "12.8" if machine.built == "cuda" else None)]
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:  # torch >= 2.6
        patches.append((accelerator, "current_accelerator", _fake_current_accelerator(machine, probe)))
        patches += [(accelerator, name, mock.Mock(return_value=value))
                    for name, value in (("is_available", usable), ("device_count", int(usable)))
                    if hasattr(accelerator, name)]
    with contextlib.ExitStack() as stack:
        for target, name, value in patches:
            stack.enter_context(mock.patch.object(target, name, value))
        yield probe


def _as_result(report: Report, value) -> torch.device:
    """Return the learner's result as a device, or record why it is not one and stop."""
    report.require_return(value, "choose_device()", "device")
    try:
        device = as_device(value)
    except (TypeError, ValueError):
        report.problem(f"choose_device() phải trả về torch.device, không phải {type(value).__name__} {value!r}.",
                       stop=True)
    if isinstance(value, str) and not any(n.startswith("choose_device trả về chuỗi") for n in report.notes):
        report.note(f"choose_device trả về chuỗi {value!r}: chạy được, nhưng torch.device({value!r}) rõ hơn.")
    return device


def _case(machine: _Machine, *prefer: str) -> Case:
    return Case(f"choose_device({', '.join(map(repr, prefer))}) trên {machine.name}", prefer,
                torch.device(prefer[0] if prefer else machine.best), setup=lambda: _simulated(machine))


def _cuda_without_gpu(a) -> bool:
    return a.case.want.type == "cpu" and not a.case.args and a.got.type == "cuda"


_CASES = (*map(_case, _MACHINES), _case(_COLAB_T4, "cpu"), _case(_MAC, "cpu"), _case(_COLAB_T4, "cuda:0"))
_IS_AVAILABLE = "chỉ chọn cuda khi torch.cuda.is_available() là True"
_MISTAKES = (
    Wrong("check_available on torch 2.6", raised(TypeError, "check_available"), lambda exc: (
        f"PyTorch {torch.__version__} chưa có tham số check_available (có từ 2.7): hỏi "
        "torch.accelerator.is_available() trước.")),
    Wrong("torch.device(None)", raised(TypeError, r"^device\(\)"),
          "torch.device(None) không hợp lệ: chỉ gọi torch.device(prefer) khi prefer is not None."),
    Wrong("no optional prefer", raised(TypeError, r"^choose_device\(\) (takes|missing)"),
          "choose_device cần đúng một tham số tuỳ chọn: def choose_device(prefer=None):."),
)
_WRONGS = (
    *_MISTAKES,
    Wrong("prefer ignored", lambda a: a.case.args, lambda a: (
        f"{a.case.label} trả về {a.got}: khi prefer không phải None, trả về torch.device(prefer).")),
    Wrong("forgotten parentheses", lambda a: _cuda_without_gpu(a) and not a.seen.cuda_check.called
          and source_has(a.fn, r"is_available\b(?!\s*\()"),
          "trên máy chỉ có CPU, hàm trả về cuda: thiếu dấu ngoặc, viết torch.cuda.is_available() (một hàm luôn "
          "'truthy')."),
    Wrong("hard-coded cuda", lambda a: _cuda_without_gpu(a) and a.seen.machine.built != "cuda",
          f"trên máy chỉ có CPU, 'cuda' viết cứng sẽ lỗi: {_IS_AVAILABLE}."),
    Wrong("the build's accelerator", lambda a: _cuda_without_gpu(a) and a.seen.compile_time_calls, lambda a: (
        f"{a.case.label}: current_accelerator() trả về accelerator bản build được biên dịch cho, không hỏi máy: "
        "thêm check_available=True, hoặc hỏi torch.accelerator.is_available() trước.")),
    Wrong("asks the build", lambda a: _cuda_without_gpu(a) and source_has(a.fn, r"version\.cuda|is_built\s*\("),
          lambda a: f"{a.case.label}: torch.version.cuda / is_built() chỉ nói bản build có CUDA, không nói máy có "
                    f"GPU; {_IS_AVAILABLE}."),
    Wrong("cuda without a GPU", _cuda_without_gpu,
          lambda a: f"{a.case.label}: hàm trả về cuda dù máy không có GPU; {_IS_AVAILABLE}."),
    Wrong("misses mps", lambda a: a.case.want.type == "mps",
          lambda a: f"trên Mac có MPS, hàm trả về {a.got.type}: thêm nhánh torch.backends.mps.is_available()."),
    Wrong("misses cuda", lambda a: a.case.want.type == "cuda", lambda a: (
        f"trên máy có GPU CUDA, hàm trả về {a.got.type}: hỏi torch.cuda.is_available() trước tiên (cuda > mps > "
        "cpu).")),
)


def _evaluate(report: Report, choose_device=None, x=None) -> None:
    run_cases(report, choose_device, "choose_device(prefer=None)", _CASES, _WRONGS, read=_as_result,
              same=lambda got, want: got.type == want.type and want.index in (None, got.index), mistakes=_MISTAKES)
    here = _as_result(report, report.call("choose_device() trên máy này", choose_device))
    if x is None or x is ...:
        report.missing_part("chưa tạo x: x = torch.ones(3, device=choose_device()).", stop=True)
    if not isinstance(x, torch.Tensor):
        report.problem(f"x phải là một tensor, không phải {type(x).__name__}.", stop=True)
    if x.device.type != here.type:
        report.problem(f"x đang ở {x.device}, không phải {here}: tạo x với device=choose_device().", stop=True)
    report.success(f"đúng trên cả bốn máy giả lập, prefer được tôn trọng, và trên máy này x nằm ở {x.device}.")
    on_gpu_note(report, here, "choose_device() trả về cuda và x nằm ở cuda:0, cùng một đoạn code không sửa dòng nào.")


task1 = Exercise("task1", "Bài 14.1 · Nhiệm vụ 1 · Viết choose_device()", _evaluate, wrongs=_WRONGS,
                 hints=["prefer không phải None thì trả về torch.device(prefer); không thì hỏi cuda, rồi mps, rồi cpu.",
                        "if prefer is not None: return torch.device(prefer)\n"
                        "if torch.cuda.is_available(): return torch.device('cuda')\n"
                        "if torch.backends.mps.is_available(): return torch.device('mps')\n"
                        "return torch.device('cpu')   # rồi: x = torch.ones(3, device=choose_device())"])

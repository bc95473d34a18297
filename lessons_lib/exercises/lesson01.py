"""Lesson 01's checked task: write ``choose_device(prefer=None)`` (CUDA > MPS > CPU, or the device asked for).

The checker runs the learner's function on four *simulated* machines (CPU only, Colab's CPU runtime, a Colab
T4, a Mac with MPS) by patching what PyTorch answers there: ``torch.cuda.is_available`` / ``device_count``,
``torch.backends.mps.is_available``, the build (``torch.version.cuda``, ``torch.backends.*.is_built``) and
``torch.accelerator``, which keeps its real meaning: ``current_accelerator()`` names the accelerator the build
was *compiled* for, ``current_accelerator(check_available=True)`` (torch 2.7+) and ``is_available()`` ask the
machine. So every branch is tested on any computer; then the function runs on this machine for real, with a
tensor the learner created on the chosen device.

    from lessons_lib.exercises.lesson01 import task1
    task1.check(choose_device, x)
"""

from __future__ import annotations

import contextlib
import inspect
import re
from dataclasses import dataclass, field
from unittest import mock

import torch

from ..i18n import tr
from ._core import Exercise, Report, Stop, as_device, is_blank, on_gpu_note

GROUP = "lesson01"


@dataclass(frozen=True)
class Machine:
    """A simulated machine: the accelerator its PyTorch build has, what is usable at run time, the device to pick."""

    name_vi: str
    name_en: str
    cuda: bool
    mps: bool
    built: str | None = None  # the accelerator the build was compiled for ("cuda", "mps") or None (CPU-only build)

    def __post_init__(self) -> None:
        usable = "cuda" if self.cuda else "mps" if self.mps else None
        if usable is not None and self.built != usable:
            raise ValueError(f"a machine that can use {usable} needs a build compiled for it (built={usable!r})")

    @property
    def best(self) -> str:
        """Return the device type a device-agnostic program picks here."""
        return "cuda" if self.cuda else "mps" if self.mps else "cpu"


CPU_ONLY = Machine("máy chỉ có CPU (giả lập)", "a CPU-only machine (simulated)", cuda=False, mps=False)
COLAB_CPU = Machine("Colab CPU runtime: bản build CUDA, không có GPU/driver (giả lập)",
                    "Colab's CPU runtime: a CUDA build, no GPU or driver (simulated)", cuda=False, mps=False,
                    built="cuda")
COLAB_T4 = Machine("Colab T4 (giả lập)", "a Colab T4 (simulated)", cuda=True, mps=False, built="cuda")
MAC = Machine("Mac chip Apple, MPS (giả lập)", "an Apple-silicon Mac, MPS (simulated)", cuda=False, mps=True,
              built="mps")
MACHINES = (CPU_ONLY, COLAB_CPU, COLAB_T4, MAC)


@dataclass
class Probe:
    """What the learner's code asked PyTorch on a simulated machine."""

    cuda_check: mock.Mock
    compile_time_calls: list = field(default_factory=list)  # current_accelerator() calls without the runtime check


def _has_check_available(accelerator) -> bool:
    """Return True when this torch's ``current_accelerator`` takes ``check_available`` (added in torch 2.7)."""
    try:
        return "check_available" in inspect.signature(accelerator.current_accelerator).parameters
    except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
        return False


def _fake_current_accelerator(machine: Machine, probe: Probe, with_argument: bool):
    """Return a ``current_accelerator`` that answers as the running torch's version does on `machine`."""
    built = torch.device(machine.built) if machine.built else None
    usable = machine.best != "cpu"
    if with_argument:  # torch >= 2.7: the compile-time accelerator, checked at run time only on request
        def current_accelerator(check_available: bool = False):
            if not check_available:
                probe.compile_time_calls.append(built)
                return built
            return built if usable else None
    else:  # torch 2.6: no argument; raises when no accelerator is available
        def current_accelerator():
            if not usable:
                raise RuntimeError("Cannot access accelerator device when none is available.")
            return built
    return current_accelerator


@contextlib.contextmanager
def simulated(machine: Machine):
    """Make PyTorch's build and availability checks answer as on `machine`; yield a `Probe` of what was asked."""
    if not isinstance(machine, Machine):
        raise TypeError(f"machine must be a Machine (e.g. CPU_ONLY, COLAB_CPU), not {type(machine).__name__}")
    probe = Probe(mock.Mock(return_value=machine.cuda))
    with contextlib.ExitStack() as stack:
        patch = stack.enter_context
        patch(mock.patch.object(torch.cuda, "is_available", probe.cuda_check))
        patch(mock.patch.object(torch.cuda, "device_count", mock.Mock(return_value=int(machine.cuda))))
        patch(mock.patch.object(torch.backends.mps, "is_available", mock.Mock(return_value=machine.mps)))
        patch(mock.patch.object(torch.backends.mps, "is_built", mock.Mock(return_value=machine.built == "mps")))
        patch(mock.patch.object(torch.backends.cuda, "is_built", mock.Mock(return_value=machine.built == "cuda")))
        patch(mock.patch.object(torch.version, "cuda", "12.8" if machine.built == "cuda" else None))
        accelerator = getattr(torch, "accelerator", None)
        if accelerator is not None:  # torch >= 2.6
            usable = machine.best != "cpu"
            fake = _fake_current_accelerator(machine, probe, _has_check_available(accelerator))
            patch(mock.patch.object(accelerator, "current_accelerator", fake))
            for name, value in (("is_available", usable), ("device_count", int(usable))):
                if hasattr(accelerator, name):
                    patch(mock.patch.object(accelerator, name, mock.Mock(return_value=value)))
        yield probe


def _wrong(report: Report, text: str) -> None:
    """Record a problem (Vietnamese only) and stop the evaluation."""
    report.problems.append(text)
    raise Stop


def _as_result(report: Report, value, call: str) -> torch.device:
    """Return the learner's result as a device, or record why it is not one and stop."""
    if value is None:
        report.missing_part(f"{call} chưa trả về gì (thiếu return device).",
                            f"{call} returns nothing yet (no return device).", stop=True)
    device = as_device(value)
    if device is None:
        report.problem(f"{call} phải trả về một torch.device (vd torch.device('cpu')), không phải "
                       f"{type(value).__name__} {value!r}.",
                       f"{call} must return a torch.device (e.g. torch.device('cpu')), not "
                       f"{type(value).__name__} {value!r}.", stop=True)
    if isinstance(value, str):
        note = tr(f"choose_device trả về chuỗi (vd {value!r}) thay vì torch.device: chạy được, nhưng "
                  f"torch.device({value!r}) rõ hơn (có .type, .index, và tên sai báo lỗi ngay).",
                  f"choose_device returns a string (e.g. {value!r}) instead of a torch.device: it works, but "
                  f"torch.device({value!r}) is clearer (it has .type and .index, and a misspelt name fails at once).")
        if not any(n.startswith(note[:30]) for n in report.notes):
            report.notes.append(note)
    return device


def _binds(fn, args) -> bool:
    """Return True when `fn` can be called with `args` (or its signature cannot be read)."""
    try:
        inspect.signature(fn).bind(*args)
    except TypeError:
        return False
    except ValueError:  # pragma: no cover - a builtin without a signature
        return True
    return True


def _call(report: Report, choose_device, machine: Machine, *args):
    """Call the learner's function on a simulated machine; turn its errors into specific feedback."""
    call = f"choose_device({', '.join(repr(a) for a in args)})"
    what = tr(f"{call} trên {machine.name_vi}", f"{call} on {machine.name_en}")
    if not _binds(choose_device, args):
        report.problem(f"{call} không gọi được: hàm cần đúng một tham số tuỳ chọn, viết "
                       "def choose_device(prefer=None):.",
                       f"{call} cannot be called: the function needs one optional parameter, write "
                       "def choose_device(prefer=None):.", stop=True)
    with simulated(machine) as probe:
        try:
            return choose_device(*args), probe
        except Stop:
            raise
        except TypeError as exc:
            text = str(exc)
            if "check_available" in text:
                _wrong(report, f"{call} báo TypeError ({text}): PyTorch {torch.__version__} chưa có tham số "
                               "check_available (có từ 2.7). Hỏi torch.accelerator.is_available() trước, hoặc dùng "
                               "torch.cuda.is_available() / torch.backends.mps.is_available().")
            if not args and "device()" in text:
                report.problem("choose_device() báo lỗi khi prefer là None: torch.device(None) không hợp lệ. Chỉ "
                               "dùng torch.device(prefer) khi prefer is not None.",
                               "choose_device() fails when prefer is None: torch.device(None) is invalid. Use "
                               "torch.device(prefer) only when prefer is not None.", stop=True)
            report.error(what, exc)
        except Exception as exc:  # noqa: BLE001 - the learner's code may raise anything
            report.error(what, exc)


def _source(fn) -> str:
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return ""


def _mentions_uncalled_check(fn) -> bool:
    """Return True when `fn`'s source names ``is_available`` without calling it (``if torch.cuda.is_available:``)."""
    return re.search(r"is_available\b(?!\s*\()", _source(fn)) is not None


def _asks_the_build(fn) -> bool:
    """Return True when `fn`'s source asks what the build has (torch.version.cuda, is_built()) to choose a device."""
    return re.search(r"version\.cuda|is_built\s*\(", _source(fn)) is not None


def _check_machine(report: Report, choose_device, machine: Machine) -> None:
    result, probe = _call(report, choose_device, machine)
    device = _as_result(report, result, "choose_device()")
    if device.type == machine.best:
        return
    if machine.best == "cpu" and device.type == "cuda":
        if not probe.cuda_check.called and _mentions_uncalled_check(choose_device):
            report.problem("trên máy chỉ có CPU, hàm vẫn trả về cuda mà không hề gọi torch.cuda.is_available(): "
                           "có lẽ bạn quên dấu ngoặc. `if torch.cuda.is_available:` luôn đúng vì một hàm luôn là "
                           "'truthy'; viết torch.cuda.is_available().",
                           "on a CPU-only machine the function still returns cuda without ever calling "
                           "torch.cuda.is_available(): you probably forgot the parentheses. "
                           "`if torch.cuda.is_available:` is always true (a function is truthy); write "
                           "torch.cuda.is_available().", stop=True)
        if machine.built == "cuda" and probe.compile_time_calls:
            _wrong(report, f"trên {machine.name_vi}, hàm trả về cuda. torch.accelerator.current_accelerator() "
                           "(không có check_available=True) trả về accelerator mà bản build được biên dịch cho, "
                           "không hỏi máy có GPU hay không: bản CUDA cài trên máy không có GPU (Colab/Kaggle CPU "
                           "runtime, laptop Linux cài torch mặc định) vẫn cho cuda. Dùng "
                           "current_accelerator(check_available=True), hoặc hỏi torch.accelerator.is_available() "
                           "trước, hoặc torch.cuda.is_available().")
        if machine.built == "cuda" and _asks_the_build(choose_device):
            _wrong(report, f"trên {machine.name_vi}, hàm trả về cuda: torch.version.cuda / is_built() chỉ nói bản "
                           "build có CUDA, không nói máy có GPU. Chỉ chọn cuda khi torch.cuda.is_available() là True.")
        if machine.built == "cuda":
            _wrong(report, f"trên {machine.name_vi}, hàm trả về cuda dù máy không có GPU. Chỉ chọn cuda khi "
                           "torch.cuda.is_available() là True (câu hỏi lúc chạy: có driver, có GPU).")
        report.problem("trên máy chỉ có CPU, hàm trả về cuda: viết cứng 'cuda' sẽ lỗi ở đây. Chỉ chọn cuda khi "
                       "torch.cuda.is_available() là True.",
                       "on a CPU-only machine the function returns cuda: hard-coding 'cuda' fails there. Choose "
                       "cuda only when torch.cuda.is_available() is True.", stop=True)
    if machine.best == "mps":
        report.problem(f"trên Mac có MPS, hàm trả về {device.type}: bỏ sót MPS. Đây đúng là chỗ thiếu của "
                       "dòng quen thuộc torch.device('cuda' if torch.cuda.is_available() else 'cpu'); thêm "
                       "nhánh elif torch.backends.mps.is_available().",
                       f"on a Mac with MPS the function returns {device.type}: MPS is left out. That is exactly "
                       "what the familiar torch.device('cuda' if torch.cuda.is_available() else 'cpu') misses; add "
                       "an elif torch.backends.mps.is_available() branch.", stop=True)
    if machine.best == "cuda":
        report.problem(f"trên máy có GPU CUDA, hàm trả về {device.type}: thiếu nhánh torch.cuda.is_available(), "
                       "hoặc nó đứng sau nhánh khác. Thứ tự là cuda > mps > cpu: hỏi CUDA trước tiên.",
                       f"on a machine with a CUDA GPU the function returns {device.type}: the "
                       "torch.cuda.is_available() branch is missing or comes after another one. The order is "
                       "cuda > mps > cpu: ask for CUDA first.", stop=True)
    report.problem(f"trên {machine.name_vi}, hàm trả về {device}, đúng phải là {machine.best}.",
                   f"on {machine.name_en}, the function returns {device}, it should be {machine.best}.", stop=True)


def _check_prefer(report: Report, choose_device) -> None:
    for machine, asked in ((COLAB_T4, "cpu"), (MAC, "cpu"), (COLAB_T4, "cuda:0")):
        call = f"choose_device({asked!r})"
        result, _ = _call(report, choose_device, machine, asked)
        device = _as_result(report, result, call)
        if str(device) != str(torch.device(asked)):
            report.problem(f"trên {machine.name_vi}, {call} trả về {device}: tham số prefer bị bỏ qua. Khi "
                           "prefer không phải None, trả về đúng torch.device(prefer) (vd để ép chạy trên CPU khi "
                           "gỡ lỗi).",
                           f"on {machine.name_en}, {call} returns {device}: prefer is ignored. When prefer is not "
                           "None, return torch.device(prefer) (e.g. to force the CPU while debugging).", stop=True)


def _evaluate(report: Report, choose_device=None, x=None) -> None:
    report.require_function(choose_device, "choose_device(prefer=None)")
    for machine in MACHINES:
        _check_machine(report, choose_device, machine)
    _check_prefer(report, choose_device)
    here = _as_result(report, report.call(tr("choose_device() trên máy này", "choose_device() on this machine"),
                                          choose_device), "choose_device()")
    if is_blank(x):
        report.missing_part("chưa tạo x: x = torch.ones(3, device=choose_device()).",
                            "x is not created yet: x = torch.ones(3, device=choose_device()).", stop=True)
    if not isinstance(x, torch.Tensor):
        report.problem(f"x phải là một tensor, không phải {type(x).__name__}.",
                       f"x must be a tensor, not {type(x).__name__}.", stop=True)
    if x.device.type != here.type:
        report.problem(f"x đang ở {x.device}, không phải {here} (thiết bị choose_device() chọn trên máy này): "
                       "tạo x với device=choose_device().",
                       f"x is on {x.device}, not {here} (the device choose_device() picks here): create x with "
                       "device=choose_device().", stop=True)
    done = (f"đúng trên cả bốn máy giả lập (CPU → cpu, Colab CPU runtime có bản CUDA → cpu, Colab T4 → cuda, "
            f"Mac → mps), prefer được tôn trọng, và trên máy này x nằm ở {x.device}.")
    report.success(done, done)
    on_gpu_note(report, here, "choose_device() trả về cuda và x nằm ở cuda:0, cùng một đoạn code không sửa dòng nào.",
                "choose_device() returns cuda and x lives on cuda:0, with the very same code.")


task1 = Exercise(
    "task1",
    ("Bài 14.1 · Nhiệm vụ 1 · Viết choose_device()", "Lesson 14.1 · Task 1 · Write choose_device()"),
    _evaluate,
    hints=[
        ("Hai việc: nếu prefer không phải None thì trả về torch.device(prefer); còn lại hỏi lần lượt "
         "torch.cuda.is_available(), rồi torch.backends.mps.is_available(), cuối cùng là CPU.",
         "Two jobs: if prefer is not None return torch.device(prefer); otherwise ask "
         "torch.cuda.is_available(), then torch.backends.mps.is_available(), and fall back to the CPU."),
        ("if prefer is not None: return torch.device(prefer)\n"
         "if torch.cuda.is_available(): return torch.device('cuda')\n"
         "if torch.backends.mps.is_available(): return torch.device('mps')\n"
         "return torch.device('cpu')   # rồi: x = torch.ones(3, device=choose_device())",
         "if prefer is not None: return torch.device(prefer)\n"
         "if torch.cuda.is_available(): return torch.device('cuda')\n"
         "if torch.backends.mps.is_available(): return torch.device('mps')\n"
         "return torch.device('cpu')   # then: x = torch.ones(3, device=choose_device())"),
    ],
    solution='''
def choose_device(prefer=None):
    if prefer is not None:                   # người dùng chỉ định: tôn trọng lựa chọn đó
        return torch.device(prefer)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")

x = torch.ones(3, device=choose_device())    # tạo thẳng trên thiết bị đã chọn
''',
    group=GROUP,
)

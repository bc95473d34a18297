"""Show intentional errors readably (`expect_error`) and explain common PyTorch errors (`explain`)."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass

from .i18n import tr

_MAX_MESSAGE_LINES = 6


class ExpectedErrorMissing(AssertionError):
    """Raised when a block that should fail ran without the expected error."""


def short_message(exc: BaseException, max_lines: int = _MAX_MESSAGE_LINES) -> str:
    """Return "Type: message" for `exc`, cut to `max_lines` lines."""
    if not isinstance(exc, BaseException):
        raise TypeError(f"exc must be an exception instance, got {type(exc).__name__}")
    lines = str(exc).strip().splitlines() or [""]
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], "…"]
    return f"{type(exc).__name__}: " + "\n".join(lines)


class expect_error:  # noqa: N801 - used like a function: `with expect_error(RuntimeError):`
    """Run a block that must fail; show the error briefly and let the notebook go on.

    Example::

        with expect_error(RuntimeError, match="same device"):
            model(x_cpu)

    Args:
        error: The exception class (or tuple of classes) the block must raise.
        match: Optional regular expression the error message must contain.
        explain_it: Print the `explain()` hint under the message when one is known.

    After the block, ``.exception`` holds the caught exception. If the block raises
    nothing, ``ExpectedErrorMissing`` is raised so the lesson cannot silently rot; an
    error of another type is not caught and shows as a normal traceback.
    """

    def __init__(self, error: type[BaseException] | tuple[type[BaseException], ...] = Exception,
                 match: str | None = None, explain_it: bool = True):
        errors = error if isinstance(error, tuple) else (error,)
        if not errors or not all(isinstance(e, type) and issubclass(e, BaseException) for e in errors):
            raise TypeError(
                "error must be an exception class such as RuntimeError (or a tuple of them), "
                f"got {error!r}"
            )
        if match is not None and not isinstance(match, str):
            raise TypeError(f"match must be a regular expression string or None, got {type(match).__name__}")
        self.errors = errors
        self.match = match
        self.explain_it = explain_it
        self.exception: BaseException | None = None

    def __enter__(self) -> expect_error:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        names = " / ".join(e.__name__ for e in self.errors)
        if exc is None:
            raise ExpectedErrorMissing(
                tr(
                    f"Mong đợi lỗi {names} nhưng đoạn code chạy không lỗi: bài học này cần xem lại.",
                    f"Expected {names} but the block ran without an error: this lesson needs a look.",
                )
            )
        if not isinstance(exc, self.errors):
            return False  # a different error is a real failure: let it propagate
        if self.match is not None and not re.search(self.match, str(exc)):
            raise ExpectedErrorMissing(
                tr(
                    f"Có lỗi {type(exc).__name__} như mong đợi nhưng thông báo không khớp {self.match!r}:\n{exc}",
                    f"Got {type(exc).__name__} as expected but its message does not match {self.match!r}:\n{exc}",
                )
            ) from exc
        self.exception = exc
        print(tr("⚠️ Lỗi (cố ý) — ", "⚠️ Error (on purpose) — ") + short_message(exc))
        if self.explain_it:
            hint = explain(exc)
            if hint:
                print(hint)
        return True


# --------------------------------------------------------------------------- explain


@dataclass(frozen=True)
class _Rule:
    key: str
    pattern: str
    vi: str
    en: str
    name_devices: bool = False  # add "(here: cuda:0 and cpu)" with the devices named in the message


_DEVICE_NAME = re.compile(r"\b(cuda:\d+|cuda|cpu|mps(?::\d+)?|meta|xpu(?::\d+)?|hpu(?::\d+)?)\b")

# Order matters: the first rule whose pattern is found wins. Patterns are matched against
# "ExceptionType: message". Sources of each message are named in tests/test_errors.py.
_RULES = (
    _Rule(
        "checkpoint_device",
        r"Attempting to deserialize object on (a )?CUDA device|"
        r"Attempting to deserialize object on CUDA device \d+ but torch\.cuda\.device_count\(\) is",
        "File checkpoint ghi tensor trên một GPU mà máy này không có (file lưu trên GPU, máy này chỉ có CPU "
        "hoặc ít GPU hơn). Cách sửa: `torch.load(path, map_location=\"cpu\", weights_only=True)` rồi "
        "`model.to(device)`; khi lưu, lưu `model.state_dict()`.",
        "The checkpoint records tensors on a GPU this machine lacks (saved on a GPU, loaded on a CPU-only "
        "machine or one with fewer GPUs). Fix: `torch.load(path, map_location=\"cpu\", weights_only=True)`, "
        "then `model.to(device)`; save `model.state_dict()`.",
    ),
    _Rule(
        "device_mismatch",
        r"Expected all tensors to be on the same (common )?device|different from other tensors on|"
        r"is not on the expected device|expected to be in the same device|to be on the same device|"
        r"should be the same device|cross-device copies are not allowed|"
        r"Expected tensor to have \S+ Device(Type)?, but got tensor with \S+ Device|"
        r"indices should be either on cpu or on the same device|"
        r"Input type \(torch\.cuda\.\w+\) and weight type \(torch\.(?!cuda\.)\w+\)|"
        r"Input type \(torch\.(?!cuda\.)\w+\) and weight type \(torch\.cuda\.\w+\)|"
        r"Input type \(MPS\w+\) and weight type \(torch\.\w+\)|Input type \(torch\.\w+\) and weight type \(MPS\w+\)",
        "Các tensor trong cùng một phép tính nằm trên các thiết bị khác nhau. Cách sửa: đưa model và mọi "
        "input/target về cùng `device`: `x = x.to(device)` (nhớ gán lại), `model.to(device)`; tensor tạo "
        "trong forward dùng `device=x.device` hoặc `register_buffer`. Xem tensor nào lệch: `describe(model)`.",
        "The tensors in one op live on different devices. Fix: put the model and every input/target on one "
        "`device`: `x = x.to(device)` (reassign!), `model.to(device)`; tensors created in forward use "
        "`device=x.device` or `register_buffer`. See which one is off: `describe(model)`.",
        name_devices=True,
    ),
    _Rule(
        "numpy_from_gpu",
        r"can't convert (\w+)(:\d+)? device type tensor to numpy",
        "NumPy chỉ làm việc với dữ liệu trong RAM của CPU. Cách sửa: `x.detach().cpu().numpy()` "
        "(hoặc `x.numpy(force=True)`).",
        "NumPy only works on data in CPU memory. Fix: `x.detach().cpu().numpy()` (or `x.numpy(force=True)`).",
    ),
    _Rule(
        "numpy_requires_grad",
        r"Can't call numpy\(\) on Tensor that requires grad",
        "Tensor này còn nằm trong đồ thị autograd (requires_grad=True). Cách sửa: `x.detach().cpu().numpy()`.",
        "This tensor is part of the autograd graph (requires_grad=True). Fix: `x.detach().cpu().numpy()`.",
    ),
    _Rule(
        "cuda_oom",
        r"CUDA out of memory|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|"
        r"^OutOfMemoryError: (?!.*(MPS|DefaultCPUAllocator))",
        "GPU hết bộ nhớ. Theo thứ tự rẻ → đắt: giảm batch, gradient accumulation, mixed precision (AMP), "
        "gradient checkpointing, sharding (FSDP/ZeRO). Sau lỗi: `del` các tensor lớn, `torch.cuda.empty_cache()`.",
        "The GPU ran out of memory. Cheapest first: smaller batch, gradient accumulation, mixed precision, "
        "gradient checkpointing, sharding (FSDP/ZeRO). Afterwards: `del` big tensors, `torch.cuda.empty_cache()`.",
    ),
    _Rule(
        "host_oom",
        r"MPS backend out of memory|DefaultCPUAllocator: (can't allocate memory|not enough memory)",
        "Hết bộ nhớ (RAM của máy, hoặc bộ nhớ chung của GPU Apple). Giảm batch / kích thước tensor; "
        "kiểm tra lại shape: một phép tính vô tình tạo tensor khổng lồ (vd broadcast sai) cũng gây lỗi này.",
        "Out of memory (the machine's RAM, or the Apple GPU's shared memory). Use a smaller batch or tensor; "
        "check the shapes too: an accidental huge tensor (e.g. a wrong broadcast) also causes this.",
    ),
    _Rule(
        "no_cuda_build",
        r"Torch not compiled with CUDA enabled",
        "Bản PyTorch này chỉ có CPU, nên mọi thứ ghi cứng \"cuda\" đều lỗi. Dùng `device = pick_device()` "
        "thay vì viết cứng \"cuda\"; muốn dùng GPU thì chọn runtime GPU (Colab/Kaggle) hoặc cài bản có CUDA "
        "(pytorch.org/get-started).",
        "This PyTorch build is CPU-only, so anything hard-coding \"cuda\" fails. Use `device = pick_device()` "
        "instead; for a GPU pick a GPU runtime (Colab/Kaggle) or install a CUDA build (pytorch.org/get-started).",
    ),
    _Rule(
        "driver_too_old",
        r"NVIDIA driver on your system is too old",
        "Driver NVIDIA cũ hơn bản CUDA mà PyTorch được build. Cập nhật driver, hoặc cài bản PyTorch build cho "
        "CUDA cũ hơn (chọn đúng lệnh ở pytorch.org/get-started).",
        "The NVIDIA driver is older than the CUDA PyTorch was built with. Update the driver, or install a "
        "PyTorch built for an older CUDA (pick the command at pytorch.org/get-started).",
    ),
    _Rule(
        "no_driver",
        r"Found no NVIDIA driver|no CUDA-capable device is detected|No CUDA GPUs are available",
        "Bản PyTorch có CUDA nhưng không thấy GPU / driver NVIDIA nào. Colab: Runtime → Change runtime type → "
        "T4 GPU; Kaggle: Settings → Accelerator → GPU T4 ×2; máy riêng: cài driver NVIDIA; kiểm tra cả "
        "biến CUDA_VISIBLE_DEVICES.",
        "PyTorch has CUDA but sees no NVIDIA GPU / driver. Colab: Runtime → Change runtime type → T4 GPU; "
        "Kaggle: Settings → Accelerator → GPU T4 ×2; own machine: install the NVIDIA driver; also check "
        "CUDA_VISIBLE_DEVICES.",
    ),
    _Rule(
        "no_kernel_image",
        r"no kernel image is available for execution on the device|cudaErrorNoKernelImageForDevice",
        "GPU này quá cũ cho bản PyTorch đang cài (bản build không có mã máy cho kiến trúc của nó, vd P100 sm_60 "
        "trên Kaggle). Chọn GPU T4, hoặc cài bản PyTorch cũ hơn còn hỗ trợ GPU này.",
        "This GPU is too old for the installed PyTorch (the build has no kernels for its architecture, e.g. "
        "Kaggle's P100, sm_60). Pick a T4, or install an older PyTorch that still supports it.",
    ),
    _Rule(
        "invalid_device_ordinal",
        r"invalid device ordinal",
        "Số thứ tự GPU không tồn tại (vd `cuda:1` trên máy chỉ có 1 GPU). Xem số GPU bằng "
        "`torch.cuda.device_count()`; dùng `cuda:0` hoặc `pick_device()`.",
        "That GPU index does not exist (e.g. `cuda:1` on a one-GPU machine). Check "
        "`torch.cuda.device_count()`; use `cuda:0` or `pick_device()`.",
    ),
    _Rule(
        "device_side_assert",
        r"device-side assert triggered",
        "Một kernel trên GPU tự kiểm tra và thất bại, thường do nhãn/chỉ số vượt phạm vi (vd nhãn = số lớp trong "
        "CrossEntropyLoss). GPU chạy bất đồng bộ nên traceback có thể chỉ SAI dòng: chạy lại đoạn đó trên CPU để "
        "thấy lỗi rõ ràng, hoặc đặt CUDA_LAUNCH_BLOCKING=1 trước khi import torch. Sau lỗi này CUDA của tiến trình "
        "hỏng hẳn: phải khởi động lại kernel (runtime).",
        "A GPU kernel's own check failed, usually a label/index out of range (e.g. label = number of classes "
        "in CrossEntropyLoss). The GPU runs asynchronously, so the traceback may point at the WRONG line: re-run "
        "that part on the CPU for a clear error, or set CUDA_LAUNCH_BLOCKING=1 before importing torch. CUDA is "
        "unusable in this process afterwards: restart the kernel (runtime).",
    ),
    _Rule(
        "target_out_of_range",
        r"Target -?\d+ is out of bounds",
        "Có nhãn (target) nằm ngoài khoảng 0 … số lớp − 1. Kiểm tra `y.min()`, `y.max()` và số output của lớp "
        "cuối (vd nhãn 1…10 thay vì 0…9). Trên GPU cùng lỗi này hiện ra thành `device-side assert triggered`.",
        "A label (target) is outside 0 … number of classes − 1. Check `y.min()`, `y.max()` and the size of the "
        "last layer (e.g. labels 1…10 instead of 0…9). On a GPU the same bug shows up as "
        "`device-side assert triggered`.",
    ),
    _Rule(
        "target_dtype",
        # torch 2.13: "expected target dtype to be Long or Byte, but got Float"; torch 2.11 and older on CPU:
        # "expected scalar type Long but found Float" (nll_loss reading the targets as int64).
        r"expected target dtype to be Long|\"nll_loss\w*\" not implemented for '(Float|Double|Half)'|"
        r"expected scalar type Long but found (Float|Double|Half|BFloat16)",
        "Nhãn (target) của CrossEntropyLoss/NLLLoss phải là chỉ số lớp kiểu int64 (Long). Cách sửa: "
        "`y = y.long()`.",
        "CrossEntropyLoss/NLLLoss targets must be class indices of dtype int64 (Long). Fix: `y = y.long()`.",
    ),
    _Rule(
        "dtype_mismatch",
        r"expected (m1 and m2|mat1 and mat2) to have the same dtype|(mat1 and mat2|m1 and m2) must have the same dtype|"
        r"expected scalar type \w+ but found \w+|"
        r"Input type \(.*\) and (weight|bias) type \(.*\) should be the same|"
        r"expected both vectors to have same dtype|Found dtype \w+ but expected \w+|same dtype",
        "Hai tensor khác dtype (vd Double và Float, Half và Float). Cách sửa: đổi input theo model: "
        "`x = x.to(next(model.parameters()).dtype)` hoặc `x = x.float()`; dữ liệu từ NumPy mặc định là float64.",
        "The two tensors have different dtypes (e.g. Double vs Float, Half vs Float). Fix: match the model: "
        "`x = x.to(next(model.parameters()).dtype)` or `x = x.float()`; NumPy data defaults to float64.",
    ),
)


def explain_key(exc: BaseException) -> str | None:
    """Return the name of the known error `exc` is (e.g. "device_mismatch"), or None if unknown."""
    if not isinstance(exc, BaseException):
        raise TypeError(f"exc must be an exception instance, got {type(exc).__name__}")
    rule = _match(exc)
    return rule.key if rule else None


def _match(exc: BaseException) -> _Rule | None:
    text = f"{type(exc).__name__}: {exc}"
    for rule in _RULES:
        if re.search(rule.pattern, text, flags=re.S):
            return rule
    return None


def _named_devices(message: str) -> str:
    names = list(dict.fromkeys(m.group(1) for m in _DEVICE_NAME.finditer(message)))
    if len(names) < 2:
        return ""
    listed = tr(" và ", " and ").join(names)
    return tr(f" (ở đây: {listed})", f" (here: {listed})")


_MAC_NO_CUDA = (
    "Đây là bản PyTorch bình thường của Mac, không phải bản cài hỏng: Mac không có GPU NVIDIA nên bản build cho "
    "macOS không bao giờ có CUDA, và đừng cài lại để \"sửa\". GPU của Mac (Apple silicon) dùng thiết bị `mps`: "
    "thay \"cuda\" viết cứng bằng `device = pick_device()` (chọn `mps` khi có, không thì `cpu`). Ô nào thật sự "
    "cần CUDA (`%%gpu`) thì chạy trên Colab/Kaggle với GPU T4."
)


def _mps_build() -> bool:
    """True when this PyTorch was built with MPS (the macOS build), which never has CUDA."""
    try:
        import torch
    except ImportError:
        return False
    mps = getattr(getattr(torch, "backends", None), "mps", None)
    is_built = getattr(mps, "is_built", None)
    return bool(is_built()) if callable(is_built) else False


def explain(exc: BaseException) -> str | None:
    """Return a short explanation and fix (Vietnamese by default) for a known PyTorch error, or None if unknown.

    Recognised: device mismatch (every current wording, incl. the `meta` device's), dtype mismatch,
    wrong target dtype, CUDA and host out-of-memory, NumPy from a GPU tensor or one that requires grad,
    "Torch not compiled with CUDA enabled" (a CPU-only build, or on a Mac the normal MPS build), no NVIDIA driver / driver too old, "no kernel image is
    available" (GPU too old for the build), invalid device ordinal, device-side assert, a label out of range
    (CPU's "Target N is out of bounds"), and a GPU
    checkpoint loaded without ``map_location``.
    """
    if not isinstance(exc, BaseException):
        raise TypeError(f"exc must be an exception instance, got {type(exc).__name__}")
    rule = _match(exc)
    if rule is None:
        return None
    body = _MAC_NO_CUDA if rule.key == "no_cuda_build" and _mps_build() else tr(rule.vi, rule.en)
    if rule.name_devices:
        first, _, rest = body.partition(". ")
        body = first + _named_devices(str(exc)) + ". " + rest
    return "💡 " + "\n   ".join(textwrap.wrap(body, width=100))

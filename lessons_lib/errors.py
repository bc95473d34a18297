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


_RULES = (
    _Rule(
        "device_mismatch",
        r"Expected all tensors to be on the same device|is on \w+(:\d+)?, different from other tensors on|"
        r"Expected .* to be on .* but (got|found)|should be the same device",
        "Các tensor trong phép tính nằm trên các device khác nhau (vd cuda:0 và cpu). "
        "Cách sửa: đưa model và mọi input/target về cùng `device` — `x = x.to(device)` (nhớ gán lại), "
        "`model.to(device)`; tensor tạo trong forward dùng `device=x.device`.",
        "The tensors in this op live on different devices (e.g. cuda:0 and cpu). "
        "Fix: put the model and every input/target on one `device` — `x = x.to(device)` (reassign!), "
        "`model.to(device)`; tensors created in forward use `device=x.device`.",
    ),
    _Rule(
        "numpy_from_gpu",
        r"can't convert (\w+)(:\d+)? device type tensor to numpy",
        "NumPy chỉ sống trong RAM của CPU. Cách sửa: `x.detach().cpu().numpy()`.",
        "NumPy only lives in CPU memory. Fix: `x.detach().cpu().numpy()`.",
    ),
    _Rule(
        "numpy_requires_grad",
        r"Can't call numpy\(\) on Tensor that requires grad",
        "Tensor này còn nằm trong đồ thị autograd. Cách sửa: `x.detach().cpu().numpy()`.",
        "This tensor is part of the autograd graph. Fix: `x.detach().cpu().numpy()`.",
    ),
    _Rule(
        "oom",
        r"CUDA out of memory|OutOfMemoryError|out of memory",
        "GPU hết bộ nhớ. Theo thứ tự rẻ → đắt: giảm batch, gradient accumulation, mixed precision (AMP), "
        "gradient checkpointing, sharding (FSDP/ZeRO). Sau lỗi: `del` tensor lớn, `torch.cuda.empty_cache()`.",
        "The GPU ran out of memory. Cheapest first: smaller batch, gradient accumulation, mixed precision, "
        "gradient checkpointing, sharding (FSDP/ZeRO). Afterwards: `del` big tensors, `torch.cuda.empty_cache()`.",
    ),
    _Rule(
        "no_cuda_build",
        r"Torch not compiled with CUDA enabled",
        "Bản PyTorch này chỉ có CPU. Dùng `device = pick_device()` thay vì viết cứng \"cuda\", "
        "hoặc cài bản có CUDA (pytorch.org/get-started) và chọn runtime GPU.",
        "This PyTorch build is CPU-only. Use `device = pick_device()` instead of hard-coding \"cuda\", "
        "or install a CUDA build (pytorch.org/get-started) on a GPU runtime.",
    ),
    _Rule(
        "no_driver",
        r"Found no NVIDIA driver|NVIDIA driver on your system is too old|no CUDA-capable device is detected",
        "Không có driver NVIDIA / GPU nào. Trên Colab: Runtime → Change runtime type → T4 GPU; "
        "trên Kaggle: Settings → Accelerator → GPU T4 ×2; trên máy riêng: cài driver NVIDIA.",
        "No NVIDIA driver / GPU. Colab: Runtime → Change runtime type → T4 GPU; "
        "Kaggle: Settings → Accelerator → GPU T4 ×2; own machine: install the NVIDIA driver.",
    ),
    _Rule(
        "no_kernel_image",
        r"no kernel image is available for execution on the device",
        "GPU quá cũ cho bản PyTorch này (vd P100 sm_60 trên Kaggle). Chọn GPU T4, hoặc cài bản PyTorch cũ hơn "
        "còn hỗ trợ GPU này.",
        "The GPU is too old for this PyTorch build (e.g. Kaggle's P100, sm_60). Pick a T4, or install an older "
        "PyTorch that still supports this GPU.",
    ),
    _Rule(
        "dtype_mismatch",
        r"expected (scalar type|m1 and m2 to have the same dtype|mat1 and mat2 to have the same dtype)|"
        r"Input type \(.*\) and weight type \(.*\) should be the same|"
        r"expected both vectors to have same dtype|same dtype",
        "Hai tensor khác dtype (vd Double và Float, Half và Float). Cách sửa: `x = x.float()` hoặc "
        "`x.to(dtype=next(model.parameters()).dtype)`; dữ liệu NumPy mặc định float64.",
        "The two tensors have different dtypes (e.g. Double vs Float, Half vs Float). Fix: `x = x.float()` or "
        "`x.to(dtype=next(model.parameters()).dtype)`; NumPy data defaults to float64.",
    ),
)


def explain_key(exc: BaseException) -> str | None:
    """Return the name of the known error `exc` is (e.g. "device_mismatch"), or None if unknown."""
    if not isinstance(exc, BaseException):
        raise TypeError(f"exc must be an exception instance, got {type(exc).__name__}")
    text = f"{type(exc).__name__}: {exc}"
    for rule in _RULES:
        if re.search(rule.pattern, text):
            return rule.key
    return None


def explain(exc: BaseException) -> str | None:
    """Return a short explanation and fix for a known PyTorch error, or None for an unknown one."""
    key = explain_key(exc)
    if key is None:
        return None
    rule = next(r for r in _RULES if r.key == key)
    body = tr(rule.vi, rule.en)
    return "💡 " + "\n   ".join(textwrap.wrap(body, width=100))

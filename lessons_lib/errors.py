"""Show intentional errors readably (`expect_error`) and explain common PyTorch errors (`explain`)."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass


def short_message(exc: BaseException, max_lines: int = 6) -> str:
    """Return "Type: message" for `exc`, cut to `max_lines` lines."""
    lines = str(exc).strip().splitlines() or [""]
    if len(lines) > max_lines:
        lines = [*lines[:max_lines], "…"]
    return f"{type(exc).__name__}: " + "\n".join(lines)


class expect_error:  # noqa: N801 - used like a function: `with expect_error(RuntimeError):`
    """``with expect_error(RuntimeError, match=...):`` a block that must fail; show the error briefly, go on."""

    def __init__(self, error: type[BaseException] | tuple[type[BaseException], ...] = Exception,
                 match: str | None = None, explain_it: bool = True):
        errors = error if isinstance(error, tuple) else (error,)
        if not errors or not all(isinstance(e, type) and issubclass(e, BaseException) for e in errors):
            raise TypeError(f"error phải là một lớp ngoại lệ như RuntimeError (hoặc tuple các lớp), không phải {error!r}")
        if match is not None and not isinstance(match, str):
            raise TypeError(f"match phải là một biểu thức chính quy (str) hoặc None, không phải {type(match).__name__}")
        self.errors = errors
        self.match = match
        self.explain_it = explain_it
        self.exception: BaseException | None = None

    def __enter__(self) -> expect_error:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is None:
            names = " / ".join(e.__name__ for e in self.errors)
            raise AssertionError(f"Mong đợi lỗi {names} nhưng đoạn code chạy không lỗi: bài học này cần xem lại.")
        if not isinstance(exc, self.errors):
            return False  # a different error is a real failure: let it propagate
        if self.match is not None and not re.search(self.match, str(exc)):
            raise AssertionError(f"Có lỗi {type(exc).__name__} như mong đợi nhưng thông báo không khớp "
                                 f"{self.match!r}:\n{exc}") from exc
        self.exception = exc
        print("⚠️ Lỗi (cố ý) — " + short_message(exc))
        hint = explain(exc) if self.explain_it else None
        if hint:
            print(hint)
        return True


@dataclass(frozen=True)
class _Rule:
    key: str
    pattern: str
    hint: str


_DEVICE_NAME = re.compile(r"\b(cuda:\d+|cuda|cpu|mps(?::\d+)?|meta|xpu(?::\d+)?|hpu(?::\d+)?)\b")

# Order matters: the first rule whose pattern is found wins. Patterns are matched against
# "ExceptionType: message". Sources of each message are named in tests/test_errors.py.
_RULES = (
    _Rule("checkpoint_device",
        r"Attempting to deserialize object on (a )?CUDA device|"
        r"Attempting to deserialize object on CUDA device \d+ but torch\.cuda\.device_count\(\) is",
        "File checkpoint ghi tensor trên một GPU mà máy này không có (file lưu trên GPU, máy này chỉ có CPU "
        "hoặc ít GPU hơn). Cách sửa: `torch.load(path, map_location=\"cpu\", weights_only=True)` rồi "
        "`model.to(device)`; khi lưu, lưu `model.state_dict()`."),
    _Rule("device_mismatch",
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
        "trong forward dùng `device=x.device` hoặc `register_buffer`. Xem tensor nào lệch: `describe(model)`."),
    _Rule("numpy_from_gpu",
        r"can't convert (\w+)(:\d+)? device type tensor to numpy",
        "NumPy chỉ làm việc với dữ liệu trong RAM của CPU. Cách sửa: `x.detach().cpu().numpy()` "
        "(hoặc `x.numpy(force=True)`)."),
    _Rule("numpy_requires_grad",
        r"Can't call numpy\(\) on Tensor that requires grad",
        "Tensor này còn nằm trong đồ thị autograd (requires_grad=True). Cách sửa: `x.detach().cpu().numpy()`."),
    _Rule("cuda_oom",
        r"CUDA out of memory|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|"
        r"^OutOfMemoryError: (?!.*(MPS|DefaultCPUAllocator))",
        "GPU hết bộ nhớ. Theo thứ tự rẻ → đắt: giảm batch, gradient accumulation, mixed precision (AMP), "
        "gradient checkpointing, sharding (FSDP/ZeRO). Sau lỗi: `del` các tensor lớn, `torch.cuda.empty_cache()`."),
    _Rule("host_oom",
        r"MPS backend out of memory|DefaultCPUAllocator: (can't allocate memory|not enough memory)",
        "Hết bộ nhớ (RAM của máy, hoặc bộ nhớ chung của GPU Apple). Giảm batch / kích thước tensor; "
        "kiểm tra lại shape: một phép tính vô tình tạo tensor khổng lồ (vd broadcast sai) cũng gây lỗi này."),
    _Rule("cuda_setup",  # the reason on this machine is device.py's one diagnosis, added by explain()
        r"Torch not compiled with CUDA enabled|NVIDIA driver on your system is too old|Found no NVIDIA driver|"
        r"no CUDA-capable device is detected|No CUDA GPUs are available",
        "PyTorch không dùng được CUDA ở đây (bản chỉ có CPU hoặc bản cho Mac, không có GPU / driver NVIDIA, hoặc "
        "driver quá cũ). Cách sửa: dùng `device = pick_device()` thay vì viết cứng \"cuda\" (trên Mac nó chọn "
        "`mps`); `print(environment_report())` nói lý do trên máy này."),
    _Rule("no_kernel_image",
        r"no kernel image is available for execution on the device|cudaErrorNoKernelImageForDevice",
        "GPU này quá cũ cho bản PyTorch đang cài (bản build không có mã máy cho kiến trúc của nó, vd P100 sm_60 "
        "trên Kaggle). Chọn GPU T4, hoặc cài bản PyTorch cũ hơn còn hỗ trợ GPU này."),
    _Rule("unknown_device",
        r"Máy này không có '|Không hiểu thiết bị '",  # pick_device()'s messages
        "Tên thiết bị viết sai, hoặc máy này không có thiết bị đó (vd `cdua`, `cuda:99`, `cuda` trên máy không có "
        "GPU). Cách sửa: xem các thiết bị có ở đây bằng `available_devices()`; dùng `device = pick_device()` thay "
        "vì viết cứng tên thiết bị."),
    _Rule("invalid_device_ordinal",
        r"invalid device ordinal",
        "Số thứ tự GPU không tồn tại (vd `cuda:1` trên máy chỉ có 1 GPU). Xem số GPU bằng "
        "`torch.cuda.device_count()`; dùng `cuda:0` hoặc `pick_device()`."),
    _Rule("device_side_assert",
        r"device-side assert triggered",
        "Một kernel trên GPU tự kiểm tra và thất bại, thường do nhãn/chỉ số vượt phạm vi (vd nhãn = số lớp trong "
        "CrossEntropyLoss). GPU chạy bất đồng bộ nên traceback có thể chỉ SAI dòng: chạy lại đoạn đó trên CPU để "
        "thấy lỗi rõ ràng, hoặc đặt CUDA_LAUNCH_BLOCKING=1 trước khi import torch. Sau lỗi này CUDA của tiến trình "
        "hỏng hẳn: phải khởi động lại kernel (runtime)."),
    _Rule("target_out_of_range",
        r"Target -?\d+ is out of bounds",
        "Có nhãn (target) nằm ngoài khoảng 0 … số lớp − 1. Kiểm tra `y.min()`, `y.max()` và số output của lớp "
        "cuối (vd nhãn 1…10 thay vì 0…9). Trên GPU cùng lỗi này hiện ra thành `device-side assert triggered`."),
    _Rule("target_dtype",
        # torch 2.13: "expected target dtype to be Long or Byte, but got Float"; torch 2.11 and older on CPU:
        # "expected scalar type Long but found Float" (nll_loss reading the targets as int64).
        r"expected target dtype to be Long|\"nll_loss\w*\" not implemented for '(Float|Double|Half)'|"
        r"expected scalar type Long but found (Float|Double|Half|BFloat16)",
        "Nhãn (target) của CrossEntropyLoss/NLLLoss phải là chỉ số lớp kiểu int64 (Long). Cách sửa: "
        "`y = y.long()`."),
    _Rule("dtype_mismatch",
        r"expected (m1 and m2|mat1 and mat2) to have the same dtype|(mat1 and mat2|m1 and m2) must have the same dtype|"
        r"expected scalar type \w+ but found \w+|"
        r"Input type \(.*\) and (weight|bias) type \(.*\) should be the same|"
        r"expected both vectors to have same dtype|Found dtype \w+ but expected \w+|same dtype",
        "Hai tensor khác dtype (vd Double và Float, Half và Float). Cách sửa: đổi input theo model: "
        "`x = x.to(next(model.parameters()).dtype)` hoặc `x = x.float()`; dữ liệu từ NumPy mặc định là float64."),
    _Rule("amp_plan",
        r"GradScaler chỉ dùng với amp=|amp='fp16' trên CPU|không có BF16 gốc|(autocast \w+|GradScaler) không chạy trên",
        "Chế độ mixed precision (AMP) đã chọn không hợp với thiết bị này hoặc với GradScaler. Cách sửa: để "
        "`recommend_amp(device)` chọn chế độ (`'bf16'`, `'fp16'` hoặc `'off'`); GradScaler chỉ đi với `'fp16'`."),
    _Rule("plain_tuple",
        r"^AttributeError: 'tuple' object has no attribute",
        "Biến này là một tuple thường, không phải đối tượng có thuộc tính đó: hàm trả về tuple (vd `nn.LSTM` trả "
        "`(output, (h, c))`), hoặc một namedtuple bị dựng lại thành tuple thường nên mất tên trường. Cách sửa: "
        "xem `type(x)`; tách tuple ra (`out, _ = lstm(x)`), hoặc dựng lại đúng kiểu: `type(batch)(*values)`."),
)


def find_rule(text: str) -> _Rule | None:
    """Return the first rule whose pattern is found in `text` ("ExceptionType: message"), or None."""
    return next((rule for rule in _RULES if re.search(rule.pattern, text, flags=re.S)), None)


def explain(exc: BaseException) -> str | None:
    """Return a short explanation and fix for a known PyTorch error (device, dtype, memory, CUDA set-up), or None."""
    if not isinstance(exc, BaseException):
        raise TypeError(f"explain() cần một ngoại lệ (exception instance), không phải {type(exc).__name__}")
    rule = find_rule(f"{type(exc).__name__}: {exc}")
    if rule is None:
        return None
    body = rule.hint
    if rule.key == "cuda_setup":
        from .device import explain_cuda, gather_cuda_facts

        body = " ".join([body, *explain_cuda(gather_cuda_facts(probe_gpus=False))])
    if rule.key == "device_mismatch":  # add "(ở đây: cuda:0 và cpu)" with the devices named in the message
        names = list(dict.fromkeys(m.group(1) for m in _DEVICE_NAME.finditer(str(exc))))
        first, _, rest = body.partition(". ")
        body = first + (f" (ở đây: {' và '.join(names)})" if len(names) >= 2 else "") + ". " + rest
    return "💡 " + "\n   ".join(textwrap.wrap(body, width=100))

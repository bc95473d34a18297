"""expect_error() and explain().

explain() is tested on messages PyTorch itself raises here (device mismatch through the `meta` device,
dtype and NumPy errors, the CPU-only build, a GPU-tagged checkpoint, host OOM). Messages that only a
CUDA machine can produce are copied verbatim from PyTorch's source, with the file named next to each;
where the installed binary holds the fixed parts of such a message, a test checks they are still there.
"""

from __future__ import annotations

import mmap
from collections import namedtuple
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from lessons_lib import device, errors
from lessons_lib.device import pick_device
from lessons_lib.errors import expect_error, explain, short_message
from lessons_lib.training import plan_amp


def explain_key(exc: BaseException) -> str | None:
    """Return the name of the rule explain() uses for `exc` (None: unknown error)."""
    rule = errors.find_rule(f"{type(exc).__name__}: {exc}")
    return rule.key if rule else None


def raised(fn) -> BaseException:
    """Run `fn` and return the exception PyTorch raised (fail the test if none)."""
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - we want whatever PyTorch raises
        return exc
    pytest.fail("PyTorch raised nothing; the snippet no longer reproduces the error")


# Newer PyTorch raises these subclasses of RuntimeError; older versions raise RuntimeError itself.
ACCELERATOR_ERROR = getattr(torch, "AcceleratorError", RuntimeError)
OOM_ERROR = getattr(torch, "OutOfMemoryError", RuntimeError)


def meta(*shape, **kwargs):
    return torch.ones(*shape, device="meta", **kwargs)


# --------------------------------------------------------------------------- expect_error


def test_expect_error_catches_prints_and_keeps_the_exception(capsys):
    with expect_error(RuntimeError, match="expected device") as caught:
        meta(2) + torch.ones(2)
    out = capsys.readouterr().out
    assert out.startswith("⚠️ Lỗi (cố ý) — RuntimeError: Tensor on device cpu is not on the expected device meta!")
    assert "💡" in out and "(ở đây: cpu và meta)" in out
    assert isinstance(caught.exception, RuntimeError)


def test_expect_error_without_hint(capsys):
    with expect_error(TypeError, explain_it=False):
        meta(2).numpy()
    out = capsys.readouterr().out
    assert "can't convert meta device type tensor to numpy" in out and "💡" not in out


def test_expect_error_accepts_a_tuple_of_types():
    with expect_error((TypeError, RuntimeError)) as caught:
        torch.ones(2, requires_grad=True).numpy()
    assert isinstance(caught.exception, RuntimeError)


def test_expect_error_fails_loudly_when_nothing_is_raised():
    with pytest.raises(AssertionError, match="chạy không lỗi"):
        with expect_error(RuntimeError):
            torch.ones(2) + torch.ones(2)


def test_expect_error_fails_when_the_message_does_not_match():
    with pytest.raises(AssertionError, match="không khớp"):
        with expect_error(RuntimeError, match="out of memory"):
            meta(2) + torch.ones(2)


def test_expect_error_lets_a_different_error_through():
    with pytest.raises(KeyError):
        with expect_error(RuntimeError):
            {}["missing"]


@pytest.mark.parametrize("call, error, named", [
    *[(lambda e=e: expect_error(e), TypeError, "error") for e in (None, "RuntimeError", RuntimeError("x"), int, ())],
    (lambda: expect_error(RuntimeError, match=3), TypeError, "match"),
    *[(lambda b=b: explain(b), TypeError, "explain()") for b in ("Expected all tensors", None, RuntimeError)],
])
def test_argument_checks_name_what_to_pass(call, error, named):
    with pytest.raises(error) as raised:
        call()
    assert named in str(raised.value)


def test_short_message_cuts_long_messages():
    text = short_message(RuntimeError("\n".join(f"line {i}" for i in range(10))), max_lines=2)
    assert text == "RuntimeError: line 0\nline 1\n…"


# --------------------------------------------------------------------------- explain: real messages


REAL_DEVICE_MISMATCH = {
    "meta + cpu (element-wise)": lambda: meta(2) + torch.ones(2),
    "cpu * meta (element-wise)": lambda: torch.ones(2) * meta(2),
    "Linear on meta, input on cpu": lambda: nn.Linear(4, 2).to("meta")(torch.ones(3, 4)),
    "cross_entropy, targets on cpu": lambda: F.cross_entropy(meta(4, 3), torch.tensor([0, 1, 2, 0])),
    "forward-created tensor": lambda: nn.Linear(4, 3).to("meta")(meta(2, 4)) * torch.ones(3),
    "take_along_dim index on cpu": lambda: meta(4, 3).take_along_dim(torch.zeros(4, 1, dtype=torch.long), dim=1),
    "out= on another device": lambda: torch.sigmoid(meta(3), out=torch.empty(3)),
}


@pytest.mark.parametrize("snippet", REAL_DEVICE_MISMATCH.values(), ids=REAL_DEVICE_MISMATCH.keys())
def test_explain_recognises_real_device_mismatch_errors(snippet):
    exc = raised(snippet)
    assert explain_key(exc) == "device_mismatch", str(exc)
    hint = explain(exc)
    assert hint.startswith("💡 ") and "cùng `device`" in hint
    assert "meta" in hint and "cpu" in hint  # the devices named in the message are repeated


def test_explain_recognises_index_ops_when_this_torch_checks_them_on_meta():
    try:
        meta(5).index_add(0, torch.tensor([0]), meta(1))
    except RuntimeError as exc:
        assert explain_key(exc) == "device_mismatch", str(exc)
    else:  # torch 2.11 and older let a CPU index into a meta index_add (the version matrix runs them)
        pytest.skip(f"torch {torch.__version__} does not check index_add's devices on meta")


REAL_OTHER = {
    "numpy_from_gpu": lambda: meta(3).numpy(),
    "numpy_requires_grad": lambda: torch.ones(3, requires_grad=True).numpy(),
    "dtype_mismatch": lambda: nn.Linear(3, 2)(torch.from_numpy(np.ones((4, 3)))),  # Double vs Float
    # the course's own helpers' errors (and Python's) that lessons 01, 02 and 05 show
    "unknown_device": lambda: pick_device("cdua"),
    "amp_plan": lambda: plan_amp("cpu", "fp16"),
    "plain_tuple": lambda: tuple(namedtuple("Box", "label")("mèo")).label,
}


@pytest.mark.parametrize(("key", "snippet"), REAL_OTHER.items(), ids=REAL_OTHER.keys())
def test_explain_recognises_real_numpy_dtype_and_other_errors_the_lessons_show(key, snippet):
    assert explain_key(raised(snippet)) == key


@pytest.mark.parametrize(
    "snippet",
    [
        lambda: nn.Linear(3, 2)(torch.ones(2, 3).half()),                       # mat1 and mat2 … Half and Float
        lambda: torch.mm(torch.ones(2, 3, dtype=torch.float16), torch.ones(3, 2)),  # m1 and m2 … c10::Half != float
        lambda: torch.ones(3, dtype=torch.float64) @ torch.ones(3),            # dot: … same dtype
        lambda: nn.Conv2d(1, 1, 3)(torch.ones(1, 1, 5, 5, dtype=torch.float64)),  # Input type (double) and bias type
        lambda: nn.Conv2d(1, 1, 3, bias=False)(torch.ones(1, 1, 5, 5, dtype=torch.float64)),  # expected scalar type
    ],
    ids=["linear-half", "mm-half", "dot-double", "conv-bias", "conv-weight"],
)
def test_explain_recognises_real_dtype_mismatch_variants(snippet):
    exc = raised(snippet)
    assert explain_key(exc) == "dtype_mismatch", str(exc)
    assert "Double và Float" in explain(exc)


def test_explain_recognises_float_targets_for_cross_entropy():
    exc = raised(lambda: F.cross_entropy(torch.randn(4, 3), torch.tensor([0.0, 1, 2, 0])))
    assert explain_key(exc) == "target_dtype", str(exc)
    assert "y.long()" in explain(exc)


@pytest.mark.parametrize("labels", [[0, 1, 2, 3], [-1, 0, 1, 2]], ids=["label = classes", "negative label"])
def test_explain_recognises_a_label_out_of_range_on_the_cpu(labels):
    exc = raised(lambda: F.cross_entropy(torch.randn(4, 3), torch.tensor(labels)))
    assert isinstance(exc, IndexError) and "is out of bounds" in str(exc)
    assert explain_key(exc) == "target_out_of_range"
    hint = explain(exc)
    assert "y.max()" in hint and "device-side assert" in hint


def test_the_device_side_assert_hint_names_the_wrong_line_and_launch_blocking():
    hint = explain(ACCELERATOR_ERROR("CUDA error: device-side assert triggered"))
    assert "CUDA_LAUNCH_BLOCKING=1" in hint and "SAI dòng" in hint and "khởi động lại" in hint


@pytest.mark.parametrize("message", ["expected target dtype to be Long or Byte, but got Float",  # torch 2.13
                                     "expected scalar type Long but found Float",  # torch 2.11 and older, CPU
                                     "expected scalar type Long but found Double"])
def test_explain_recognises_float_targets_in_every_torch_wording(message):
    assert explain_key(RuntimeError(message)) == "target_dtype"
    assert explain_key(RuntimeError("expected scalar type Float but found Double")) == "dtype_mismatch"


def test_explain_recognises_host_out_of_memory():
    exc = raised(lambda: torch.empty(2**50, dtype=torch.uint8))  # 1 PiB: more than any address space
    assert explain_key(exc) == "host_oom", str(exc)
    hint = explain(exc)
    assert hint.startswith("💡 Hết bộ nhớ") and "empty_cache" not in hint


@pytest.mark.skipif(torch.version.cuda is not None, reason="needs a CPU-only PyTorch build")
def test_explain_recognises_the_real_cpu_only_build_error():
    exc = raised(lambda: torch.ones(1).cuda())
    assert isinstance(exc, AssertionError) and str(exc) == "Torch not compiled with CUDA enabled"
    assert explain_key(exc) == "cuda_setup"
    assert "pick_device()" in explain(exc)


@pytest.fixture
def gpu_checkpoint(tmp_path, monkeypatch):
    """A checkpoint whose tensors are tagged "cuda:0", as torch.save writes them on a GPU machine."""
    path = tmp_path / "gpu.pt"
    with monkeypatch.context() as patch:
        patch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        torch.save(nn.Linear(3, 2).state_dict(), path)
    return path


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_explain_recognises_a_gpu_checkpoint_loaded_without_map_location(gpu_checkpoint):
    exc = raised(lambda: torch.load(gpu_checkpoint, weights_only=True))
    assert "Attempting to deserialize object on a CUDA device" in str(exc)
    assert explain_key(exc) == "checkpoint_device"
    assert 'map_location="cpu"' in explain(exc)
    state = torch.load(gpu_checkpoint, map_location="cpu", weights_only=True)  # the fix
    assert state["weight"].device.type == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_notebook_checkpoint_demo_raises_what_a_gpu_checkpoint_raises(gpu_checkpoint, tmp_path):
    """Notebook 03 remaps "cpu" to a missing GPU; torch.load must fail exactly as with a real GPU file."""
    cpu_file = tmp_path / "cpu.pt"
    torch.save(nn.Linear(3, 2).state_dict(), cpu_file)
    demo = raised(lambda: torch.load(cpu_file, map_location={"cpu": "cuda:0"}, weights_only=True))
    real = raised(lambda: torch.load(gpu_checkpoint, weights_only=True))
    assert type(demo) is type(real) and str(demo) == str(real)


def test_explain_recognises_a_checkpoint_for_a_missing_second_gpu(tmp_path, monkeypatch):
    """PyTorch's own check, with the CUDA facts of a one-GPU machine patched in."""
    path = tmp_path / "c.pt"
    torch.save(nn.Linear(3, 2).state_dict(), path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    exc = raised(lambda: torch.load(path, map_location={"cpu": "cuda:1"}, weights_only=True))
    assert "CUDA device 1 but torch.cuda.device_count() is 1" in str(exc)
    assert explain_key(exc) == "checkpoint_device"


# --------------------------------------------------------------------------- explain: copied messages

# Messages a CUDA machine prints, copied verbatim from PyTorch's source (file named per entry).
COPIED = [
    # aten/src/ATen/TensorIterator.cpp (element-wise ops)
    ("device_mismatch", RuntimeError,
     "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!"),
    # aten/src/ATen/core/adaption.cpp, current form
    ("device_mismatch", RuntimeError,
     "Expected all tensors to be on the same device, but got mat2 is on cpu, different from other tensors on "
     "cuda:0 (when checking argument in method wrapper_CUDA_mm)"),
    # aten/src/ATen/core/adaption.cpp, form of PyTorch 2.4-2.7
    ("device_mismatch", RuntimeError,
     "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! "
     "(when checking argument for argument mat2 in method wrapper_CUDA_mm)"),
    # aten/src/ATen/TensorIterator.cpp, two GPUs
    ("device_mismatch", RuntimeError,
     "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cuda:1!"),
    # aten/src/ATen/native/Convolution.cpp (input.type() strings)
    ("device_mismatch", RuntimeError,
     "Input type (torch.cuda.FloatTensor) and weight type (torch.FloatTensor) should be the same or input "
     "should be a MKLDNN tensor and weight is a dense tensor"),
    ("dtype_mismatch", RuntimeError,
     "Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be the same or input "
     "should be a MKLDNN tensor and weight is a dense tensor"),
    # aten/src/ATen/TensorUtils.cpp checkDevice, as raised by take_along_dim on a GPU
    ("device_mismatch", RuntimeError,
     "Expected tensor to have cuda:0 Device, but got tensor with cpu Device "
     "(while checking arguments for torch.take_along_dim():)"),
    # aten/src/ATen/native/cuda/Blas.cpp
    ("dtype_mismatch", RuntimeError, "expected mat1 and mat2 to have the same dtype, but got: c10::Half != float"),
    # torch/_tensor.py -> C++ tensor_numpy.cpp
    ("numpy_from_gpu", TypeError,
     "can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."),
    # c10/cuda/CUDACachingAllocator.cpp (numbers are an example)
    ("cuda_oom", OOM_ERROR,
     "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 14.74 GiB of which "
     "1.07 GiB is free. Including non-PyTorch memory, this process has 13.67 GiB memory in use. Of the "
     "allocated memory 13.50 GiB is allocated by PyTorch, and 38.00 MiB is reserved by PyTorch but unallocated. "
     "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
     "to avoid fragmentation.  See documentation for Memory Management  "
     "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"),
    # c10/cuda/CUDAException.cpp with cudaErrorMemoryAllocation
    ("cuda_oom", ACCELERATOR_ERROR,
     "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported at some other API call, "
     "so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
     "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"),
    ("cuda_oom", RuntimeError, "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
    # aten/src/ATen/mps/MPSAllocator.mm
    ("host_oom", RuntimeError,
     "MPS backend out of memory (MPS allocated: 17.00 GB, other allocations: 1.20 GB, max allowed: 18.13 GB). "
     "Tried to allocate 256.00 MB on private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper "
     "limit for memory allocations (may cause system failure)."),
    # torch/cuda/__init__.py (_lazy_init), CPU-only build
    ("cuda_setup", AssertionError, "Torch not compiled with CUDA enabled"),
    # c10/cuda/CUDAFunctions.cpp
    ("cuda_setup", RuntimeError,
     "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver "
     "from http://www.nvidia.com/Download/index.aspx"),
    ("cuda_setup", RuntimeError, "No CUDA GPUs are available"),
    ("cuda_setup", RuntimeError,
     "The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver by "
     "downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx "
     "Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your "
     "version of the CUDA driver."),
    # c10/cuda/CUDAException.cpp with cudaErrorNoKernelImageForDevice (e.g. a P100 with a cu128 build)
    ("no_kernel_image", ACCELERATOR_ERROR,
     "CUDA error: no kernel image is available for execution on the device\nSearch for "
     "`cudaErrorNoKernelImageForDevice' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html "
     "for more information.\nCUDA kernel errors might be asynchronously reported at some other API call, so the "
     "stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
     "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"),
    ("invalid_device_ordinal", ACCELERATOR_ERROR,
     "CUDA error: invalid device ordinal\nCUDA kernel errors might be asynchronously reported at some other API "
     "call, so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
     "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"),
    ("device_side_assert", ACCELERATOR_ERROR,
     "CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported at some "
     "other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing "
     "CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"),
    # the same with c10/cuda/CUDAMiscFunctions.cpp's get_cuda_error_help line (newer releases)
    ("device_side_assert", ACCELERATOR_ERROR,
     "CUDA error: device-side assert triggered\nSearch for `cudaErrorAssert' in "
     "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"
     "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might "
     "be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
     "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n"),
]


@pytest.mark.parametrize(("key", "error", "message"), COPIED, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(COPIED)])
def test_explain_recognises_messages_only_a_gpu_machine_prints(key, error, message):
    exc = error(message)
    assert explain_key(exc) == key
    assert explain(exc).startswith("💡 ")


def test_explain_names_the_devices_of_both_gpu_forms():
    first = explain(RuntimeError(COPIED[0][2]))
    second = explain(RuntimeError(COPIED[1][2]))
    assert "(ở đây: cuda:0 và cpu)" in first
    assert "(ở đây: cpu và cuda:0)" in second


def _libtorch_cpu() -> Path | None:
    lib = Path(torch.__file__).parent / "lib"
    found = sorted(lib.glob("*torch_cpu.*"))
    return found[0] if found else None


# The fixed parts of the two dated forms of adaption.cpp's GPU device-mismatch message (both are in COPIED).
_ADAPTION_FORMS = {
    "current": (b"Expected all tensors to be on the same device, but got ", b", different from other tensors on ",
                b" (when checking argument in method "),
    "PyTorch 2.4-2.7": (b"! (when checking argument for argument ",),
}


@pytest.mark.skipif(_libtorch_cpu() is None, reason="libtorch_cpu not found in this PyTorch install")
def test_the_copied_device_messages_are_what_the_installed_pytorch_prints():
    """The fixed parts of the GPU messages are in the installed binary, so the copies above are current."""
    with open(_libtorch_cpu(), "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        for fragment in (
            b"Expected all tensors to be on the same device, but found at least two devices, ",
            b") should be the same or input should be a MKLDNN tensor and weight is a dense tensor",
        ):
            assert data.find(fragment) != -1, fragment
        forms = [name for name, parts in _ADAPTION_FORMS.items() if all(data.find(p) != -1 for p in parts)]
    assert forms, f"torch {torch.__version__} prints neither known device-mismatch form: copy its form into COPIED"


# --------------------------------------------------------------------------- explain: the rest


def test_explain_recognises_plan_amps_refusal_of_bf16_on_a_gpu_without_it():
    message = "Tesla T4 (compute capability 7.5) không có BF16 gốc — cần 8.0+ (Ampere: A100, RTX 30xx trở lên)."
    assert explain_key(ValueError(message)) == "amp_plan"  # lessons_lib/training/amp.py, only on such a GPU



@pytest.mark.parametrize(
    "exc",
    [
        ValueError("something else"),
        KeyError("weight"),
        raised(lambda: torch.ones(2, 3) @ torch.ones(2, 3)),  # shapes, not dtype or device
        raised(lambda: torch.device("cuda:x")),
        RuntimeError("CUDA error: an illegal memory access was encountered"),
    ],
    ids=["value", "key", "shape", "device-string", "illegal-access"],
)
def test_explain_returns_none_for_unknown_errors(exc):
    assert explain(exc) is None and explain_key(exc) is None


def test_explain_wraps_long_hints():
    hint = explain(RuntimeError(COPIED[0][2]))
    assert all(len(line) <= 103 for line in hint.splitlines())
    assert len(hint.splitlines()) > 1


def test_cuda_setup_hint_adds_this_machines_diagnosis(monkeypatch):
    monkeypatch.setattr(device, "explain_cuda", lambda facts: ["Lý do trên máy này."])
    hint = " ".join(explain(AssertionError("Torch not compiled with CUDA enabled")).split())
    assert "pick_device()" in hint and hint.endswith("Lý do trên máy này.")

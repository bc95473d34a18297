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


def test_expect_error_takes_a_tuple_of_types_and_can_leave_out_the_hint(capsys):
    with expect_error((RuntimeError, TypeError), explain_it=False) as caught:
        meta(2).numpy()
    out = capsys.readouterr().out
    assert isinstance(caught.exception, TypeError)
    assert "can't convert meta device type tensor to numpy" in out and "💡" not in out


@pytest.mark.parametrize("match, body, error, said", [
    (None, lambda: torch.ones(2) + torch.ones(2), AssertionError, "chạy không lỗi"),
    ("out of memory", lambda: meta(2) + torch.ones(2), AssertionError, "không khớp"),
    (None, lambda: {}["missing"], KeyError, "missing"),  # a different error propagates
], ids=["nothing raised", "other message", "other error"])
def test_expect_error_fails_loudly_unless_the_expected_error_happens(match, body, error, said):
    with pytest.raises(error, match=said):
        with expect_error(RuntimeError, match=match):
            body()


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


# --------------------------------------------------------------------------- explain: one table of errors

# Errors PyTorch (and the course's helpers) raise here, with the rule explain() must pick (None: no hint).
REAL = {
    "meta + cpu": ("device_mismatch", lambda: meta(2) + torch.ones(2)),
    "cpu * meta": ("device_mismatch", lambda: torch.ones(2) * meta(2)),
    "Linear on meta, input on cpu": ("device_mismatch", lambda: nn.Linear(4, 2).to("meta")(torch.ones(3, 4))),
    "targets on cpu": ("device_mismatch", lambda: F.cross_entropy(meta(4, 3), torch.tensor([0, 1, 2, 0]))),
    "forward-created tensor": ("device_mismatch", lambda: nn.Linear(4, 3).to("meta")(meta(2, 4)) * torch.ones(3)),
    "take_along_dim index on cpu": ("device_mismatch",
                                    lambda: meta(4, 3).take_along_dim(torch.zeros(4, 1, dtype=torch.long), dim=1)),
    "out= on another device": ("device_mismatch", lambda: torch.sigmoid(meta(3), out=torch.empty(3))),
    "numpy of meta": ("numpy_from_gpu", lambda: meta(3).numpy()),
    "numpy of requires_grad": ("numpy_requires_grad", lambda: torch.ones(3, requires_grad=True).numpy()),
    "Linear on float64": ("dtype_mismatch", lambda: nn.Linear(3, 2)(torch.from_numpy(np.ones((4, 3))))),
    "Linear on half": ("dtype_mismatch", lambda: nn.Linear(3, 2)(torch.ones(2, 3).half())),
    "mm half and float": ("dtype_mismatch", lambda: torch.mm(torch.ones(2, 3, dtype=torch.float16), torch.ones(3, 2))),
    "dot double and float": ("dtype_mismatch", lambda: torch.ones(3, dtype=torch.float64) @ torch.ones(3)),
    "conv bias": ("dtype_mismatch", lambda: nn.Conv2d(1, 1, 3)(torch.ones(1, 1, 5, 5, dtype=torch.float64))),
    "conv weight": ("dtype_mismatch",
                    lambda: nn.Conv2d(1, 1, 3, bias=False)(torch.ones(1, 1, 5, 5, dtype=torch.float64))),
    "float targets": ("target_dtype", lambda: F.cross_entropy(torch.randn(4, 3), torch.tensor([0.0, 1, 2, 0]))),
    "label = classes": ("target_out_of_range", lambda: F.cross_entropy(torch.randn(4, 3), torch.tensor([0, 1, 2, 3]))),
    "negative label": ("target_out_of_range",
                       lambda: F.cross_entropy(torch.randn(4, 3), torch.tensor([-1, 0, 1, 2]))),
    "1 PiB on the host": ("host_oom", lambda: torch.empty(2**50, dtype=torch.uint8)),  # more than any address space
    # the course's own helpers' errors (and Python's) that lessons 01, 02 and 05 show
    "pick_device typo": ("unknown_device", lambda: pick_device("cdua")),
    "plan_amp fp16 on cpu": ("amp_plan", lambda: plan_amp("cpu", "fp16")),
    "namedtuple made a tuple": ("plain_tuple", lambda: tuple(namedtuple("Box", "label")("mèo")).label),
    "shapes": (None, lambda: torch.ones(2, 3) @ torch.ones(2, 3)),
    "device string": (None, lambda: torch.device("cuda:x")),
}

# c10/cuda/CUDAException.cpp: the lines after every "CUDA error: ..." message
_CUDA_ERROR_TAIL = ("CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                    "below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
# c10/cuda/CUDAMiscFunctions.cpp's get_cuda_error_help line (newer releases)
_SEARCH = "Search for `{}' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.\n"

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
    ("cuda_oom", ACCELERATOR_ERROR, "CUDA error: out of memory\n" + _CUDA_ERROR_TAIL),
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
    ("no_kernel_image", ACCELERATOR_ERROR, "CUDA error: no kernel image is available for execution on the device\n"
     + _SEARCH.format("cudaErrorNoKernelImageForDevice") + _CUDA_ERROR_TAIL),
    ("invalid_device_ordinal", ACCELERATOR_ERROR, "CUDA error: invalid device ordinal\n" + _CUDA_ERROR_TAIL),
    ("device_side_assert", ACCELERATOR_ERROR, "CUDA error: device-side assert triggered\n" + _CUDA_ERROR_TAIL),
    ("device_side_assert", ACCELERATOR_ERROR,
     "CUDA error: device-side assert triggered\n" + _SEARCH.format("cudaErrorAssert") + _CUDA_ERROR_TAIL),
    # torch 2.13's and torch 2.11's (CPU) wording of float targets; a Float/Double mix is a dtype mismatch
    ("target_dtype", RuntimeError, "expected target dtype to be Long or Byte, but got Float"),
    ("target_dtype", RuntimeError, "expected scalar type Long but found Float"),
    ("dtype_mismatch", RuntimeError, "expected scalar type Float but found Double"),
    # lessons_lib/training/amp.py, raised only on a GPU without BF16
    ("amp_plan", ValueError,
     "Tesla T4 (compute capability 7.5) không có BF16 gốc — cần 8.0+ (Ampere: A100, RTX 30xx trở lên)."),
    (None, ValueError, "something else"),
    (None, KeyError, "weight"),
    (None, RuntimeError, "CUDA error: an illegal memory access was encountered"),
]


@pytest.mark.parametrize(("key", "make"), [
    *[(key, lambda snippet=snippet: raised(snippet)) for key, snippet in REAL.values()],
    *[(key, lambda error=error, message=message: error(message)) for key, error, message in COPIED],
], ids=[*REAL, *(f"copied-{key}-{i}" for i, (key, _, _) in enumerate(COPIED))])
def test_explain_picks_the_rule_of_each_error(key, make):
    exc = make()
    assert explain_key(exc) == key, str(exc)
    hint = explain(exc)
    assert hint is None if key is None else hint.startswith("💡 ")
    if key == "device_mismatch" and "meta" in str(exc):
        assert "meta" in hint and "cpu" in hint  # the devices named in the message are repeated


def test_explain_recognises_index_ops_when_this_torch_checks_them_on_meta():
    try:
        meta(5).index_add(0, torch.tensor([0]), meta(1))
    except RuntimeError as exc:
        assert explain_key(exc) == "device_mismatch", str(exc)
    else:  # torch 2.11 and older let a CPU index into a meta index_add (the version matrix runs them)
        pytest.skip(f"torch {torch.__version__} does not check index_add's devices on meta")


@pytest.mark.skipif(torch.version.cuda is not None, reason="needs a CPU-only PyTorch build")
def test_explain_recognises_the_real_cpu_only_build_error():
    exc = raised(lambda: torch.ones(1).cuda())
    assert isinstance(exc, AssertionError) and str(exc) == "Torch not compiled with CUDA enabled"
    assert explain_key(exc) == "cuda_setup"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_gpu_checkpoint_and_notebook_03s_imitation_get_the_checkpoint_hint(tmp_path, monkeypatch):
    gpu_file, cpu_file = tmp_path / "gpu.pt", tmp_path / "cpu.pt"
    torch.save(nn.Linear(3, 2).state_dict(), cpu_file)
    with monkeypatch.context() as patch:  # tensors tagged "cuda:0", as torch.save writes them on a GPU machine
        patch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        torch.save(nn.Linear(3, 2).state_dict(), gpu_file)
    real = raised(lambda: torch.load(gpu_file, weights_only=True))
    demo = raised(lambda: torch.load(cpu_file, map_location={"cpu": "cuda:0"}, weights_only=True))  # notebook 03
    assert type(demo) is type(real) and str(demo) == str(real)
    assert explain_key(real) == "checkpoint_device"
    assert torch.load(gpu_file, map_location="cpu", weights_only=True)["weight"].device.type == "cpu"  # the fix


def test_explain_recognises_a_checkpoint_for_a_missing_second_gpu(tmp_path, monkeypatch):
    """PyTorch's own check, with the CUDA facts of a one-GPU machine patched in."""
    path = tmp_path / "c.pt"
    torch.save(nn.Linear(3, 2).state_dict(), path)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    exc = raised(lambda: torch.load(path, map_location={"cpu": "cuda:1"}, weights_only=True))
    assert "CUDA device 1 but torch.cuda.device_count() is 1" in str(exc)
    assert explain_key(exc) == "checkpoint_device"


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



def test_explain_wraps_long_hints():
    hint = explain(RuntimeError(COPIED[0][2]))
    assert all(len(line) <= 103 for line in hint.splitlines())
    assert len(hint.splitlines()) > 1


def test_cuda_setup_hint_adds_this_machines_diagnosis(monkeypatch):
    monkeypatch.setattr(device, "explain_cuda", lambda facts: ["Lý do trên máy này."])
    hint = " ".join(explain(AssertionError("Torch not compiled with CUDA enabled")).split())
    assert "pick_device()" in hint and hint.endswith("Lý do trên máy này.")

"""Where training memory goes, measured: state sizes, saved activations, GPU snapshots, OOM and its fixes.

Everything here is measured from real tensors on any device (CPU, CUDA, MPS, even ``meta``), except the
GPU snapshot and the OOM demo, which need CUDA and say so instead of failing:

- `format_bytes`: 1536 -> "1.50 KiB".
- `training_state_sizes`: exact bytes of parameters, gradients and optimizer state (after a real step).
- `SavedTensorMeter`: a context manager that counts the bytes autograd saves for backward (activations).
- `gpu_memory_snapshot`: allocated / reserved / peak of the CUDA caching allocator, or "not available".
- `cuda_memory_cap` and `oom_demo`: a capped, guarded CUDA out-of-memory demo that always restores the cap.
- `parse_oom_message`: read a CUDA OOM message field by field.
- `find_max_batch_size`: halve the batch on OOM (on CPU: against a memory budget, see `MemoryBudgetExceeded`).
- `oom_safe_train_step` and `train_with_oom_retry`: the OOM-safe train step, with a retry loop that
  lowers the micro-batch and accumulates gradients so the effective batch stays the same.
- `sharded_training_memory`: per-GPU bytes of mixed-precision Adam training under DDP and ZeRO-1/2/3.
"""

from __future__ import annotations

import contextlib
import gc
import math
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import torch

from .i18n import tr

# --------------------------------------------------------------------------- errors

#: The out-of-memory error of this PyTorch: ``torch.OutOfMemoryError`` in recent releases, only
#: ``torch.cuda.OutOfMemoryError`` in older ones (both name the same class where both exist).
TorchOutOfMemoryError: type[BaseException] = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


class MemoryBudgetExceeded(RuntimeError):
    """Raised by `oom_safe_train_step` when a step would need more bytes than its simulated budget.

    It stands in for a CUDA out-of-memory error on machines without a GPU, so `find_max_batch_size`
    and `train_with_oom_retry` can be shown (and tested) on a CPU. ``needed`` and ``budget`` are bytes.
    """

    def __init__(self, message: str, needed: int = 0, budget: int = 0):
        super().__init__(message)
        self.needed = needed
        self.budget = budget


#: What the helpers treat as "out of memory": a real CUDA OOM or a simulated budget overrun.
OOM_ERRORS: tuple[type[BaseException], ...] = (TorchOutOfMemoryError, MemoryBudgetExceeded)

_OOM_TEXT = re.compile(r"out of memory|can't allocate memory|CUBLAS_STATUS_ALLOC_FAILED", re.I)


def is_oom_error(exc: BaseException) -> bool:
    """Return True when `exc` is an out-of-memory error (CUDA OOM, CPU allocation failure or a budget overrun)."""
    if not isinstance(exc, BaseException):
        raise TypeError(
            tr(
                f"exc phải là một exception, không phải {type(exc).__name__}",
                f"exc must be an exception instance, not {type(exc).__name__}",
            )
        )
    if isinstance(exc, OOM_ERRORS):
        return True
    return isinstance(exc, RuntimeError) and bool(_OOM_TEXT.search(str(exc)))


# --------------------------------------------------------------------------- validation


def _check_int(name: str, value, minimum: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(
            tr(
                f"{name} phải là số nguyên (int), không phải {type(value).__name__}",
                f"{name} must be an int, not {type(value).__name__}",
            )
        )
    if minimum is not None and value < minimum:
        raise ValueError(tr(f"{name} phải ≥ {minimum}, nhận {value}", f"{name} must be >= {minimum}, got {value}"))
    return value


def _check_number(name: str, value, minimum: float | None = None) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(
            tr(
                f"{name} phải là một số (int hoặc float), không phải {type(value).__name__}",
                f"{name} must be a number (int or float), not {type(value).__name__}",
            )
        )
    if not math.isfinite(value):
        raise ValueError(tr(f"{name} phải là số hữu hạn, nhận {value}", f"{name} must be finite, got {value}"))
    if minimum is not None and value < minimum:
        raise ValueError(tr(f"{name} phải ≥ {minimum}, nhận {value}", f"{name} must be >= {minimum}, got {value}"))
    return value


def _check_module(model) -> torch.nn.Module:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            tr(
                f"model phải là một torch.nn.Module (vd nn.Linear(4, 2)), không phải {type(model).__name__}",
                f"model must be a torch.nn.Module (e.g. nn.Linear(4, 2)), not {type(model).__name__}",
            )
        )
    return model


def _check_optimizer(optimizer, allow_none: bool = True):
    if optimizer is None and allow_none:
        return None
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            tr(
                f"optimizer phải là một torch.optim.Optimizer (vd torch.optim.Adam(model.parameters())) "
                f"hoặc None, không phải {type(optimizer).__name__}",
                f"optimizer must be a torch.optim.Optimizer (e.g. torch.optim.Adam(model.parameters())) "
                f"or None, not {type(optimizer).__name__}",
            )
        )
    return optimizer


# --------------------------------------------------------------------------- bytes

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def format_bytes(num_bytes: int | float, precision: int = 2) -> str:
    """Return a byte count in binary units, e.g. 1536 -> "1.50 KiB", 512 -> "512 B", -2**20 -> "-1.00 MiB".

    Args:
        num_bytes: Number of bytes (negative for a decrease).
        precision: Digits after the decimal point for KiB and larger.
    """
    _check_number("num_bytes", num_bytes)
    _check_int("precision", precision, 0)
    sign = "-" if num_bytes < 0 else ""
    value = float(abs(num_bytes))
    if value < 1024:
        return f"{sign}{value:.0f} B" if value == int(value) else f"{sign}{value:.{precision}f} B"
    unit = 0
    while value >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{sign}{value:.{precision}f} {_UNITS[unit]}"


_SIZE = re.compile(r"([\d.]+)\s*(bytes|B|KiB|MiB|GiB|TiB|PiB)\b")
_UNIT_BYTES = {"bytes": 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}


def parse_bytes(text: str) -> int:
    """Return the bytes of a size written as PyTorch prints it, e.g. "2.00 GiB", "959.44 MiB", "0 bytes"."""
    if not isinstance(text, str):
        raise TypeError(tr(f"text phải là chuỗi như '2.00 GiB', không phải {type(text).__name__}",
                           f"text must be a string such as '2.00 GiB', not {type(text).__name__}"))
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(tr(f"Không đọc được kích thước {text!r}; dạng đúng: '2.00 GiB', '512 bytes'.",
                            f"Cannot read the size {text!r}; expected e.g. '2.00 GiB', '512 bytes'."))
    return round(float(match.group(1)) * _UNIT_BYTES[match.group(2)])


# --------------------------------------------------------------------------- storages


def _storage_key_and_bytes(t: torch.Tensor) -> tuple[object, int]:
    """Return a key that is equal for tensors sharing memory, and the bytes that memory holds."""
    try:
        storage = t.untyped_storage()
        return ("storage", storage._cdata), int(storage.nbytes())
    except (RuntimeError, NotImplementedError, AttributeError):  # sparse, nested or exotic tensors
        return ("tensor", id(t)), int(t.numel() * t.element_size())


def _unique_bytes(tensors: Iterable[torch.Tensor]) -> int:
    seen: dict[object, int] = {}
    for t in tensors:
        key, nbytes = _storage_key_and_bytes(t)
        seen[key] = nbytes
    return sum(seen.values())


def _exclusion_keys(exclude) -> set:
    if exclude is None:
        return set()
    if isinstance(exclude, torch.nn.Module):
        tensors = [*exclude.parameters(), *exclude.buffers()]
    elif isinstance(exclude, torch.Tensor):
        tensors = [exclude]
    else:
        try:
            tensors = list(exclude)
        except TypeError:
            tensors = None
        if tensors is None or not all(isinstance(t, torch.Tensor) for t in tensors):
            raise TypeError(
                tr(
                    "exclude phải là một nn.Module (loại trừ tham số và buffer của nó), một tensor hoặc "
                    f"một danh sách tensor, không phải {type(exclude).__name__}",
                    "exclude must be an nn.Module (its parameters and buffers are left out), a tensor or "
                    f"a list of tensors, not {type(exclude).__name__}",
                )
            )
    return {_storage_key_and_bytes(t)[0] for t in tensors}


# --------------------------------------------------------------------------- state sizes

_COMPONENTS = ("params", "grads", "optimizer", "activations")


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Return the bytes the optimizer's state really holds, by state name (e.g. {"exp_avg": ..., "step": ...}).

    Empty for SGD without momentum; ``momentum_buffer`` for SGD with momentum; ``exp_avg``,
    ``exp_avg_sq`` and the tiny ``step`` counters for Adam. State appears only after the first
    ``optimizer.step()``. Tensors sharing memory are counted once.
    """
    _check_optimizer(optimizer, allow_none=False)
    by_key: dict[str, dict[object, int]] = {}
    for state in optimizer.state.values():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                storage_key, nbytes = _storage_key_and_bytes(value)
                by_key.setdefault(str(key), {})[storage_key] = nbytes
    return {key: sum(seen.values()) for key, seen in by_key.items()}


@dataclass(frozen=True)
class StateSizes:
    """Bytes of a model's training state, counted from the real tensors (see `training_state_sizes`)."""

    params: int
    grads: int
    optimizer: int
    buffers: int = 0
    optimizer_by_key: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """Return params + buffers + grads + optimizer state, in bytes."""
        return self.params + self.buffers + self.grads + self.optimizer

    def breakdown(self, activations: int = 0) -> dict[str, int]:
        """Return {"params", "grads", "optimizer", "activations"} in bytes (buffers added to params)."""
        _check_int("activations", activations, 0)
        return {"params": self.params + self.buffers, "grads": self.grads, "optimizer": self.optimizer,
                "activations": activations}

    def __str__(self) -> str:
        keys = ", ".join(f"{k} {format_bytes(v)}" for k, v in self.optimizer_by_key.items())
        opt = format_bytes(self.optimizer) + (f" ({keys})" if keys else "")
        parts = [tr("tham số ", "params ") + format_bytes(self.params)]
        if self.buffers:
            parts.append("buffer " + format_bytes(self.buffers))
        parts += ["gradient " + format_bytes(self.grads), "optimizer " + opt,
                  tr("tổng ", "total ") + format_bytes(self.total)]
        return " · ".join(parts)


def training_state_sizes(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> StateSizes:
    """Return the exact bytes of `model`'s parameters, buffers and gradients and of `optimizer`'s state.

    Counted from the tensors that exist now: gradients appear after ``backward()`` (and vanish with
    ``zero_grad(set_to_none=True)``), optimizer state after the first ``optimizer.step()``. Works on
    every device, including ``meta`` (sizes without memory).
    """
    _check_module(model)
    _check_optimizer(optimizer)
    params = list(model.parameters())
    grads = [p.grad for p in params if p.grad is not None]
    by_key = optimizer_state_bytes(optimizer) if optimizer is not None else {}
    optimizer_total = _unique_bytes(
        v for state in (optimizer.state.values() if optimizer is not None else ())
        for v in state.values() if isinstance(v, torch.Tensor)
    )
    return StateSizes(
        params=_unique_bytes(params),
        grads=_unique_bytes(grads),
        optimizer=optimizer_total,
        buffers=_unique_bytes(model.buffers()),
        optimizer_by_key=by_key,
    )


def trainable_bytes(model: torch.nn.Module) -> int:
    """Return the bytes of the parameters that require grad: what their gradients will occupy."""
    _check_module(model)
    return _unique_bytes(p for p in model.parameters() if p.requires_grad)


# --------------------------------------------------------------------------- saved-activation meter


class _Packed:
    """What the meter stores in the autograd graph instead of a saved tensor."""

    __slots__ = ("tensor", "version", "__weakref__")

    def __init__(self, tensor: torch.Tensor, version: int):
        self.tensor = tensor
        self.version = version


class SavedTensorMeter:
    """Count the bytes autograd saves for backward (the activations) while the block runs.

    Example::

        with SavedTensorMeter(exclude=model) as meter:
            loss = loss_fn(model(x), y)
        print(format_bytes(meter.live_bytes))   # held by the graph of `loss` right now
        loss.backward()                         # frees the graph: meter.live_bytes drops to 0

    Tensors that share memory (views, an output saved by two ops) are counted once, by their storage.
    Built on ``torch.autograd.graph.saved_tensors_hooks``; works on every device, ``meta`` included.
    Ops run inside a ``torch.utils.checkpoint`` region are not seen (checkpointing installs its own
    hooks there), which is exactly the memory checkpointing saves.

    Args:
        exclude: A module (its parameters and buffers) or tensors whose memory is not counted; pass the
            model so weights saved by matmuls are not mistaken for activations.

    Attributes:
        live_bytes: Bytes still held by graphs recorded in the block (drops when graphs are freed).
        peak_bytes: Largest ``live_bytes`` seen.
        total_bytes: Bytes that became held during the block, summed (a storage freed and saved again
            counts again).
        saved_count: How many tensors were saved (before de-duplication).
        excluded_count: How many of them were excluded.
    """

    def __init__(self, exclude=None):
        self._excluded = _exclusion_keys(exclude)
        self._held: dict[object, list[int]] = {}
        self._lock = threading.Lock()
        self._hooks = None
        self.live_bytes = 0
        self.peak_bytes = 0
        self.total_bytes = 0
        self.saved_count = 0
        self.excluded_count = 0

    # -- hooks
    def _pack(self, tensor: torch.Tensor):
        self.saved_count += 1
        key, nbytes = _storage_key_and_bytes(tensor)
        packed = _Packed(tensor.detach(), tensor._version)
        if key in self._excluded:
            self.excluded_count += 1
            return packed
        with self._lock:
            entry = self._held.get(key)
            if entry is None:
                self._held[key] = [1, nbytes]
                self.live_bytes += nbytes
                self.total_bytes += nbytes
                self.peak_bytes = max(self.peak_bytes, self.live_bytes)
            else:
                entry[0] += 1
        weakref.finalize(packed, self._release, key)
        return packed

    def _release(self, key) -> None:
        with self._lock:
            entry = self._held.get(key)
            if entry is None:
                return
            entry[0] -= 1
            if entry[0] == 0:
                del self._held[key]
                self.live_bytes -= entry[1]

    @staticmethod
    def _unpack(packed: _Packed) -> torch.Tensor:
        # saved_tensors_hooks bypass autograd's in-place check; redo it (detach shares the version counter)
        if packed.tensor._version != packed.version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an inplace "
                f"operation: it is at version {packed.tensor._version}; expected version {packed.version} "
                "instead (checked by SavedTensorMeter)."
            )
        return packed.tensor

    # -- context manager
    def __enter__(self) -> SavedTensorMeter:
        if self._hooks is not None:
            raise RuntimeError(tr("Meter này đang được dùng; tạo một SavedTensorMeter mới.",
                                  "This meter is already in use; create a new SavedTensorMeter."))
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        hooks, self._hooks = self._hooks, None
        hooks.__exit__(exc_type, exc, tb)
        return False

    def __repr__(self) -> str:
        return (f"SavedTensorMeter(live={format_bytes(self.live_bytes)}, peak={format_bytes(self.peak_bytes)}, "
                f"total={format_bytes(self.total_bytes)}, saved={self.saved_count}, "
                f"excluded={self.excluded_count})")


def saved_activation_bytes(fn: Callable[[], object], exclude=None) -> int:
    """Run ``fn()`` under a `SavedTensorMeter` and return the bytes its graph holds when it returns.

    The count is taken while the result is still alive, then the result is dropped (freeing its graph).
    Example: ``saved_activation_bytes(lambda: loss_fn(model(x), y), exclude=model)``.
    """
    if not callable(fn):
        raise TypeError(tr(f"fn phải là hàm không tham số (vd lambda: model(x)), không phải {type(fn).__name__}",
                           f"fn must be a zero-argument callable (e.g. lambda: model(x)), not {type(fn).__name__}"))
    with SavedTensorMeter(exclude=exclude) as meter:
        result = fn()
        held = meter.live_bytes
    del result
    return held


# --------------------------------------------------------------------------- gradients


def gradient_snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Return a copy of every parameter's ``.grad`` by name (parameters without a gradient are left out)."""
    _check_module(model)
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


@dataclass(frozen=True)
class GradientComparison:
    """The result of `compare_gradients`."""

    match: bool
    max_abs_diff: float
    names: tuple[str, ...]

    def __str__(self) -> str:
        verdict = tr("khớp", "match") if self.match else tr("KHÔNG khớp", "do NOT match")
        return tr(f"{len(self.names)} gradient {verdict} (sai khác tuyệt đối lớn nhất {self.max_abs_diff:.2e})",
                  f"{len(self.names)} gradients {verdict} (largest absolute difference {self.max_abs_diff:.2e})")


def compare_gradients(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor],
                      rtol: float = 1e-5, atol: float = 1e-6) -> GradientComparison:
    """Compare two `gradient_snapshot` results with ``torch.allclose``; both must name the same parameters."""
    for name, value in (("a", a), ("b", b)):
        if not isinstance(value, Mapping) or not all(isinstance(t, torch.Tensor) for t in value.values()):
            raise TypeError(tr(f"{name} phải là dict tên → tensor (từ gradient_snapshot), không phải "
                               f"{type(value).__name__}",
                               f"{name} must be a dict name -> tensor (from gradient_snapshot), not "
                               f"{type(value).__name__}"))
    if set(a) != set(b):
        raise ValueError(tr(f"Hai snapshot có tên tham số khác nhau: {sorted(set(a) ^ set(b))}",
                            f"The snapshots name different parameters: {sorted(set(a) ^ set(b))}"))
    _check_number("rtol", rtol, 0)
    _check_number("atol", atol, 0)
    match, worst = True, 0.0
    for name in a:
        x, y = a[name], b[name]
        if x.shape != y.shape:
            raise ValueError(tr(f"Gradient {name!r} khác shape: {tuple(x.shape)} và {tuple(y.shape)}",
                                f"Gradient {name!r} has different shapes: {tuple(x.shape)} and {tuple(y.shape)}"))
        y = y.to(x.device)
        match &= bool(torch.allclose(x, y, rtol=rtol, atol=atol))
        if x.numel():
            worst = max(worst, float((x - y).abs().max()))
    return GradientComparison(match, worst, tuple(a))


# --------------------------------------------------------------------------- CUDA access (one seam for tests)


class _Cuda:
    """The CUDA calls this module makes, in one place (tests replace it with a fake)."""

    def is_available(self) -> bool:
        return torch.cuda.is_available()

    def current_device(self) -> int:
        return torch.cuda.current_device()

    def device_count(self) -> int:
        return torch.cuda.device_count()

    def name(self, index: int) -> str:
        return torch.cuda.get_device_name(index)

    def allocated(self, index: int) -> int:
        return torch.cuda.memory_allocated(index)

    def reserved(self, index: int) -> int:
        return torch.cuda.memory_reserved(index)

    def peak_allocated(self, index: int) -> int:
        return torch.cuda.max_memory_allocated(index)

    def peak_reserved(self, index: int) -> int:
        return torch.cuda.max_memory_reserved(index)

    def mem_get_info(self, index: int) -> tuple[int, int]:
        return torch.cuda.mem_get_info(index)

    def empty_cache(self) -> None:
        torch.cuda.empty_cache()

    def get_fraction(self, index: int) -> float | None:
        getter = getattr(torch.cuda, "get_per_process_memory_fraction", None)  # torch >= 2.6 or so
        return float(getter(index)) if getter is not None else None

    def set_fraction(self, fraction: float, index: int) -> None:
        torch.cuda.set_per_process_memory_fraction(float(fraction), index)

    def allocate(self, shape: tuple[int, ...], dtype: torch.dtype, index: int) -> torch.Tensor:
        return torch.empty(shape, dtype=dtype, device=torch.device("cuda", index))


_cuda = _Cuda()


def _cuda_index(device) -> int | None:
    """Return the CUDA index `device` names (None = current), or None when it is not a usable CUDA device."""
    if isinstance(device, bool) or (device is not None and not isinstance(device, (str, int, torch.device))):
        raise TypeError(
            tr(
                f"device phải là None, 'cuda', 'cuda:0', số thứ tự GPU hoặc torch.device, không phải "
                f"{type(device).__name__}",
                f"device must be None, 'cuda', 'cuda:0', a GPU index or a torch.device, not {type(device).__name__}",
            )
        )
    if isinstance(device, int):
        if device < 0:
            raise ValueError(tr(f"Số thứ tự GPU phải ≥ 0, nhận {device}", f"GPU index must be >= 0, got {device}"))
        dev = torch.device("cuda", device)
    elif device is None:
        dev = torch.device("cuda")
    else:
        try:
            dev = torch.device(device)
        except (RuntimeError, ValueError) as exc:
            raise ValueError(tr(f"Không hiểu thiết bị {device!r}; dùng 'cuda', 'cuda:0' hoặc 'cpu'.",
                                f"Unknown device {device!r}; use 'cuda', 'cuda:0' or 'cpu'.")) from exc
    if dev.type != "cuda" or not _cuda.is_available():
        return None
    index = _cuda.current_device() if dev.index is None else dev.index
    if index >= _cuda.device_count():
        raise ValueError(tr(f"Không có cuda:{index}; máy này có {_cuda.device_count()} GPU.",
                            f"There is no cuda:{index}; this machine has {_cuda.device_count()} GPU(s)."))
    return index


def _not_cuda_reason(device) -> str:
    if device is not None and not isinstance(device, int) and torch.device(device).type != "cuda":
        return tr(f"thiết bị {str(device)!r} không phải CUDA; các bộ đếm này chỉ có với GPU CUDA",
                  f"device {str(device)!r} is not CUDA; these counters exist only for CUDA GPUs")
    return tr("không có GPU CUDA trên máy này", "no CUDA GPU on this machine")


# --------------------------------------------------------------------------- snapshots


@dataclass(frozen=True)
class GpuMemorySnapshot:
    """The CUDA caching allocator's counters for one GPU, or the reason they are not available."""

    available: bool
    device: str
    allocated: int | None = None
    reserved: int | None = None
    peak_allocated: int | None = None
    peak_reserved: int | None = None
    driver_free: int | None = None
    driver_total: int | None = None
    reason: str = ""

    @property
    def cached(self) -> int | None:
        """Return reserved - allocated: memory the allocator keeps for reuse (None off CUDA)."""
        return None if not self.available else self.reserved - self.allocated

    @property
    def driver_used(self) -> int | None:
        """Return what the driver (and ``nvidia-smi``) counts as used on the whole GPU (None off CUDA)."""
        return None if not self.available else self.driver_total - self.driver_free

    @property
    def outside_pytorch(self) -> int | None:
        """Return driver-used minus reserved: CUDA context, libraries and other processes (None off CUDA)."""
        return None if not self.available else self.driver_used - self.reserved

    def __str__(self) -> str:
        if not self.available:
            return tr("Bộ nhớ GPU: không khả dụng — ", "GPU memory: not available — ") + self.reason
        rows = [
            (tr("allocated (tensor đang sống)", "allocated (live tensors)"), self.allocated),
            (tr("reserved (PyTorch giữ, gồm cache)", "reserved (held by PyTorch, incl. cache)"), self.reserved),
            (tr("  trong đó cache trống", "  of which empty cache"), self.cached),
            (tr("peak allocated (từ lần reset)", "peak allocated (since reset)"), self.peak_allocated),
            (tr("driver: đã dùng trên cả GPU", "driver: used on the whole GPU"), self.driver_used),
            (tr("  ngoài PyTorch (context, tiến trình khác)", "  outside PyTorch (context, other processes)"),
             self.outside_pytorch),
            (tr("driver: tổng dung lượng", "driver: total capacity"), self.driver_total),
        ]
        width = max(len(label) for label, _ in rows)
        lines = [f"{self.device}"] + [f"  {label:<{width}}  {format_bytes(value):>11}" for label, value in rows]
        return "\n".join(lines)


def gpu_memory_snapshot(device: str | int | torch.device | None = None) -> GpuMemorySnapshot:
    """Return allocated / reserved / peak bytes of the CUDA caching allocator and the driver's view.

    Off CUDA (CPU, MPS, no GPU) it returns a snapshot with ``available=False`` and the reason,
    instead of raising, so a notebook cell can print it everywhere.
    """
    index = _cuda_index(device)
    if index is None:
        return GpuMemorySnapshot(False, str(device or "cuda"), reason=_not_cuda_reason(device))
    free, total = _cuda.mem_get_info(index)
    return GpuMemorySnapshot(
        available=True,
        device=f"cuda:{index} ({_cuda.name(index)})",
        allocated=_cuda.allocated(index),
        reserved=_cuda.reserved(index),
        peak_allocated=_cuda.peak_allocated(index),
        peak_reserved=_cuda.peak_reserved(index),
        driver_free=int(free),
        driver_total=int(total),
    )


def release_cached_memory(collect_garbage: bool | None = None) -> None:
    """Collect Python garbage, then return the CUDA allocator's empty cache to the driver.

    Call it *after* leaving an ``except`` block: while the exception is alive its traceback keeps the
    failed step's tensors alive, and they cannot be freed.

    Args:
        collect_garbage: Run ``gc.collect()`` first (frees tensors caught in reference cycles). None means
            "only where CUDA is available": without CUDA there is no cache to return and a full collection
            only costs time.
    """
    if collect_garbage is not None and not isinstance(collect_garbage, bool):
        raise TypeError(tr("collect_garbage phải là True, False hoặc None", "collect_garbage must be True, False or None"))
    cuda = _cuda.is_available()
    if collect_garbage or (collect_garbage is None and cuda):
        gc.collect()
    if cuda:
        _cuda.empty_cache()


# --------------------------------------------------------------------------- capped OOM demo


def _need_cuda(device, what: str) -> int:
    index = _cuda_index(device)
    if index is None:
        raise ValueError(
            tr(f"{what} cần GPU CUDA ({_not_cuda_reason(device)}). Hãy chạy trong ô %%gpu.",
               f"{what} needs a CUDA GPU ({_not_cuda_reason(device)}). Run it in a %%gpu cell.")
        )
    return index


@contextlib.contextmanager
def cuda_memory_cap(room_bytes: int, device: str | int | torch.device | None = None):
    """Limit how much more this process may reserve on a GPU, and restore the previous limit afterwards.

    Uses ``torch.cuda.set_per_process_memory_fraction`` so an OOM comes early, never filling a shared or
    large GPU. The cap is "what PyTorch reserves now + `room_bytes`" (after emptying the cache); the old
    fraction is restored in a ``finally`` (read with ``get_per_process_memory_fraction`` where this
    PyTorch has it, else 1.0, the default). Yields the fraction set.
    """
    _check_int("room_bytes", room_bytes, 1)
    index = _need_cuda(device, "cuda_memory_cap")
    previous = _cuda.get_fraction(index)
    _cuda.empty_cache()
    _, total = _cuda.mem_get_info(index)
    fraction = min(1.0, (_cuda.reserved(index) + room_bytes) / total)
    _cuda.set_fraction(fraction, index)
    try:
        yield fraction
    finally:
        _cuda.set_fraction(1.0 if previous is None else previous, index)


@dataclass(frozen=True)
class OomDemoResult:
    """What `oom_demo` saw: how many tensors fitted, memory before the error, and after cleaning up."""

    device: str
    cap_bytes: int
    tensor_bytes: int
    allocations: int
    oom: bool
    allocated_before_error: int
    reserved_before_error: int
    error_message: str | None
    allocated_after_cleanup: int
    reserved_after_cleanup: int
    fraction_restored: float

    def __str__(self) -> str:
        lines = [tr(f"Giới hạn tạm thời: {format_bytes(self.cap_bytes)} trên {self.device}; "
                    f"mỗi tensor {format_bytes(self.tensor_bytes)}.",
                    f"Temporary cap: {format_bytes(self.cap_bytes)} on {self.device}; "
                    f"each tensor {format_bytes(self.tensor_bytes)}.")]
        if self.oom:
            lines.append(tr(f"Tạo được {self.allocations} tensor rồi OutOfMemoryError.",
                            f"{self.allocations} tensors fitted, then OutOfMemoryError."))
        else:
            lines.append(tr(f"Tạo {self.allocations} tensor (hết số lần cho phép) mà KHÔNG có OOM.",
                            f"Made {self.allocations} tensors (the allowed maximum) WITHOUT an OOM."))
        lines += [
            tr("memory_allocated ngay trước lỗi: ", "memory_allocated just before the error: ")
            + format_bytes(self.allocated_before_error)
            + tr(f" (reserved {format_bytes(self.reserved_before_error)})",
                 f" (reserved {format_bytes(self.reserved_before_error)})"),
            tr("Sau del + empty_cache(): allocated ", "After del + empty_cache(): allocated ")
            + format_bytes(self.allocated_after_cleanup) + ", reserved " + format_bytes(self.reserved_after_cleanup),
            tr(f"Đã trả lại giới hạn cũ (fraction = {self.fraction_restored:g}).",
               f"Restored the previous cap (fraction = {self.fraction_restored:g})."),
        ]
        return "\n".join(lines)


def oom_demo(device: str | int | torch.device | None = None, *, room_bytes: int = 2 * 2**30,
             shape: tuple[int, ...] = (10_000, 10_000), dtype: torch.dtype = torch.float32,
             max_allocations: int | None = None) -> OomDemoResult:
    """Trigger a real CUDA out-of-memory error safely, clean up, and report memory before and after.

    The seed's exercise 4 (append 10000×10000 tensors until ``OutOfMemoryError``), made safe: the process
    is capped with `cuda_memory_cap` (``room_bytes`` more than it holds now), at most `max_allocations`
    tensors are made (default: enough to pass the cap, plus 2), ``memory_allocated`` is read before each
    allocation, the error is caught as ``torch.OutOfMemoryError``, the tensors are dropped (``del`` +
    ``gc.collect()`` + ``empty_cache()``) *after* leaving the ``except`` block, and the cap is restored
    whatever happens.

    Raises:
        ValueError: no CUDA GPU (run it in a ``%%gpu`` cell), or bad sizes.
    """
    _check_int("room_bytes", room_bytes, 1)
    if not isinstance(shape, tuple) or not shape or not all(isinstance(s, int) and not isinstance(s, bool)
                                                            and s > 0 for s in shape):
        raise TypeError(tr(f"shape phải là tuple số nguyên dương, vd (10000, 10000), không phải {shape!r}",
                           f"shape must be a tuple of positive ints, e.g. (10000, 10000), not {shape!r}"))
    if not isinstance(dtype, torch.dtype):
        raise TypeError(tr(f"dtype phải là torch.dtype (vd torch.float32), không phải {type(dtype).__name__}",
                           f"dtype must be a torch.dtype (e.g. torch.float32), not {type(dtype).__name__}"))
    tensor_bytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    if max_allocations is None:
        max_allocations = room_bytes // tensor_bytes + 2
    _check_int("max_allocations", max_allocations, 1)
    index = _need_cuda(device, "oom_demo")

    tensors: list[torch.Tensor] = []
    before = (0, 0)
    message = None
    with cuda_memory_cap(room_bytes, index) as fraction:
        cap_bytes = int(fraction * _cuda.mem_get_info(index)[1])
        try:
            for _ in range(max_allocations):
                before = (_cuda.allocated(index), _cuda.reserved(index))
                tensors.append(_cuda.allocate(shape, dtype, index))
        except TorchOutOfMemoryError as exc:
            message = str(exc)
        made = len(tensors)
        del tensors  # drop the references outside the except block (its traceback is gone now)
        release_cached_memory()
        after = (_cuda.allocated(index), _cuda.reserved(index))
    restored = _cuda.get_fraction(index)
    return OomDemoResult(
        device=f"cuda:{index}",
        cap_bytes=cap_bytes,
        tensor_bytes=tensor_bytes,
        allocations=made,
        oom=message is not None,
        allocated_before_error=before[0],
        reserved_before_error=before[1],
        error_message=message,
        allocated_after_cleanup=after[0],
        reserved_after_cleanup=after[1],
        fraction_restored=1.0 if restored is None else restored,
    )


# --------------------------------------------------------------------------- reading an OOM message


@dataclass(frozen=True)
class OomMessage:
    """The fields of a CUDA out-of-memory message (bytes, as rounded in the message; None if absent)."""

    tried_to_allocate: int
    gpu: int | None = None
    total_capacity: int | None = None
    free: int | None = None
    this_process: int | None = None
    other_processes: tuple[tuple[int, int], ...] = ()
    allowed: int | None = None
    allocated_by_pytorch: int | None = None
    reserved_unallocated: int | None = None
    old_format: bool = False

    @property
    def reserved_by_pytorch(self) -> int | None:
        """Return allocated + reserved-but-unallocated: all PyTorch holds (None if the message lacks them)."""
        if self.allocated_by_pytorch is None or self.reserved_unallocated is None:
            return None
        return self.allocated_by_pytorch + self.reserved_unallocated

    def explain(self) -> str:
        """Return the message read field by field, with what each means and what it suggests (Vietnamese)."""
        f = format_bytes
        out = [tr(f"• Tried to allocate {f(self.tried_to_allocate)}: kích thước MỘT yêu cầu cấp phát bị từ chối "
                  "(thường là một tensor), không phải tổng bộ nhớ còn thiếu.",
                  f"• Tried to allocate {f(self.tried_to_allocate)}: the size of ONE allocation request that "
                  "failed (usually one tensor), not the total shortfall.")]
        if self.total_capacity is not None:
            out.append(tr(f"• GPU {self.gpu if self.gpu is not None else '?'} có tổng {f(self.total_capacity)}: "
                          "dung lượng driver báo (ít hơn số in trên hộp một chút).",
                          f"• GPU {self.gpu if self.gpu is not None else '?'} has {f(self.total_capacity)} in "
                          "total: the capacity the driver reports (a bit under the box figure)."))
        if self.free is not None:
            out.append(tr(f"• {f(self.free)} còn trống theo driver, tính trên cả GPU (mọi tiến trình).",
                          f"• {f(self.free)} is free according to the driver, across the whole GPU (all processes)."))
        if self.this_process is not None:
            out.append(tr(f"• Tiến trình này dùng {f(self.this_process)} (gồm cả bộ nhớ ngoài PyTorch: "
                          "CUDA context, thư viện).",
                          f"• This process uses {f(self.this_process)} (including non-PyTorch memory: "
                          "the CUDA context, libraries)."))
        for pid, used in self.other_processes:
            out.append(tr(f"• Tiến trình {pid} dùng {f(used)}: có thể là tiến trình khác (notebook khác, "
                          "worker) đang chiếm GPU.",
                          f"• Process {pid} uses {f(used)}: possibly another process (another notebook, "
                          "a worker) holding the GPU."))
        if self.allowed is not None:
            out.append(tr(f"• {f(self.allowed)} allowed: tiến trình đang bị giới hạn bởi "
                          "set_per_process_memory_fraction.",
                          f"• {f(self.allowed)} allowed: the process is capped by set_per_process_memory_fraction."))
        if self.allocated_by_pytorch is not None:
            out.append(tr(f"• {f(self.allocated_by_pytorch)} allocated by PyTorch: tensor đang sống "
                          "(= torch.cuda.memory_allocated()).",
                          f"• {f(self.allocated_by_pytorch)} allocated by PyTorch: live tensors "
                          "(= torch.cuda.memory_allocated())."))
        if self.reserved_unallocated is not None:
            out.append(tr(f"• {f(self.reserved_unallocated)} reserved but unallocated: cache PyTorch giữ mà "
                          "không dùng được cho yêu cầu này (các mẩu rời rạc).",
                          f"• {f(self.reserved_unallocated)} reserved but unallocated: cache PyTorch holds but "
                          "could not use for this request (scattered pieces)."))
        out.append(tr("Kết luận:", "Verdict:"))
        out += ["  " + line for line in self._verdict()]
        return "\n".join(out)

    def _verdict(self) -> list[str]:
        f = format_bytes
        lines = []
        capacity = self.allowed if self.allowed is not None else self.total_capacity
        if capacity is not None and self.tried_to_allocate > capacity:
            lines.append(tr(f"Một tensor {f(self.tried_to_allocate)} lớn hơn cả {f(capacity)} được phép: dọn cache "
                            "vô ích, phải giảm chính tensor đó (batch, độ dài chuỗi, kích thước ảnh).",
                            f"One {f(self.tried_to_allocate)} tensor is larger than the {f(capacity)} allowed: "
                            "freeing cache cannot help; shrink that tensor (batch, sequence length, image size)."))
        frag = self.reserved_unallocated
        if frag is not None and frag >= max(self.tried_to_allocate, 1) and frag > 0:
            lines.append(tr(f"Cache trống ({f(frag)}) ≥ yêu cầu mà vẫn lỗi: phân mảnh. Thử "
                            "PYTORCH_ALLOC_CONF=expandable_segments:True (tên cũ PYTORCH_CUDA_ALLOC_CONF).",
                            f"Empty cache ({f(frag)}) >= the request and it still failed: fragmentation. Try "
                            "PYTORCH_ALLOC_CONF=expandable_segments:True (old name PYTORCH_CUDA_ALLOC_CONF)."))
        others = sum(used for _, used in self.other_processes)
        if others and self.total_capacity and others > self.total_capacity / 4:
            lines.append(tr(f"Tiến trình khác giữ {f(others)}: tắt chúng (vd notebook cũ) trước khi giảm batch.",
                            f"Other processes hold {f(others)}: stop them (e.g. an old notebook) before "
                            "shrinking the batch."))
        if not lines:
            lines.append(tr("Tensor đang sống chiếm gần hết chỗ: giảm batch, gradient accumulation, mixed "
                            "precision, checkpointing, sharding (theo thứ tự đó).",
                            "Live tensors fill the memory: smaller batch, gradient accumulation, mixed "
                            "precision, checkpointing, sharding (in that order)."))
        return lines


_NUM = r"([\d.]+ (?:bytes|B|KiB|MiB|GiB|TiB))"


def parse_oom_message(text: str) -> OomMessage:
    """Read a CUDA out-of-memory message (current format, and the older one) into its fields.

    The current format is built in ``c10/cuda/CUDACachingAllocator.cpp`` (PyTorch source); sizes in it
    are rounded to 2 decimals, so the parsed bytes are approximate.

    Raises:
        TypeError: `text` is not a str (pass ``str(exc)``).
        ValueError: `text` is not a CUDA OOM message.
    """
    if not isinstance(text, str):
        raise TypeError(tr(f"text phải là chuỗi (vd str(exc)), không phải {type(text).__name__}",
                           f"text must be a string (e.g. str(exc)), not {type(text).__name__}"))
    flat = " ".join(text.split())
    tried = re.search(r"Tried to allocate " + _NUM, flat)
    if "out of memory" not in flat.lower() or tried is None:
        raise ValueError(tr("Đây không phải thông báo CUDA out of memory (thiếu 'out of memory' / "
                            "'Tried to allocate').",
                            "This is not a CUDA out-of-memory message (no 'out of memory' / 'Tried to allocate')."))

    def size(pattern: str) -> int | None:
        match = re.search(pattern, flat)
        return parse_bytes(match.group(1)) if match else None

    gpu = re.search(r"GPU (\d+)", flat)
    old = re.search(r"\(GPU \d+; " + _NUM + " total capacity", flat) is not None
    if old:
        allocated = size(_NUM + " already allocated")
        reserved = size(_NUM + " reserved in total by PyTorch")
        return OomMessage(
            tried_to_allocate=parse_bytes(tried.group(1)),
            gpu=int(gpu.group(1)) if gpu else None,
            total_capacity=size(_NUM + " total capacity"),
            free=size(_NUM + " free"),
            allocated_by_pytorch=allocated,
            reserved_unallocated=None if allocated is None or reserved is None else reserved - allocated,
            old_format=True,
        )
    others = tuple((int(pid), parse_bytes(used)) for pid, used in
                   re.findall(r"Process (\d+) has " + _NUM + " memory in use", flat))
    return OomMessage(
        tried_to_allocate=parse_bytes(tried.group(1)),
        gpu=int(gpu.group(1)) if gpu else None,
        total_capacity=size(r"total capacity of " + _NUM),
        free=size(r"of which " + _NUM + " is free"),
        this_process=size(r"this process has " + _NUM + " memory in use"),
        other_processes=others,
        allowed=size(_NUM + " allowed;"),
        allocated_by_pytorch=size(_NUM + " is allocated by PyTorch"),
        reserved_unallocated=size(_NUM + " is reserved by PyTorch but unallocated"),
    )


# --------------------------------------------------------------------------- OOM-safe training


def _model_device(model: torch.nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _zero(model: torch.nn.Module, optimizer) -> None:
    if optimizer is not None:
        optimizer.zero_grad(set_to_none=True)
    model.zero_grad(set_to_none=True)


def oom_safe_train_step(model: torch.nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor,
                        optimizer: torch.optim.Optimizer | None = None, *, micro_batch_size: int | None = None,
                        budget_bytes: int | None = None) -> float:
    """Run one training step; on out-of-memory, free the gradients and the cache, then re-raise.

    The seed's ``train_step`` pattern: ``try`` forward / backward / step / zero_grad; ``except`` OOM:
    ``zero_grad``, ``empty_cache``, ``raise`` so the caller can lower the batch. Extras:

    - ``micro_batch_size``: split the batch and accumulate gradients (each chunk's mean loss is weighted
      by its share of the batch), so the gradients equal the full-batch ones for a mean-reduced loss.
    - ``budget_bytes``: simulate a GPU of that size on any device. After each micro-batch's forward,
      params + buffers + gradients (as after backward) + current optimizer state + saved activations
      (measured with `SavedTensorMeter`) are compared with the budget; over it raises
      `MemoryBudgetExceeded`. The optimizer state counts as 0 before its first step.

    With ``optimizer=None`` no step is taken and the gradients are left in ``.grad`` (to compare them).

    Returns:
        The mean loss over the batch (a float: no graph is kept).
    """
    _check_module(model)
    _check_optimizer(optimizer)
    if not callable(loss_fn):
        raise TypeError(tr(f"loss_fn phải gọi được (vd nn.CrossEntropyLoss()), không phải {type(loss_fn).__name__}",
                           f"loss_fn must be callable (e.g. nn.CrossEntropyLoss()), not {type(loss_fn).__name__}"))
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError(tr("x và y phải là tensor (một batch đầu vào và nhãn).",
                           "x and y must be tensors (a batch of inputs and targets)."))
    n = len(x)
    if n == 0 or len(y) != n:
        raise ValueError(tr(f"x và y phải có cùng số mẫu > 0, nhận {n} và {len(y)}",
                            f"x and y must hold the same number (> 0) of samples, got {n} and {len(y)}"))
    micro = n if micro_batch_size is None else _check_int("micro_batch_size", micro_batch_size, 1)
    if budget_bytes is not None:
        _check_int("budget_bytes", budget_bytes, 1)
    device = _model_device(model)
    _zero(model, optimizer)
    fixed = 0
    if budget_bytes is not None:
        state = training_state_sizes(model, optimizer)
        fixed = state.params + state.buffers + trainable_bytes(model) + state.optimizer
    loss = meter = xb = yb = None
    try:
        total = 0.0
        for start in range(0, n, micro):
            # a fresh copy, like a DataLoader batch: a slice would keep (and be charged for) all of x
            xb = x[start:start + micro].to(device, copy=True)
            yb = y[start:start + micro].to(device, copy=True)
            if budget_bytes is None:
                loss = loss_fn(model(xb), yb)
            else:
                with SavedTensorMeter(exclude=model) as meter:
                    loss = loss_fn(model(xb), yb)
                needed = fixed + meter.live_bytes
                if needed > budget_bytes:
                    raise MemoryBudgetExceeded(
                        tr(f"Hết bộ nhớ (out of memory, mô phỏng): micro-batch {len(xb)} cần {format_bytes(needed)} "
                           f"(trạng thái {format_bytes(fixed)} + activation {format_bytes(meter.live_bytes)}) "
                           f"> ngân sách {format_bytes(budget_bytes)}.",
                           f"Out of memory (simulated): micro-batch {len(xb)} needs {format_bytes(needed)} "
                           f"(state {format_bytes(fixed)} + activations {format_bytes(meter.live_bytes)}) "
                           f"> budget {format_bytes(budget_bytes)}."),
                        needed=needed, budget=budget_bytes)
            (loss * (len(xb) / n)).backward()
            total += loss.item() * len(xb)
        if optimizer is not None:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        return total / n
    except Exception as exc:  # noqa: BLE001 - only out-of-memory errors are handled, the rest re-raised
        if not is_oom_error(exc):
            raise
        loss = meter = xb = yb = None  # drop this frame's references to the graph
        _zero(model, optimizer)
        release_cached_memory()
        raise  # the caller lowers the batch and retries (after leaving its except block)


@dataclass
class RetryLog:
    """What `train_with_oom_retry` did: the loss of each step, its micro-batch size, and each OOM."""

    batch_size: int
    losses: list[float] = field(default_factory=list)
    micro_batch_sizes: list[int] = field(default_factory=list)
    oom_events: list[tuple[int, int, str]] = field(default_factory=list)  # (step, micro-batch size, message)

    def __str__(self) -> str:
        lines = [tr(f"{len(self.losses)} bước, batch hiệu dụng {self.batch_size}; micro-batch cuối "
                    f"{self.micro_batch_sizes[-1] if self.micro_batch_sizes else '-'}; {len(self.oom_events)} lần OOM.",
                    f"{len(self.losses)} steps, effective batch {self.batch_size}; last micro-batch "
                    f"{self.micro_batch_sizes[-1] if self.micro_batch_sizes else '-'}; {len(self.oom_events)} OOM(s).")]
        for step, micro, message in self.oom_events:
            lines.append(tr(f"  bước {step}: OOM với micro-batch {micro} → thử lại với {max(1, micro // 2)}",
                            f"  step {step}: OOM at micro-batch {micro} → retry with {max(1, micro // 2)}"))
            lines.append("    " + (message.splitlines() or [""])[0][:160])
        return "\n".join(lines)


def train_with_oom_retry(model: torch.nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor,
                         optimizer: torch.optim.Optimizer, *, batch_size: int, min_micro_batch_size: int = 1,
                         budget_bytes: int | None = None) -> RetryLog:
    """Train one pass over (x, y); when a step runs out of memory, halve the micro-batch and retry it.

    The effective batch stays `batch_size`: after an OOM the same batch is redone as smaller micro-batches
    with gradient accumulation, and later steps keep the smaller micro-batch. Memory is released after
    leaving the ``except`` block. Gives up (re-raises) when even `min_micro_batch_size` does not fit.
    ``budget_bytes`` simulates a GPU of that size (see `oom_safe_train_step`).
    """
    _check_optimizer(optimizer, allow_none=False)
    _check_int("batch_size", batch_size, 1)
    _check_int("min_micro_batch_size", min_micro_batch_size, 1)
    if min_micro_batch_size > batch_size:
        raise ValueError(tr(f"min_micro_batch_size ({min_micro_batch_size}) phải ≤ batch_size ({batch_size})",
                            f"min_micro_batch_size ({min_micro_batch_size}) must be <= batch_size ({batch_size})"))
    log = RetryLog(batch_size)
    micro = batch_size
    for step, start in enumerate(range(0, len(x), batch_size)):
        xb, yb = x[start:start + batch_size], y[start:start + batch_size]
        while True:
            message = None
            try:
                loss = oom_safe_train_step(model, loss_fn, xb, yb, optimizer, micro_batch_size=micro,
                                           budget_bytes=budget_bytes)
            except Exception as exc:  # noqa: BLE001 - only out-of-memory errors are handled
                if not is_oom_error(exc) or micro <= min_micro_batch_size:
                    raise
                message = str(exc)
            if message is None:
                break
            release_cached_memory()  # outside the except block: the failed step's tensors are gone now
            log.oom_events.append((step, micro, message))
            micro = max(min_micro_batch_size, micro // 2)
        log.losses.append(loss)
        log.micro_batch_sizes.append(micro)
    return log


# --------------------------------------------------------------------------- batch-size search


@dataclass
class BatchSizeSearch:
    """The result of `find_max_batch_size`: the batch size found and every attempt (size, fitted, note)."""

    batch_size: int | None
    attempts: list[tuple[int, bool, str]] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"  {size:>6}: " + ("✅ " + tr("vừa", "fits") if ok else "❌ OOM") for size, ok, _ in self.attempts]
        found = (tr(f"Batch lớn nhất vừa: {self.batch_size}", f"Largest batch that fits: {self.batch_size}")
                 if self.batch_size is not None else tr("Không batch nào vừa.", "No batch size fits."))
        return "\n".join([*lines, found])


def find_max_batch_size(try_batch: Callable[[int], object], start: int, *, min_batch_size: int = 1,
                        refine: bool = False) -> BatchSizeSearch:
    """Find the largest batch size for which ``try_batch(size)`` does not run out of memory.

    Starts at `start` and halves after each out-of-memory error (``torch.OutOfMemoryError``, a CPU
    allocation failure, or `MemoryBudgetExceeded`); other errors propagate. With ``refine=True`` it then
    bisects between the last size that fitted and the first that did not (memory grows with batch size,
    so this finds the exact largest). Memory is released after each failure, outside the ``except``.

    Args:
        try_batch: Runs one step at a given batch size (e.g. a lambda around `oom_safe_train_step`).
        start: The first (largest) batch size to try.
        min_batch_size: Stop halving below this size.
        refine: Bisect between the halving result and the size above it.

    Returns:
        A `BatchSizeSearch` (``batch_size`` None when even `min_batch_size` does not fit).
    """
    if not callable(try_batch):
        raise TypeError(tr(f"try_batch phải là hàm nhận batch size, không phải {type(try_batch).__name__}",
                           f"try_batch must be a function taking a batch size, not {type(try_batch).__name__}"))
    _check_int("start", start, 1)
    _check_int("min_batch_size", min_batch_size, 1)
    if min_batch_size > start:
        raise ValueError(tr(f"min_batch_size ({min_batch_size}) phải ≤ start ({start})",
                            f"min_batch_size ({min_batch_size}) must be <= start ({start})"))
    if not isinstance(refine, bool):
        raise TypeError(tr("refine phải là True hoặc False", "refine must be True or False"))
    search = BatchSizeSearch(None)

    def fits(size: int) -> bool:
        message = None
        try:
            try_batch(size)
        except Exception as exc:  # noqa: BLE001 - only OOM is handled, the rest re-raised
            if not is_oom_error(exc):
                raise
            message = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        if message is not None:
            release_cached_memory()
        search.attempts.append((size, message is None, message or ""))
        return message is None

    size, failed_above = start, None
    while True:
        if fits(size):
            search.batch_size = size
            break
        failed_above = size
        if size // 2 < min_batch_size:
            return search
        size //= 2
    if refine and failed_above is not None:
        low, high = size, failed_above  # low fits, high does not
        while high - low > 1:
            middle = (low + high) // 2
            if fits(middle):
                low = middle
            else:
                high = middle
        search.batch_size = low
    return search


# --------------------------------------------------------------------------- sharding arithmetic

_STAGE_NAMES = {0: "DDP (không shard)", 1: "ZeRO-1 (shard optimizer)", 2: "ZeRO-2 (+ gradient)",
                3: "ZeRO-3 / FSDP full shard (+ tham số)"}
_STAGE_NAMES_EN = {0: "DDP (no sharding)", 1: "ZeRO-1 (shard optimizer)", 2: "ZeRO-2 (+ gradients)",
                   3: "ZeRO-3 / FSDP full shard (+ params)"}


@dataclass(frozen=True)
class ShardedMemory:
    """Per-GPU bytes of the model state (params, grads, optimizer) under one sharding stage."""

    num_params: int
    num_gpus: int
    stage: int
    params: int
    grads: int
    optimizer: int

    @property
    def total(self) -> int:
        """Return params + grads + optimizer bytes on each GPU (activations and buffers not included)."""
        return self.params + self.grads + self.optimizer

    @property
    def name(self) -> str:
        """Return the stage's name, e.g. "ZeRO-2 (+ gradient)"."""
        return tr(_STAGE_NAMES[self.stage], _STAGE_NAMES_EN[self.stage])

    def __str__(self) -> str:
        gb = 1e9
        return tr(f"{self.name:<38} {self.num_gpus} GPU: mỗi GPU {self.total / gb:8.2f} GB "
                  f"(tham số {self.params / gb:.2f} + gradient {self.grads / gb:.2f} + optimizer {self.optimizer / gb:.2f})",
                  f"{self.name:<38} {self.num_gpus} GPU(s): per GPU {self.total / gb:8.2f} GB "
                  f"(params {self.params / gb:.2f} + grads {self.grads / gb:.2f} + optimizer {self.optimizer / gb:.2f})")


def sharded_training_memory(num_params: int, num_gpus: int = 1, stage: int = 0, *, param_bytes: float = 2,
                            grad_bytes: float = 2, optimizer_bytes: float = 12) -> ShardedMemory:
    """Return the per-GPU bytes of parameters, gradients and optimizer state under DDP or ZeRO stage 1/2/3.

    The defaults are the ZeRO paper's accounting for mixed-precision Adam (Rajbhandari et al., 2020,
    "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models", section 3.1): fp16 parameters
    (2 bytes) + fp16 gradients (2) + optimizer state K = 12 bytes (fp32 master copy, momentum, variance),
    16 bytes per parameter in all. Stage 0 (DDP) replicates everything; stage 1 shards the optimizer state
    over `num_gpus`, stage 2 also the gradients, stage 3 also the parameters (PyTorch FSDP's full
    sharding; FSDP's SHARD_GRAD_OP is like stage 2). A shard is ``ceil(num_params / num_gpus)`` parameters.
    Activations, buffers, temporary all-gather buffers and fragmentation are not included.

    Args:
        num_params: Number of model parameters (e.g. 7_000_000_000).
        num_gpus: Data-parallel GPUs sharing the state.
        stage: 0 (DDP), 1, 2 or 3 (ZeRO stage).
        param_bytes, grad_bytes, optimizer_bytes: Bytes per parameter of each part (fp32 Adam
            without mixed precision: 4, 4, 8).
    """
    _check_int("num_params", num_params, 0)
    _check_int("num_gpus", num_gpus, 1)
    _check_int("stage", stage, 0)
    if stage > 3:
        raise ValueError(tr(f"stage phải là 0 (DDP), 1, 2 hoặc 3 (ZeRO), nhận {stage}",
                            f"stage must be 0 (DDP), 1, 2 or 3 (ZeRO), got {stage}"))
    for name, value in (("param_bytes", param_bytes), ("grad_bytes", grad_bytes),
                        ("optimizer_bytes", optimizer_bytes)):
        _check_number(name, value, 0)
    shard = math.ceil(num_params / num_gpus)

    def part(bytes_per_param: float, sharded: bool) -> int:
        return round((shard if sharded else num_params) * bytes_per_param)

    return ShardedMemory(
        num_params=num_params,
        num_gpus=num_gpus,
        stage=stage,
        params=part(param_bytes, stage >= 3),
        grads=part(grad_bytes, stage >= 2),
        optimizer=part(optimizer_bytes, stage >= 1),
    )

"""Small helpers for a DDP training script run by ``torchrun`` (one process per rank).

Notebook 08 writes its ``train_ddp.py`` with ``%%writefile`` and imports these from it; the instrumented
test worker ``lessons_lib.ddp_demo`` uses them too, so both end their processes the same way. This module
imports only torch and the standard library, and does nothing on import.

* ``choose_backend()``: "nccl" when every local rank can have a GPU of its own, else "gloo"; the
  ``DDP_BACKEND`` environment variable overrides it (the launcher sets it to fall back to gloo).
* ``flat()``: a list of tensors as one flat list of floats (for JSON).
* ``save_json()``: write a rank's results atomically and force them to disk.
* ``RankRecorder``: what one rank saw (its shard, weights before/after DDP, per step its batch, local and
  all-reduced gradients, weights), saved as ``rank{RANK}.json`` for the notebook's checks.
* ``exit_rank()``: end the rank's process once its work is done and flushed (see its comment: issue 15).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import NoReturn

import torch
import torch.distributed as dist

BACKENDS = ("gloo", "nccl")
BACKEND_ENV = "DDP_BACKEND"
ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def choose_backend(local_world_size: int | None = None) -> str:
    """Return the process-group backend for this rank: $DDP_BACKEND if set, else "nccl" with a GPU per rank, else "gloo".

    Args:
        local_world_size: Ranks on this machine; None reads LOCAL_WORLD_SIZE (set by torchrun), default 1.

    Returns:
        "gloo" or "nccl".
    """
    forced = os.environ.get(BACKEND_ENV, "").strip().lower()
    if forced:
        if forced not in BACKENDS:
            raise ValueError(f"{BACKEND_ENV} must be one of {BACKENDS} (or unset), got {forced!r}")
        return forced
    if local_world_size is None:
        local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if isinstance(local_world_size, bool) or not isinstance(local_world_size, int):
        raise TypeError(f"local_world_size must be an int (ranks on this machine), got {type(local_world_size).__name__}")
    if local_world_size < 1:
        raise ValueError(f"local_world_size must be >= 1, got {local_world_size}")
    if torch.cuda.is_available() and torch.cuda.device_count() >= local_world_size and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def flat(tensors) -> list[float]:
    """Return the values of `tensors` (an iterable of tensors) as one flat list of Python floats."""
    tensors = list(tensors)
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"tensors must be an iterable of tensors (e.g. model.parameters()), got a {type(t).__name__}")
    return torch.cat([t.detach().reshape(-1).float().cpu() for t in tensors]).tolist() if tensors else []


def save_json(path: str | os.PathLike, data: dict) -> Path:
    """Write `data` as JSON to `path` atomically (a reader never sees half a file) and fsync it; return the path."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a file path (str or Path), got {type(path).__name__}")
    if not isinstance(data, dict):
        raise TypeError(f"data must be a dict (it becomes one JSON object), got {type(data).__name__}")
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


class RankRecorder:
    """Record what this rank sees during a DDP run and save it as ``rank{RANK}.json`` (the notebook compares the ranks).

    Args:
        sampler: The rank's ``DistributedSampler`` (its indices are the rank's shard, in the order used).
        model: The model before it is wrapped in DDP (its weights are recorded as they are now).
        backend: The process-group backend ("gloo" or "nccl").
    """

    def __init__(self, sampler, model, backend: str):
        if not hasattr(sampler, "__iter__") or not hasattr(sampler, "dataset"):
            raise TypeError(f"sampler must be the rank's DistributedSampler, got {type(sampler).__name__}")
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be the nn.Module before DDP wraps it, got {type(model).__name__}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        params = list(model.parameters())
        self.data = {
            "rank": int(os.environ.get("RANK", "0")), "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
            "world_size": int(os.environ.get("WORLD_SIZE", "1")), "backend": backend,
            "device": str(params[0].device) if params else "cpu", "pid": os.getpid(),
            "torch_version": torch.__version__, "env": {k: os.environ.get(k) for k in ENV_KEYS},
            "n_samples": len(sampler.dataset), "shard": [int(i) for i in sampler],
            "init_before_ddp": flat(params), "init_after_ddp": None, "steps": [],
        }
        self._used = 0

    def after_ddp(self, ddp) -> None:
        """Record the weights right after DDP wrapped the model (DDP broadcast rank 0's weights)."""
        self.data["init_after_ddp"] = flat(ddp.parameters())

    def step(self, x, local_grads, ddp) -> None:
        """Record one step: call it after ``optimizer.step()``.

        Args:
            x: The step's input batch (its length says which samples of the shard it held).
            local_grads: The gradients of this rank's own batch alone (``torch.autograd.grad`` on the bare model).
            ddp: The DDP model: its ``.grad`` holds the all-reduced gradient, its weights the updated ones.
        """
        n = len(x)
        batch = self.data["shard"][self._used:self._used + n]
        self._used += n
        self.data["steps"].append({
            "step": len(self.data["steps"]), "batch": batch, "local_grad": flat(local_grads),
            "grad": flat(p.grad for p in ddp.parameters()), "weights": flat(ddp.parameters()),
        })

    def save(self, folder: str | os.PathLike = ".") -> Path:
        """Write ``rank{RANK}.json`` into `folder` (atomically, fsynced) and return its path."""
        if self.data["init_after_ddp"] is None:
            raise ValueError("call after_ddp(ddp) once DDP wrapped the model, before save()")
        return save_json(Path(folder) / f"rank{self.data['rank']}.json", self.data)


def exit_rank(code: int = 0) -> NoReturn:
    """End this rank's process with exit status `code`: flush stdout/stderr, then ``os._exit`` (see issue 15).

    Call it last, once the results are written (``save_json`` fsyncs them) and the process group is torn
    down (``dist.barrier()``, then ``dist.destroy_process_group()``).
    """
    # Issue 15: skip interpreter finalization and C++ static destructors on purpose. destroy_process_group()
    # does not stop gloo's threads (pt_gloo_runloop x2, gloo_tcp_loop): the C++ process group lives while
    # anything refers to it, and after DDP something in torch's module state does until interpreter shutdown
    # clears the modules (gdb: ~ProcessGroupGloo runs inside Py_FinalizeEx). A pt_gloo_runloop thread also
    # drops its reference to the work it just finished *after* the main thread's wait() returned. Caught in a
    # notebook-kernel run under load (1 in 150): the barrier's work died on that thread after "done", taking the
    # last all-reduce work with it (weak reference), whose captured thread-local state (torch >= 2.6 carries the
    # submitter's at::ThreadLocalState into gloo works) held a c10::SafePyObject. Dropping a Python object needs
    # the GIL; during finalization CPython < 3.14 answers with pthread_exit, whose unwinding hits a noexcept C++
    # frame: "terminate called without an active exception", SIGABRT, a failed rank that had finished its work.
    # Nothing is left to clean up here (torchrun reaps the process, the OS closes its sockets and files). A real
    # error during the work never gets here: the exception propagates and the rank fails as before. (CPython
    # >= 3.14 parks such a thread instead; ~ProcessGroupGloo, which joins its threads during finalization, would
    # then wait forever: os._exit avoids both.)
    if isinstance(code, bool) or not isinstance(code, int):
        raise TypeError(f"code must be an int exit status, got {type(code).__name__}")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):  # closed or replaced stream: nothing more to write
            pass
    os._exit(code)

"""Helpers for notebook 08's ``train_ddp.py`` (one process per rank); only torch and the standard library."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import NoReturn

import torch
import torch.distributed as dist

_BACKENDS = ("gloo", "nccl")
_BACKEND_ENV = "DDP_BACKEND"
_ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def choose_backend() -> str:
    """Return $DDP_BACKEND if set, else "nccl" when each of $LOCAL_WORLD_SIZE ranks has a GPU, else "gloo"."""
    forced = os.environ.get(_BACKEND_ENV, "").strip().lower()
    if forced:
        if forced not in _BACKENDS:
            raise ValueError(f"{_BACKEND_ENV} phải là một trong {_BACKENDS} (hoặc không đặt), nhận được {forced!r}")
        return forced
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # set by torchrun
    if torch.cuda.is_available() and torch.cuda.device_count() >= local_world_size and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def _flat(tensors) -> list[float]:
    """Return the values of `tensors` as one flat list of Python floats (for JSON)."""
    tensors = list(tensors)
    return torch.cat([t.detach().reshape(-1).float().cpu() for t in tensors]).tolist() if tensors else []


class RankRecorder:
    """Record what this rank sees (its sampler's shard, the model before DDP) and save it as ``rank{RANK}.json``."""

    def __init__(self, sampler, model, backend: str):
        if not hasattr(sampler, "__iter__") or not hasattr(sampler, "dataset"):
            raise TypeError(f"sampler phải là DistributedSampler của rank này, không phải {type(sampler).__name__}")
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model phải là nn.Module trước khi DDP bọc nó, không phải {type(model).__name__}")
        if backend not in _BACKENDS:
            raise ValueError(f"backend phải là một trong {_BACKENDS}, nhận được {backend!r}")
        params = list(model.parameters())
        self.data = {
            "rank": int(os.environ.get("RANK", "0")), "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
            "world_size": int(os.environ.get("WORLD_SIZE", "1")), "backend": backend,
            "device": str(params[0].device) if params else "cpu", "pid": os.getpid(),
            "torch_version": torch.__version__, "env": {k: os.environ.get(k) for k in _ENV_KEYS},
            "n_samples": len(sampler.dataset), "shard": [int(i) for i in sampler],
            "init_before_ddp": _flat(params), "init_after_ddp": None, "steps": [],
        }
        self._used = 0

    def after_ddp(self, ddp) -> None:
        """Record the weights right after DDP wrapped the model (DDP broadcast rank 0's weights)."""
        self.data["init_after_ddp"] = _flat(ddp.parameters())

    def step(self, x, local_grads, ddp) -> None:
        """Record one step after ``optimizer.step()``: batch `x`, the bare model's `local_grads`, and `ddp`'s."""
        batch = self.data["shard"][self._used:self._used + len(x)]
        self._used += len(x)
        self.data["steps"].append({
            "step": len(self.data["steps"]), "batch": batch, "local_grad": _flat(local_grads),
            "grad": _flat(p.grad for p in ddp.parameters()), "weights": _flat(ddp.parameters()),
        })

    def save(self, folder: str | os.PathLike = ".") -> Path:
        """Write ``rank{RANK}.json`` into `folder` atomically (a reader never sees half a file), fsynced."""
        if self.data["init_after_ddp"] is None:
            raise ValueError("hãy gọi rec.after_ddp(ddp) ngay sau khi DDP bọc mô hình, trước rec.save()")
        path = Path(folder) / f"rank{self.data['rank']}.json"
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return path


def exit_rank() -> NoReturn:
    """End this rank with exit status 0 (flush, then ``os._exit``): last, after ``rec.save()`` and the teardown."""
    # Skip interpreter finalization and C++ static destructors on purpose. destroy_process_group() does not
    # stop gloo's threads (pt_gloo_runloop x2, gloo_tcp_loop): the C++ process group lives while anything
    # refers to it, and after DDP something in torch's module state does until interpreter shutdown clears
    # the modules (gdb: ~ProcessGroupGloo runs inside Py_FinalizeEx). A pt_gloo_runloop thread also drops its
    # reference to the work it just finished *after* the main thread's wait() returned. Caught in a
    # notebook-kernel run under load (1 in 150): the barrier's work died on that thread after "done", taking the
    # last all-reduce work with it (weak reference), whose captured thread-local state (torch >= 2.6 carries the
    # submitter's at::ThreadLocalState into gloo works) held a c10::SafePyObject. Dropping a Python object needs
    # the GIL; during finalization CPython < 3.14 answers with pthread_exit, whose unwinding hits a noexcept C++
    # frame: "terminate called without an active exception", SIGABRT, a failed rank that had finished its work.
    # Nothing is left to clean up here (torchrun reaps the process, the OS closes its sockets and files). A real
    # error during the work never gets here: the exception propagates and the rank fails as before. (CPython
    # >= 3.14 parks such a thread instead; ~ProcessGroupGloo, which joins its threads during finalization, would
    # then wait forever: os._exit avoids both.) Measured by benchmarks/ddp_reliability.py --worker race.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, ValueError, OSError):  # closed or replaced stream: nothing more to write
            pass
    os._exit(0)

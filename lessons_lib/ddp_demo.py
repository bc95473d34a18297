"""A tiny DistributedDataParallel training run that records what every rank sees.

Launched by ``torchrun`` (one process per rank), never imported by the notebooks::

    python -m torch.distributed.run --nnodes=1 --nproc_per_node=2 \\
        -m lessons_lib.ddp_demo --out /tmp/ddp_run

On a CPU-only machine the ranks talk over ``gloo``; with at least one CUDA GPU per rank they
use ``nccl`` and rank ``LOCAL_RANK`` runs on ``cuda:LOCAL_RANK``. Every rank writes into
``--out``:

* ``rank{R}.log``: everything the rank prints (its stdout/stderr, C++ messages included), one
  numbered progress line per phase, so a launcher can tell which rank stopped where;
* ``rank{R}.json``: its data shard, and for each step its batch, its local gradient, the
  all-reduced gradient DDP left in ``.grad``, and its weights after ``optimizer.step()``.

Rank 0 also writes ``reference.json``: the same steps done by one process on the union of all
ranks' batches (the single-process full-batch gradient and weights), for comparison.

``--fail-rank R --fail-mode raise|exit|hang`` makes rank R fail on purpose (a test hook): at step
``--fail-step`` between its forward and backward pass, where the other ranks then wait inside the
all-reduce, or with ``--fail-step -1`` at start, before ``init_process_group``.
``--unsafe-teardown`` skips the barrier and ``destroy_process_group`` (a hazard hook for benchmarks).
A rank that finished its work ends with ``lessons_lib.ddp_worker.exit_rank`` (``os._exit`` after flushing,
issue 15); ``--exit python`` ends it through normal interpreter shutdown instead (the behaviour before
that fix, for the reliability benchmark).

This module imports only torch and the standard library (and ``lessons_lib.ddp_worker``), so it runs
wherever torch does.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from lessons_lib.ddp_worker import choose_backend as _choose_backend
from lessons_lib.ddp_worker import exit_rank, flat, save_json

N_SAMPLES = 64
N_FEATURES = 8
N_HIDDEN = 16
N_CLASSES = 4
FAIL_MODES = ("raise", "exit", "hang")
FAIL_EXIT_CODE = 17
ENV_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser of the demo."""
    p = argparse.ArgumentParser(description="Tiny DDP run that records shards, gradients and weights per rank.")
    p.add_argument("--out", required=True, help="existing directory where every rank writes its files")
    p.add_argument("--steps", type=int, default=3, help="optimizer steps (default 3)")
    p.add_argument("--batch-size", type=int, default=8, help="samples per rank per step (default 8)")
    p.add_argument("--lr", type=float, default=0.1, help="SGD learning rate (default 0.1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the data and of rank 0's model")
    p.add_argument("--backend", default="auto", choices=("auto", "gloo", "nccl"),
                   help="process-group backend; auto = nccl with one GPU per rank, else gloo")
    p.add_argument("--pg-timeout", type=float, default=120.0,
                   help="seconds a collective may wait before it fails (default 120)")
    p.add_argument("--fail-rank", type=int, default=None, help="test hook: this rank fails on purpose")
    p.add_argument("--fail-mode", default="raise", choices=FAIL_MODES,
                   help="raise: Python exception; exit: hard exit without traceback; hang: sleep forever")
    p.add_argument("--fail-step", type=int, default=0,
                   help="step at which --fail-rank fails, between forward and backward (default 0); "
                        "-1: at start, before init_process_group")
    p.add_argument("--unsafe-teardown", action="store_true",
                   help="hazard hook: skip barrier and destroy_process_group (gloo may abort at exit)")
    p.add_argument("--exit", default="os", choices=("os", "python"),
                   help="os: end a finished rank with os._exit after flushing (default, issue 15); "
                        "python: normal interpreter shutdown (the behaviour before that fix)")
    return p


class RankLog:
    """Numbered progress lines in the rank's log file (whose fd also receives stdout/stderr)."""

    def __init__(self, rank: int):
        self.rank = rank
        self.count = 0
        self.start = time.perf_counter()

    def __call__(self, message: str) -> None:
        self.count += 1
        elapsed = time.perf_counter() - self.start
        print(f"[rank {self.rank} | #{self.count} | +{elapsed:.2f}s | t={time.time():.3f}] {message}", flush=True)


def redirect_output(path: Path) -> None:
    """Send this process's stdout and stderr (Python and C++) to `path`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, encoding="utf-8", closefd=False)  # noqa: SIM115


def make_data(seed: int) -> TensorDataset:
    """Return the synthetic classification data set (the same on every rank)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N_SAMPLES, N_FEATURES, generator=g)
    y = torch.randint(0, N_CLASSES, (N_SAMPLES,), generator=g)
    return TensorDataset(x, y)


def make_model(seed: int) -> nn.Module:
    """Return the small MLP, initialised from `seed`."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(N_FEATURES, N_HIDDEN), nn.ReLU(), nn.Linear(N_HIDDEN, N_CLASSES))


def choose_backend(requested: str, local_world_size: int) -> str:
    """Return `requested` unless it is "auto"; then ``ddp_worker.choose_backend`` ($DDP_BACKEND, else nccl with a GPU per rank)."""
    if requested != "auto":
        return requested
    return _choose_backend(local_world_size)


def write_json(path: Path, data: dict) -> None:
    """Write `data` to `path` atomically and fsync it (``ddp_worker.save_json``)."""
    save_json(path, data)


def maybe_fail(args, rank: int, step: int, log: RankLog) -> None:
    """Fail on purpose when this is the rank and step chosen by --fail-rank/--fail-step."""
    if args.fail_rank != rank or args.fail_step != step:
        return
    where = "at start" if step < 0 else f"at step {step}"
    if args.fail_mode == "raise":
        log(f"{where}: failing on purpose (--fail-mode raise)")
        raise RuntimeError(f"injected failure on rank {rank} {where} (--fail-rank {rank})")
    if args.fail_mode == "exit":
        log(f"{where}: exiting on purpose with code {FAIL_EXIT_CODE} (--fail-mode exit)")
        os._exit(FAIL_EXIT_CODE)
    log(f"{where}: hanging on purpose (--fail-mode hang)")
    while True:
        time.sleep(3600)


def reference_steps(init_state: dict, data: TensorDataset, batches: list[list[int]], lr: float,
                    device: torch.device) -> list[dict]:
    """Redo the steps in one process on the union of all ranks' batches (full-batch gradients)."""
    model = make_model(0)
    model.load_state_dict(init_state)
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    steps = []
    for step, indices in enumerate(batches):
        x, y = data.tensors[0][indices].to(device), data.tensors[1][indices].to(device)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        grad = flat(p.grad for p in model.parameters())
        opt.step()
        steps.append({"step": step, "batch": indices, "loss": loss.item(), "grad": grad,
                      "weights": flat(model.parameters())})
    return steps


def train(args, log: RankLog) -> None:
    """Run the DDP steps on this rank and write rank{R}.json (and reference.json on rank 0)."""
    out = Path(args.out)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    backend = choose_backend(args.backend, int(os.environ.get("LOCAL_WORLD_SIZE", world)))
    if backend == "nccl":
        torch.cuda.set_device(local_rank)  # before init: this process owns cuda:LOCAL_RANK only
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    maybe_fail(args, rank, -1, log)
    log(f"init_process_group(backend={backend!r}) as rank {rank} of {world}, device {device} "
        "(collective: waits for every rank)")
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=args.pg_timeout))
    try:
        ok = False
        _train_steps(args, log, out, rank, world, local_rank, backend, device)
        ok = True
    finally:
        # Teardown. The barrier makes every rank finish its last collective before any rank closes
        # its connections; destroy_process_group then stops gloo's worker threads while Python is
        # still alive (exiting without it can abort the process with "terminate called without an
        # active exception"). After an error the barrier is skipped: the other ranks may never
        # reach it, and torchrun stops them.
        if args.unsafe_teardown:
            log("skipping barrier and destroy_process_group (--unsafe-teardown)")
        else:
            if ok:
                log("barrier before teardown (collective: waits for every rank)")
                dist.barrier(device_ids=[local_rank]) if backend == "nccl" else dist.barrier()
            log("destroy_process_group")
            dist.destroy_process_group()
    log("done")


def _train_steps(args, log, out, rank, world, local_rank, backend, device) -> None:
    data = make_data(args.seed)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=args.seed, drop_last=True)
    sampler.set_epoch(0)
    shard = list(sampler)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler)

    # Each rank starts from different random weights on purpose: DDP's constructor broadcasts rank 0's.
    model = make_model(args.seed + rank).to(device)
    before = flat(model.parameters())
    log("wrapping the model in DDP (collective: broadcast of rank 0's weights)")
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if backend == "nccl" else None)
    after = flat(ddp.module.parameters())
    init_state = copy.deepcopy({k: v.cpu() for k, v in ddp.module.state_dict().items()})
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()
    log(f"DDP ready: shard of {len(shard)} samples, {len(loader)} batches of {args.batch_size}")

    steps = []
    for step, (x, y) in enumerate(loader):
        if step >= args.steps:
            break
        x, y = x.to(device), y.to(device)
        indices = shard[step * args.batch_size:(step + 1) * args.batch_size]
        local = torch.autograd.grad(loss_fn(ddp.module(x), y), list(ddp.module.parameters()))
        opt.zero_grad()
        loss = loss_fn(ddp(x), y)
        log(f"step {step}: forward done, loss {loss.item():.4f}")
        maybe_fail(args, rank, step, log)
        log(f"step {step}: backward (collective: all-reduce of gradients)")
        loss.backward()
        grad = flat(p.grad for p in ddp.parameters())
        opt.step()
        steps.append({"step": step, "batch": indices, "loss": loss.item(), "local_grad": flat(local),
                      "grad": grad, "weights": flat(ddp.parameters())})
        log(f"step {step}: optimizer step done")
    if len(steps) < args.steps:
        raise ValueError(f"--steps {args.steps} is more than the {len(steps)} batches each rank has")

    if rank == 0:
        per_rank = [list(DistributedSampler(data, num_replicas=world, rank=r, shuffle=True, seed=args.seed,
                                            drop_last=True)) for r in range(world)]
        # (set_epoch(0) is the default epoch, so these are exactly the other ranks' shards)
        batches = [[i for s in per_rank for i in s[k * args.batch_size:(k + 1) * args.batch_size]]
                   for k in range(args.steps)]
        log("computing the single-process full-batch reference")
        write_json(out / "reference.json", {"steps": reference_steps(init_state, data, batches, args.lr, device)})

    write_json(out / f"rank{rank}.json", {
        "rank": rank, "local_rank": local_rank, "world_size": world, "backend": backend,
        "device": str(device), "pid": os.getpid(), "torch_version": torch.__version__,
        "env": {k: os.environ.get(k) for k in ENV_KEYS},
        "batch_size": args.batch_size, "n_samples": len(data), "shard": shard,
        "init_before_ddp": before, "init_after_ddp": after, "steps": steps,
    })
    log(f"wrote rank{rank}.json")


def main(argv: list[str] | None = None) -> int:
    """Entry point of one rank: parse the arguments, redirect output, train, tear down."""
    args = build_parser().parse_args(argv)
    out = Path(args.out)
    if not out.is_dir():
        raise SystemExit(f"--out must be an existing directory, got {args.out!r}")
    rank = int(os.environ.get("RANK", "-1"))
    if rank < 0 or "WORLD_SIZE" not in os.environ:
        raise SystemExit("RANK/WORLD_SIZE are not set: launch this script with torchrun "
                         "(python -m torch.distributed.run --nproc_per_node=2 -m lessons_lib.ddp_demo --out DIR)")
    redirect_output(out / f"rank{rank}.log")
    log = RankLog(rank)
    log(f"started: pid {os.getpid()}, torch {torch.__version__}, LOCAL_RANK={os.environ.get('LOCAL_RANK')}, "
        f"WORLD_SIZE={os.environ['WORLD_SIZE']}, MASTER_ADDR={os.environ.get('MASTER_ADDR')}, "
        f"MASTER_PORT={os.environ.get('MASTER_PORT')}")
    try:
        train(args, log)
    except BaseException:
        log("ERROR\n" + traceback.format_exc())
        raise
    return 0


if __name__ == "__main__":
    from torch.distributed.elastic.multiprocessing.errors import record

    _args = build_parser().parse_args()
    _code = record(main)()  # an error raises here and fails the rank as usual
    if _args.exit == "python":
        sys.exit(_code)
    exit_rank(_code)  # results written and fsynced, process group destroyed: end here (issue 15)

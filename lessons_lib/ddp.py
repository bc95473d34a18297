"""Launch the DDP demo (`lessons_lib.ddp_demo`) with torchrun and check what the ranks computed.

``run_ddp_demo()`` starts ``python -m torch.distributed.run --nproc_per_node=N`` in a new
session, on a port the OS just handed out, with a wall-clock timeout. Whatever happens (success,
a rank that dies, a rank that hangs, Ctrl-C in the notebook) every process it started is gone
when it returns. A failure raises ``DDPRunError`` naming the rank at fault and the tail of its log.

The result (``DDPRun``) holds every rank's shard, gradients and weights; ``run.comparison``
(``compare_ranks()``) checks them against each other and against the single-process full-batch
run that rank 0 recorded.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .i18n import tr

DEMO_MODULE = "lessons_lib.ddp_demo"
FAIL_MODES = ("raise", "exit", "hang")
BACKENDS = ("auto", "gloo", "nccl")
BACKEND_ENV = "DDP_BACKEND"  # read by lessons_lib.ddp_worker.choose_backend() in the ranks
RUN_MARKER_ENV = "LESSONS_DDP_RUN"  # the run folder, inherited by every process of a run
_PORT_TRIES = 3
_LOG_TAIL_LINES = 12
_PROGRESS = re.compile(r"^\[rank (\d+) \| #(\d+) \| \+[\d.]+s \| t=([\d.]+)\] (.*)$")
# Errors a rank reports only because a peer died or hung (a consequence, not the cause).
_PEER_ERROR = re.compile(r"closed by peer|reset by peer|remote worker|Broken pipe|timed out|Timed out|"
                         r"Connection refused|communicator was aborted", re.I)


class DDPRunError(RuntimeError):
    """A DDP run failed or hung; ``rank`` is the rank at fault (None if no rank started)."""

    def __init__(self, message: str, rank: int | None = None, kind: str = "died", log_tail: str = ""):
        super().__init__(message)
        self.rank = rank
        self.kind = kind
        self.log_tail = log_tail


# --------------------------------------------------------------------------- processes


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on `host` that the OS reports free right now (bind to port 0)."""
    if not isinstance(host, str) or not host:
        raise TypeError(f"host must be an address string such as '127.0.0.1', got {host!r}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _cmdline(pid: int) -> str | None:
    """Return the command line of a live (non-zombie) process, or None if it is gone."""
    proc = Path(f"/proc/{pid}")
    if Path("/proc/self").exists():
        try:
            stat = (proc / "stat").read_text()
            if stat.rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
                return None
            return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            return None
    try:  # macOS and other systems without /proc
        out = subprocess.run(["ps", "-o", "stat=,command=", "-p", str(pid)], capture_output=True, text=True)
    except OSError:
        return None
    line = out.stdout.strip()
    if not line or line.startswith("Z"):
        return None
    return line.split(None, 1)[-1]


def _environ_has(pid: int, marker: bytes) -> bool:
    """Return True when the environment of process `pid` contains `marker` (Linux only; False elsewhere)."""
    try:
        return marker in Path(f"/proc/{pid}/environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError, OSError):
        return False


def find_processes(marker: str) -> list[int]:
    """Return the pids of live processes whose command line (or, on Linux, environment) contains `marker`.

    ``launch()`` puts its run folder in an environment variable of torchrun, which every rank inherits: a
    rank's command line (``python -u train_ddp.py``) need not name the folder.
    """
    if not isinstance(marker, str):
        raise TypeError(f"marker must be a str (e.g. the run's temp folder), got {type(marker).__name__}")
    if len(marker) < 8:
        raise ValueError(f"marker must be a distinctive string of 8+ characters (e.g. a temp folder), got {marker!r}")
    me = os.getpid()
    if Path("/proc/self").exists():
        pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    else:
        out = subprocess.run(["ps", "-axo", "pid="], capture_output=True, text=True)
        pids = [int(x) for x in out.stdout.split()]
    found = []
    raw = marker.encode()
    for pid in pids:
        if pid == me:
            continue
        cmd = _cmdline(pid)
        if cmd is not None and (marker in cmd or _environ_has(pid, raw)):
            found.append(pid)
    return sorted(found)


def _signal_group(pid: int, sig: int) -> None:
    """Send `sig` to the process group led by `pid` (to the process alone where groups do not exist)."""
    killpg = getattr(os, "killpg", None)
    try:
        if killpg is not None:
            killpg(pid, sig)
        else:  # pragma: no cover - Windows
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_tree(proc: subprocess.Popen, out_dir: Path, grace: float = 5.0) -> None:
    """Stop torchrun and every rank; return when none of them is left."""
    if proc.poll() is None:
        _signal_group(proc.pid, signal.SIGTERM)  # SIGTERM first: torchrun then stops its workers itself
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, getattr(signal, "SIGKILL", signal.SIGTERM))
            proc.wait()
    # The ranks run in sessions of their own (torchrun starts them that way), so a killpg of
    # torchrun's group does not reach them: find them by their --out folder and kill their groups.
    deadline = time.monotonic() + grace
    while True:
        left = find_processes(str(out_dir))
        if not left:
            return
        kill = getattr(signal, "SIGKILL", signal.SIGTERM)
        for pid in left:
            _signal_group(pid, kill)  # a rank that leads its own group: it and anything it started
            try:
                os.kill(pid, kill)  # a rank that does not lead a group (older torchrun)
            except (ProcessLookupError, PermissionError):
                pass
        if time.monotonic() > deadline:
            raise DDPRunError(tr(f"Không dừng được các tiến trình {left} của lượt chạy DDP.",
                                 f"Could not stop the DDP processes {left}."), kind="leftover")
        time.sleep(0.05)


# --------------------------------------------------------------------------- the command


def torchrun_command(out_dir: str | os.PathLike, nproc_per_node: int = 2, master_port: int | None = None,
                     steps: int = 3, backend: str = "auto", python: str | None = None,
                     extra_args: list[str] | None = None) -> list[str]:
    """Return the torchrun command line that runs the demo (the same a learner types in a terminal).

    Args:
        out_dir: Folder where the ranks write their files.
        nproc_per_node: Processes to start on this machine (one per GPU with nccl).
        master_port: Port of the rendezvous store on 127.0.0.1; None leaves it out (torchrun's default).
        steps: Optimizer steps.
        backend: "auto", "gloo" or "nccl".
        python: Interpreter to use; None = the current one.
        extra_args: More arguments for the demo script.

    Returns:
        The command as a list of strings.
    """
    _check_int("nproc_per_node", nproc_per_node, 1)
    _check_int("steps", steps, 1)
    if master_port is not None:
        _check_int("master_port", master_port, 1)
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a folder path (str or Path), got {type(out_dir).__name__}")
    cmd = [python or sys.executable, "-m", "torch.distributed.run", "--nnodes=1", f"--nproc_per_node={nproc_per_node}"]
    if master_port is not None:
        cmd += ["--master_addr=127.0.0.1", f"--master_port={master_port}"]
    cmd += ["--max_restarts=0", "--monitor_interval=0.2", "-m", DEMO_MODULE, "--out", str(out_dir),
            "--steps", str(steps), "--backend", backend]
    return cmd + list(extra_args or [])


def _check_int(name: str, value, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


# --------------------------------------------------------------------------- results


def load_ddp_results(out_dir: str | os.PathLike) -> tuple[list[dict], list[dict]]:
    """Read the files a finished demo run wrote: (one dict per rank, the reference steps of rank 0)."""
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a folder path (str or Path), got {type(out_dir).__name__}")
    out = Path(out_dir)
    files = sorted(out.glob("rank*.json"), key=lambda p: int(p.stem[4:]))
    if not files or not (out / "reference.json").exists():
        raise ValueError(f"{out} holds no finished DDP run (rank*.json and reference.json are missing)")
    ranks = [json.loads(p.read_text(encoding="utf-8")) for p in files]
    world = ranks[0]["world_size"]
    if [r["rank"] for r in ranks] != list(range(world)):
        raise ValueError(f"{out} holds results of ranks {[r['rank'] for r in ranks]}, expected 0..{world - 1}")
    reference = json.loads((out / "reference.json").read_text(encoding="utf-8"))["steps"]
    return ranks, reference


def _max_abs(a: list[float], b: list[float]) -> float:
    if len(a) != len(b):
        raise ValueError(f"cannot compare vectors of lengths {len(a)} and {len(b)}")
    return max((abs(x - y) for x, y in zip(a, b, strict=True)), default=0.0)


def _close(a: list[float], b: list[float], atol: float, rtol: float) -> bool:
    if len(a) != len(b):
        raise ValueError(f"cannot compare vectors of lengths {len(a)} and {len(b)}")
    return all(abs(x - y) <= atol + rtol * abs(y) for x, y in zip(a, b, strict=True))


@dataclass(frozen=True)
class DDPComparison:
    """Max absolute differences between ranks and against the single-process run."""

    world_size: int
    steps: int
    shard_sizes: tuple[int, ...]
    shards_disjoint: bool
    shards_cover_data: bool
    init_diff_before_ddp: float
    init_diff_after_ddp: float
    local_grad_diff_between_ranks: float
    mean_local_vs_allreduced: float
    grad_diff_between_ranks: float
    grad_diff_vs_single: float
    weight_diff_between_ranks: float
    weight_diff_vs_single: float
    grads_allclose: bool
    weights_allclose: bool
    atol: float
    rtol: float

    @property
    def ok(self) -> bool:
        """Return True when DDP did what it promises: same gradients/weights everywhere, equal to one process."""
        return (self.shards_disjoint and self.grad_diff_between_ranks == 0.0 and self.weight_diff_between_ranks == 0.0
                and self.init_diff_after_ddp == 0.0 and self.grads_allclose and self.weights_allclose)

    def rows(self) -> list[tuple[str, float]]:
        """Return (label, max abs difference) rows, for a table or a plot."""
        return [
            (tr("trọng số đầu, giữa các rank, trước DDP", "initial weights across ranks, before DDP"), self.init_diff_before_ddp),
            (tr("trọng số đầu, giữa các rank, sau DDP", "initial weights across ranks, after DDP"), self.init_diff_after_ddp),
            (tr("gradient cục bộ, giữa các rank", "local gradients across ranks"), self.local_grad_diff_between_ranks),
            (tr("gradient all-reduce, giữa các rank", "all-reduced gradients across ranks"), self.grad_diff_between_ranks),
            (tr("trung bình gradient cục bộ vs all-reduce", "mean of local gradients vs all-reduced"), self.mean_local_vs_allreduced),
            (tr("gradient all-reduce vs 1 tiến trình", "all-reduced gradient vs one process"), self.grad_diff_vs_single),
            (tr("trọng số sau các bước, giữa các rank", "weights after the steps, across ranks"), self.weight_diff_between_ranks),
            (tr("trọng số sau các bước vs 1 tiến trình", "weights after the steps vs one process"), self.weight_diff_vs_single),
        ]


def compare_ranks(ranks: list[dict], reference: list[dict], atol: float = 1e-6, rtol: float = 1e-5) -> DDPComparison:
    """Compare the ranks' shards, gradients and weights with each other and with the single-process steps.

    Args:
        ranks: One dict per rank, as written by the demo (``load_ddp_results``).
        reference: Rank 0's single-process steps (full-batch gradient and weights per step).
        atol: Absolute tolerance of the allclose checks.
        rtol: Relative tolerance of the allclose checks.

    Returns:
        A ``DDPComparison``.
    """
    if not isinstance(ranks, list) or not ranks or not all(isinstance(r, dict) for r in ranks):
        raise TypeError("ranks must be a non-empty list of per-rank dicts (see load_ddp_results)")
    if not isinstance(reference, list) or not all(isinstance(s, dict) for s in reference):
        raise TypeError("reference must be the list of rank 0's single-process step dicts (see load_ddp_results)")
    for name, tol in (("atol", atol), ("rtol", rtol)):
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol >= 0 or math.isinf(tol):
            raise ValueError(f"{name} must be a finite number >= 0, got {tol!r}")
    steps = len(reference)
    if steps == 0 or any(len(r["steps"]) != steps for r in ranks):
        raise ValueError(f"every rank and the reference must hold the same number (>0) of steps; "
                         f"reference has {steps}, ranks have {[len(r['steps']) for r in ranks]}")
    world = len(ranks)
    shards = [r["shard"] for r in ranks]
    all_indices = [i for s in shards for i in s]
    n_samples = ranks[0].get("n_samples", len(all_indices))

    def across(key_fn) -> float:
        first = ranks[0]
        return max((_max_abs(key_fn(first, k), key_fn(r, k)) for r in ranks[1:] for k in range(steps)), default=0.0)

    mean_local = []
    for k in range(steps):
        local = [r["steps"][k]["local_grad"] for r in ranks]
        mean_local.append([sum(v) / world for v in zip(*local, strict=True)])
    grads_close = all(_close(r["steps"][k]["grad"], reference[k]["grad"], atol, rtol) for r in ranks for k in range(steps))
    weights_close = all(_close(r["steps"][k]["weights"], reference[k]["weights"], atol, rtol)
                        for r in ranks for k in range(steps))
    return DDPComparison(
        world_size=world,
        steps=steps,
        shard_sizes=tuple(len(s) for s in shards),
        shards_disjoint=len(set(all_indices)) == len(all_indices),
        shards_cover_data=set(all_indices) == set(range(n_samples)),
        init_diff_before_ddp=max((_max_abs(ranks[0]["init_before_ddp"], r["init_before_ddp"]) for r in ranks[1:]), default=0.0),
        init_diff_after_ddp=max((_max_abs(ranks[0]["init_after_ddp"], r["init_after_ddp"]) for r in ranks[1:]), default=0.0),
        local_grad_diff_between_ranks=across(lambda r, k: r["steps"][k]["local_grad"]),
        mean_local_vs_allreduced=max(_max_abs(mean_local[k], r["steps"][k]["grad"]) for r in ranks for k in range(steps)),
        grad_diff_between_ranks=across(lambda r, k: r["steps"][k]["grad"]),
        grad_diff_vs_single=max(_max_abs(r["steps"][k]["grad"], reference[k]["grad"]) for r in ranks for k in range(steps)),
        weight_diff_between_ranks=across(lambda r, k: r["steps"][k]["weights"]),
        weight_diff_vs_single=max(_max_abs(r["steps"][k]["weights"], reference[k]["weights"])
                                  for r in ranks for k in range(steps)),
        grads_allclose=grads_close,
        weights_allclose=weights_close,
        atol=float(atol),
        rtol=float(rtol),
    )


def _fmt(x: float) -> str:
    return "0" if x == 0 else f"{x:.1e}"


def single_process_steps(data, model, ranks: list[dict], lr: float) -> list[dict]:
    """Redo the ranks' SGD steps in this process on the union of their batches: the full-batch reference.

    Args:
        data: The data set the ranks used (a ``TensorDataset`` of inputs and labels, same on every rank).
        model: A fresh instance of the ranks' model; its weights are set to the ranks' weights after DDP.
        ranks: One dict per rank (``DDPRun.ranks``), with ``init_after_ddp`` and per step its ``batch``.
        lr: The SGD learning rate of the ranks.

    Returns:
        One dict per step: the full batch, its loss, gradient and the weights after ``optimizer.step()``.
    """
    import torch
    from torch import nn

    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a fresh nn.Module like the ranks' model, got {type(model).__name__}")
    if not isinstance(ranks, list) or not ranks or not all(isinstance(r, dict) for r in ranks):
        raise TypeError("ranks must be the non-empty list of per-rank dicts of a finished run (run.ranks)")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
        raise ValueError(f"lr must be the ranks' positive learning rate, got {lr!r}")
    tensors = getattr(data, "tensors", None)
    if not isinstance(tensors, tuple) or len(tensors) != 2:
        raise TypeError(f"data must be a TensorDataset of (inputs, labels), got {type(data).__name__}")
    params = list(model.parameters())
    init = torch.tensor(ranks[0]["init_after_ddp"])
    if init.numel() != sum(p.numel() for p in params):
        raise ValueError(f"model has {sum(p.numel() for p in params)} parameters but the ranks' model has "
                         f"{init.numel()}: pass a fresh instance of the same model")
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(init.to(params[0].dtype), params)
    opt = torch.optim.SGD(params, lr=lr)
    steps = []
    for k in range(min(len(r["steps"]) for r in ranks)):
        batch = [i for r in ranks for i in r["steps"][k]["batch"]]
        x, y = tensors[0][batch], tensors[1][batch]
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        grad = [float(v) for p in params for v in p.grad.reshape(-1)]
        opt.step()
        steps.append({"step": k, "batch": batch, "loss": loss.item(), "grad": grad,
                      "weights": [float(v) for p in params for v in p.detach().reshape(-1)]})
    return steps


@dataclass
class DDPRun:
    """What one DDP run produced: per-rank records, the single-process reference, timing, and how it went.

    ``run_ddp_demo()`` fills everything (rank 0 of the demo computes the reference). ``launch()`` fills the
    ranks; ``compare_with_single_process()`` then adds the reference. A failed ``launch()`` returns a run
    with ``ok=False``, no ranks and the error: every method then says so instead of raising.
    """

    ranks: list[dict]
    reference: list[dict]
    wall_s: float
    command: list[str] | str
    output: str = ""
    comparison: DDPComparison | None = field(default=None)
    ok: bool = True
    error: DDPRunError | None = None
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.comparison is None and self.ranks and self.reference:
            self.comparison = compare_ranks(self.ranks, self.reference)

    @property
    def world_size(self) -> int:
        """Return the number of ranks that reported results."""
        return len(self.ranks)

    @property
    def backend(self) -> str | None:
        """Return the process-group backend the ranks used ("gloo" or "nccl"); None without results."""
        return self.ranks[0]["backend"] if self.ranks else None

    @property
    def shell_command(self) -> str:
        """Return the run's command as a learner would type it: ``torchrun --nproc_per_node=2 ...``."""
        cmd = self.command
        if isinstance(cmd, str):
            return cmd
        args = cmd[cmd.index("torch.distributed.run") + 1:] if "torch.distributed.run" in cmd else cmd
        return shlex.join(["torchrun", *args])

    def _no_results(self) -> str:
        why = str(self.error).splitlines()[0] if self.error else tr("chưa có kết quả", "no results yet")
        return tr(f"(Lượt chạy DDP không thành công nên không có kết quả để xem: {why})",
                  f"(The DDP run failed, so there are no results to show: {why})")

    def compare_with_single_process(self, data, model, lr: float) -> DDPComparison | None:
        """Compute the single-process full-batch reference (``single_process_steps``) and compare the ranks with it.

        Args:
            data: The ranks' data set (a ``TensorDataset``).
            model: A fresh instance of the ranks' model.
            lr: The ranks' SGD learning rate.

        Returns:
            The ``DDPComparison`` (also kept in ``self.comparison``), or None when the run has no results.
        """
        if not self.ranks:
            print(self._no_results())
            return None
        self.reference = single_process_steps(data, model, self.ranks, lr)
        self.comparison = compare_ranks(self.ranks, self.reference)
        return self.comparison

    def rank_table(self) -> str:
        """Return one line per rank: pid, device, shard size and the first samples of its shard."""
        if not self.ranks:
            return self._no_results()
        lines = []
        for r in self.ranks:
            head = ", ".join(str(i) for i in r["shard"][:8])
            lines.append(f"rank {r['rank']} (LOCAL_RANK {r['local_rank']}) · pid {r['pid']} · {r['device']} · "
                         + tr(f"{len(r['shard'])} mẫu: [{head}, …]", f"{len(r['shard'])} samples: [{head}, …]"))
        return "\n".join(lines)

    def summary(self) -> str:
        """Return a few sentences, built from the measured values, on what the run shows."""
        c = self.comparison
        if c is None:
            if not self.ranks:
                return self._no_results()
            return tr("(Chưa so với một tiến trình: gọi run.compare_with_single_process(data, model, lr) trước.)",
                      "(Not compared with one process yet: call run.compare_with_single_process(data, model, lr).)")
        ok = tr("✅ khớp", "✅ match") if c.grads_allclose else tr("❌ KHÔNG khớp", "❌ do NOT match")
        wok = tr("✅ khớp", "✅ match") if c.weights_allclose else tr("❌ KHÔNG khớp", "❌ do NOT match")
        shard_ok = tr("không trùng nhau" if c.shards_disjoint else "CÓ TRÙNG NHAU",
                      "disjoint" if c.shards_disjoint else "OVERLAPPING")
        return "\n".join([
            tr(f"{c.world_size} tiến trình, backend {self.backend}, {c.steps} bước, chạy hết {self.wall_s:.1f} s.",
               f"{c.world_size} processes, backend {self.backend}, {c.steps} steps, {self.wall_s:.1f} s in all."),
            tr(f"Phần dữ liệu của các rank: {list(c.shard_sizes)} mẫu, {shard_ok}.",
               f"Shards of the ranks: {list(c.shard_sizes)} samples, {shard_ok}."),
            tr(f"Trọng số đầu lệch {_fmt(c.init_diff_before_ddp)} trước DDP, {_fmt(c.init_diff_after_ddp)} sau DDP.",
               f"Initial weights differ by {_fmt(c.init_diff_before_ddp)} before DDP, {_fmt(c.init_diff_after_ddp)} after."),
            tr(f"Gradient cục bộ lệch nhau {_fmt(c.local_grad_diff_between_ranks)}; sau all-reduce lệch "
               f"{_fmt(c.grad_diff_between_ranks)} giữa các rank và {_fmt(c.grad_diff_vs_single)} so với 1 tiến trình "
               f"full-batch → {ok} (atol={c.atol:g}, rtol={c.rtol:g}).",
               f"Local gradients differ by {_fmt(c.local_grad_diff_between_ranks)}; after the all-reduce they differ by "
               f"{_fmt(c.grad_diff_between_ranks)} across ranks and {_fmt(c.grad_diff_vs_single)} from one full-batch "
               f"process → {ok} (atol={c.atol:g}, rtol={c.rtol:g})."),
            tr(f"Trọng số sau {c.steps} bước lệch {_fmt(c.weight_diff_between_ranks)} giữa các rank và "
               f"{_fmt(c.weight_diff_vs_single)} so với 1 tiến trình → {wok}.",
               f"Weights after {c.steps} steps differ by {_fmt(c.weight_diff_between_ranks)} across ranks and "
               f"{_fmt(c.weight_diff_vs_single)} from one process → {wok}."),
        ])

    def __str__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer, cycle) -> None:  # IPython display
        printer.text(self.summary())


# --------------------------------------------------------------------------- diagnosis


@dataclass
class _RankState:
    rank: int
    progress: int = 0
    last: str = ""
    done: bool = False
    error: str = ""
    error_time: float = float("inf")
    lines: list[str] = field(default_factory=list)

    @property
    def waiting(self) -> bool:
        """Return True when the rank's last line says it entered a collective (it waits for the others)."""
        return "(collective:" in self.last

    @property
    def peer_error(self) -> bool:
        """Return True when this rank's error only says that another rank went away."""
        return bool(self.error) and bool(_PEER_ERROR.search(self.error))


def rank_log(out_dir: str | os.PathLike, rank: int) -> str:
    """Return everything rank `rank` printed: its own ``rank{R}.log`` (the demo's), else torchrun's per-rank files.

    ``launch()`` runs torchrun with ``--log-dir=<run folder>/logs --redirects=3`` (Linux), which keeps each
    rank's stdout and stderr in ``logs/<run id>/attempt_<n>/<local rank>/{stdout,stderr}.log``.
    """
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a folder path (str or Path), got {type(out_dir).__name__}")
    _check_int("rank", rank, 0)
    own = Path(out_dir) / f"rank{rank}.log"
    if own.exists():
        return own.read_text(encoding="utf-8", errors="replace")
    parts = []
    for name in ("stdout.log", "stderr.log"):
        for path in sorted(Path(out_dir).glob(f"logs/*/attempt_*/{rank}/{name}")):
            parts.append(path.read_text(encoding="utf-8", errors="replace"))
    return "".join(p if p.endswith("\n") or not p else p + "\n" for p in parts)


def _rank_states(out_dir: Path, world_size: int) -> list[_RankState]:
    states = []
    for rank in range(world_size):
        state = _RankState(rank)
        state.lines = rank_log(out_dir, rank).splitlines()
        for i, line in enumerate(state.lines):
            m = _PROGRESS.match(line)
            if not m:
                continue
            state.progress, state.last = int(m.group(2)), m.group(4)
            state.done |= state.last == "done"
            if state.last == "ERROR" and not state.error:
                traceback_lines = []
                for x in state.lines[i + 1:]:
                    if x.startswith("[rank"):  # the next progress line or torchrun's copy of the traceback
                        break
                    if x.strip():
                        traceback_lines.append(x.strip())
                state.error = traceback_lines[-1] if traceback_lines else "ERROR"
                state.error_time = float(m.group(3))
        if not state.error:
            state.error = _python_error(state.lines)  # a script without progress lines: its traceback
        if not state.error:
            for line in reversed(state.lines):  # a C++ abort leaves no traceback but a message
                if "terminate called" in line or "what():" in line or "Fatal Python error" in line:
                    state.error = line.strip()
                    break
        if not state.last:
            state.last = next((x.strip() for x in reversed(state.lines) if x.strip()), "")
        states.append(state)
    return states


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)?: ")
_RANK_PREFIX = re.compile(r"^\[rank\d+\]: ?")  # torch prefixes a rank's uncaught traceback with "[rankN]: "


def _python_error(lines: list[str]) -> str:
    """Return the exception line of the first Python traceback in `lines` ("" when there is none)."""
    plain = [_RANK_PREFIX.sub("", x) for x in lines]
    for i, line in enumerate(plain):
        if line.startswith("Traceback (most recent call last):"):
            for x in plain[i + 1:]:
                if _EXCEPTION_LINE.match(x):
                    return x.strip()
    return ""


def _exitcodes(output: str) -> dict[int, int]:
    """Return {rank: exit code} from torchrun's failure summary."""
    codes = {}
    for m in re.finditer(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)", output):
        codes[int(m.group(1))] = int(m.group(2))
    return codes


def _root_cause(output: str) -> int | None:
    """Return the rank torchrun names under "Root Cause (first observed failure)", if any."""
    m = re.search(r"Root Cause.*?rank\s*:\s*(\d+)", output, re.S)
    return int(m.group(1)) if m else None


def _tail(lines: list[str], n: int = _LOG_TAIL_LINES) -> str:
    return "\n".join("    " + line for line in lines[-n:])


def _excerpt(state: _RankState) -> str:
    """Return the end of a rank's log: its last progress lines, then the last lines printed after them."""
    if not any(_PROGRESS.match(x) for x in state.lines):  # a script without progress lines: its own output
        return _tail([_RANK_PREFIX.sub("", x) for x in state.lines if x.strip()]) or "    " + tr("(log trống)", "(empty log)")
    own = [x for x in state.lines if not x.startswith(f"[rank{state.rank}]:")]  # torchrun's copy of the traceback
    progress = [i for i, x in enumerate(own) if _PROGRESS.match(x)]
    after = [x for x in own[progress[-1] + 1:] if x.strip()]
    return _tail([own[i] for i in progress[-5:]] + after[-5:], n=10)


def _culprit_of_death(states: list[_RankState], output: str) -> _RankState:
    codes, root = _exitcodes(output), _root_cause(output)

    def pick(candidates: list[_RankState]) -> _RankState:
        for s in candidates:
            if s.rank == root:
                return s
        return min(candidates, key=lambda s: (s.error_time, -codes.get(s.rank, 0), s.rank))

    own_errors = [s for s in states if s.error and not s.peer_error]
    if own_errors:
        return pick(own_errors)
    silent = [s for s in states if not s.error and not s.done]  # died without a word (os._exit, kill -9, OOM)
    exited = [s for s in silent if codes.get(s.rank, 0) > 0]
    if exited or silent:
        return pick(exited or silent)
    return pick([s for s in states if s.error] or states)


def _diagnose(out_dir: Path, world_size: int, output: str, timed_out: bool, timeout: float,
              returncode: int | None) -> DDPRunError:
    states = _rank_states(out_dir, world_size)
    started = [s for s in states if s.lines]
    if timed_out and not any(s.progress for s in states):  # no progress lines: who hung cannot be told
        ends = "\n".join(f"  rank {s.rank}:\n" + _excerpt(s) for s in states)
        return DDPRunError(
            tr(f"Lượt chạy DDP không xong trong {timeout:g} s nên đã bị dừng (mọi tiến trình đã bị kill). Không rank nào "
               "báo lỗi: các rank bị treo, thường vì một rank không tới một collective (barrier, all-reduce) mà các "
               "rank khác đang đợi. Cuối log của từng rank:\n",
               f"The DDP run did not finish within {timeout:g} s and was stopped (every process killed). No rank "
               "reported an error: the ranks hung, usually because one rank never reaches a collective (barrier, "
               "all-reduce) the others wait in. End of each rank's log:\n") + ends,
            rank=None, kind="timeout", log_tail=ends)
    if not started:
        return DDPRunError(
            tr(f"torchrun dừng (mã {returncode}) trước khi rank nào chạy. Cuối output của torchrun:\n",
               f"torchrun stopped (code {returncode}) before any rank ran. End of torchrun's output:\n")
            + _tail(output.splitlines()), rank=None, kind="timeout" if timed_out else "died",
            log_tail=_tail(output.splitlines()))
    if timed_out:
        unfinished = [s for s in states if not s.done] or states
        culprit = min([s for s in unfinished if not s.waiting] or unfinished, key=lambda s: (s.progress, s.rank))
        others = "; ".join(f"rank {s.rank}: '{s.last}'" for s in states if s is not culprit)
        return DDPRunError(
            tr(f"Lượt chạy DDP không xong trong {timeout:g} s nên đã bị dừng (mọi tiến trình đã bị kill). "
               f"Rank {culprit.rank} bị treo ở '{culprit.last}'. "
               f"Các rank khác chờ nó trong một collective ({others}). Cuối log của rank {culprit.rank}:\n",
               f"The DDP run did not finish within {timeout:g} s and was stopped (every process killed). "
               f"Rank {culprit.rank} hung at '{culprit.last}'. "
               f"The other ranks wait for it in a collective ({others}). End of rank {culprit.rank}'s log:\n")
            + _excerpt(culprit), rank=culprit.rank, kind="timeout", log_tail=_excerpt(culprit))
    culprit = _culprit_of_death(states, output)
    code = _exitcodes(output).get(culprit.rank)
    code_txt = f" (exit code {code})" if code is not None else ""
    reason = culprit.error or tr(f"thoát đột ngột, không có traceback, dòng log cuối: '{culprit.last}'",
                                 f"exited abruptly without a traceback, last log line: '{culprit.last}'")
    echoes = [s.rank for s in states if s is not culprit and s.peer_error]
    echo_txt = tr(f" Rank {', '.join(map(str, echoes))} cũng báo lỗi kết nối: đó chỉ là hậu quả.",
                  f" Rank(s) {', '.join(map(str, echoes))} also report a connection error: only a consequence.") if echoes else ""
    return DDPRunError(
        tr(f"Rank {culprit.rank} chết{code_txt}: {reason}. torchrun đã dừng các rank còn lại.{echo_txt} "
           f"Cuối log của rank {culprit.rank}:\n",
           f"Rank {culprit.rank} died{code_txt}: {reason}. torchrun stopped the other ranks.{echo_txt} "
           f"End of rank {culprit.rank}'s log:\n")
        + _excerpt(culprit), rank=culprit.rank, kind="died", log_tail=_excerpt(culprit))


# --------------------------------------------------------------------------- run


def run_ddp_demo(nproc_per_node: int = 2, steps: int = 3, backend: str = "auto", timeout: float = 120.0,
                 fail_rank: int | None = None, fail_mode: str = "raise", fail_step: int = 0,
                 out_dir: str | os.PathLike | None = None, unsafe_teardown: bool = False,
                 python_exit: bool = False) -> DDPRun:
    """Run the DDP demo with torchrun and return what every rank computed.

    Args:
        nproc_per_node: Number of ranks (processes) on this machine; with nccl, at most the GPU count.
        steps: Optimizer steps (1-4).
        backend: "auto" (nccl with one GPU per rank, else gloo), "gloo" or "nccl".
        timeout: Wall-clock limit in seconds; after it every process is killed and DDPRunError raised.
        fail_rank: Test hook: this rank fails on purpose (None: no failure).
        fail_mode: How `fail_rank` fails: "raise" (exception), "exit" (hard exit), "hang" (never returns).
        fail_step: When: at this step, between forward and backward; -1 = at start, before init_process_group.
        out_dir: Existing folder to keep the ranks' files in; None uses a temporary folder, deleted after.
        unsafe_teardown: Hazard hook for benchmarks: the ranks skip barrier and destroy_process_group.
        python_exit: Hazard hook for benchmarks: finished ranks end through normal interpreter shutdown
            instead of ``exit_rank()`` (the behaviour before issue 15's fix).

    Returns:
        A ``DDPRun``; ``run.comparison`` holds the checks, ``run.summary()`` says what they mean.

    Raises:
        DDPRunError: a rank died or hung (the message names it and shows the end of its log).
    """
    _check_int("nproc_per_node", nproc_per_node, 1)
    _check_int("steps", steps, 1)
    if steps > 4:
        raise ValueError(f"steps must be between 1 and 4 (each rank has 4 batches), got {steps}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if fail_rank is not None:
        _check_int("fail_rank", fail_rank, 0)
        if fail_rank >= nproc_per_node:
            raise ValueError(f"fail_rank must be a rank between 0 and {nproc_per_node - 1}, got {fail_rank}")
    if fail_mode not in FAIL_MODES:
        raise ValueError(f"fail_mode must be one of {FAIL_MODES}, got {fail_mode!r}")
    _check_int("fail_step", fail_step, -1)
    for name, flag in (("unsafe_teardown", unsafe_teardown), ("python_exit", python_exit)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {type(flag).__name__}")
    if fail_step >= steps:
        raise ValueError(f"fail_step must be -1 (at start) or a step between 0 and {steps - 1}, got {fail_step}")
    if out_dir is not None and not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"out_dir must be a folder path (str or Path) or None, got {type(out_dir).__name__}")
    if out_dir is not None and not Path(out_dir).is_dir():
        raise ValueError(f"out_dir must be an existing folder, got {str(out_dir)!r}")

    if out_dir is not None and any(Path(out_dir).iterdir()):
        raise ValueError(f"out_dir must be an empty folder (the ranks write their files there), got {str(out_dir)!r}")

    extra = []
    if fail_rank is not None:
        extra += ["--fail-rank", str(fail_rank), "--fail-mode", fail_mode, "--fail-step", str(fail_step)]
    if unsafe_teardown:
        extra += ["--unsafe-teardown"]
    if python_exit:
        extra += ["--exit", "python"]
    if out_dir is not None:
        return _launch(Path(out_dir).resolve(), nproc_per_node, steps, backend, timeout, extra)
    workdir = Path(tempfile.mkdtemp(prefix="lessons_ddp_"))
    try:
        return _launch(workdir, nproc_per_node, steps, backend, timeout, extra)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _worker_env(run_dir: Path) -> dict[str, str]:
    env = os.environ.copy()
    env["OMP_NUM_THREADS"] = "1"  # N processes on a few cores: one thread each
    env["PYTHONUNBUFFERED"] = "1"
    env[RUN_MARKER_ENV] = str(run_dir)  # every rank inherits it: find_processes() finds them by it
    package_parent = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", "")) if p)
    return env


def _run_torchrun(cmd: list[str], run_dir: Path, env: dict[str, str], timeout: float,
                  cwd: Path | None = None) -> tuple[bool, int | None, str]:
    """Run torchrun in a new session with a time limit; return (timed out, exit code, its output)."""
    log_path = run_dir / "torchrun.log"
    timed_out, returncode = False, None
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=cwd or run_dir, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = proc.wait(max(0.1, timeout))
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_tree(proc, run_dir)  # also on KeyboardInterrupt: nothing is left behind
    return timed_out, returncode, log_path.read_text(encoding="utf-8", errors="replace")


def _launch(run_dir: Path, nproc: int, steps: int, backend: str, timeout: float, extra: list[str]) -> DDPRun:
    env = _worker_env(run_dir)
    start = time.perf_counter()
    for attempt in range(_PORT_TRIES):
        cmd = torchrun_command(run_dir, nproc, free_port(), steps, backend, extra_args=extra)
        timed_out, returncode, output = _run_torchrun(cmd, run_dir, env, timeout - (time.perf_counter() - start))
        port_taken = re.search(r"EADDRINUSE|address already in use", output, re.I)
        if returncode and port_taken and not list(run_dir.glob("rank*.log")) and attempt + 1 < _PORT_TRIES:
            continue  # another program took the port between free_port() and torchrun: try another
        if timed_out or returncode != 0:
            raise _diagnose(run_dir, nproc, output, timed_out, timeout, returncode)
        try:
            ranks, reference = load_ddp_results(run_dir)
        except (ValueError, KeyError, json.JSONDecodeError) as exc:
            raise DDPRunError(tr(f"torchrun xong nhưng kết quả không đọc được: {exc}",
                                 f"torchrun finished but its results are unreadable: {exc}"),
                              kind="bad_output", log_tail=_tail(output.splitlines())) from exc
        return DDPRun(ranks=ranks, reference=reference, wall_s=time.perf_counter() - start, command=cmd, output=output)
    raise AssertionError("unreachable")  # pragma: no cover


# --------------------------------------------------------------------------- launch a learner's command


@dataclass(frozen=True)
class TorchrunCommand:
    """A ``torchrun ...`` command split the way torchrun itself parses it."""

    text: str
    launcher_args: tuple[str, ...]
    script: str
    script_args: tuple[str, ...]
    module: bool
    nproc_per_node: int


def parse_torchrun(command: str) -> TorchrunCommand:
    """Split ``torchrun [flags] script.py [args]`` with torchrun's own argument parser.

    Args:
        command: The command as typed in a terminal, starting with ``torchrun`` (or ``python -m torch.distributed.run``).

    Returns:
        A ``TorchrunCommand``.
    """
    import contextlib
    import io

    if not isinstance(command, str):
        raise TypeError(f"command must be a str such as 'torchrun --standalone --nproc_per_node=2 train.py', "
                        f"got {type(command).__name__}")
    tokens = shlex.split(command)
    if tokens[:1] == ["torchrun"]:
        rest = tokens[1:]
    elif len(tokens) >= 3 and tokens[1:3] == ["-m", "torch.distributed.run"]:
        rest = tokens[3:]
    else:
        raise ValueError(f"command must start with 'torchrun' (e.g. 'torchrun --standalone --nproc_per_node=2 "
                         f"train.py'), got {command!r}")
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(rest)
    except SystemExit:
        raise ValueError(f"torchrun cannot parse {command!r}: {err.getvalue().strip().splitlines()[-1:]}") from None
    n_script = len(args.training_script_args) + 1
    nproc = str(args.nproc_per_node)
    if nproc.isdigit():
        nproc_per_node = int(nproc)
    elif nproc == "gpu":
        import torch

        nproc_per_node = torch.cuda.device_count()
    else:
        nproc_per_node = os.cpu_count() or 1  # "auto"/"cpu": what torchrun picks without GPUs
    if nproc_per_node < 1:
        raise ValueError(f"--nproc_per_node must give at least one process, got {nproc!r}")
    return TorchrunCommand(text=command, launcher_args=tuple(rest[:-n_script]), script=rest[-n_script],
                           script_args=tuple(rest[len(rest) - n_script + 1:]), module=bool(args.module),
                           nproc_per_node=nproc_per_node)


def _has_flag(args: tuple[str, ...], *names: str) -> bool:
    return any(a == n or a.startswith(n + "=") for a in args for n in names)


def _launch_argv(parsed: TorchrunCommand, run_dir: Path, cwd: Path, python: str) -> list[str]:
    """Return the argv that runs `parsed` with the course's additions (own log folder, no restarts)."""
    extra = [f"--log-dir={run_dir / 'logs'}", "--redirects=3"]
    if not _has_flag(parsed.launcher_args, "--max-restarts", "--max_restarts"):
        extra.append("--max-restarts=0")
    if not _has_flag(parsed.launcher_args, "--monitor-interval", "--monitor_interval"):
        extra.append("--monitor-interval=0.2")
    script = parsed.script if parsed.module else str((cwd / parsed.script).resolve())
    return [python, "-m", "torch.distributed.run", *parsed.launcher_args, *extra, script, *parsed.script_args]


def launch(command: str, cwd: str | os.PathLike | None = None, timeout: float = 120.0, backend: str = "auto",
           check: bool = False, echo: bool = True) -> DDPRun:
    """Run a torchrun command (as a learner types it) safely; return the ranks' ``rank*.json`` results.

    The command runs as ``python -m torch.distributed.run`` of this Python, in a fresh temporary folder
    (where the ranks write their results; the script path is taken relative to `cwd`), in a new session,
    with a wall-clock limit, its own log folder and no restarts. Whatever happens, no process of it is
    left when this returns. When NCCL was chosen (a GPU per rank, or ``backend="nccl"``) and that run fails
    or hangs (Kaggle's T4 x2 have never run it here), it runs once more with gloo (``DDP_BACKEND=gloo``)
    and says so.

    Args:
        command: ``torchrun [flags] script.py [args]``, e.g. ``"torchrun --standalone --nproc_per_node=2 train_ddp.py"``.
        cwd: Folder the script path is relative to (default: the current folder).
        timeout: Wall-clock limit in seconds for one attempt (an NCCL attempt gets at most 60 s).
        backend: "auto" (the script decides), or "gloo"/"nccl" to force it through $DDP_BACKEND.
        check: Raise ``DDPRunError`` on failure instead of printing it and returning a run with ``ok=False``.
        echo: Print the command before running it, and what went wrong after (False: stay silent).

    Returns:
        A ``DDPRun`` with ``ranks`` (the parsed ``rank*.json`` files, sorted by rank), ``ok`` and ``error``.
    """
    parsed = parse_torchrun(command)
    if cwd is not None and not isinstance(cwd, (str, os.PathLike)):
        raise TypeError(f"cwd must be a folder path (str or Path) or None, got {type(cwd).__name__}")
    folder = Path(cwd) if cwd is not None else Path.cwd()
    if not folder.is_dir():
        raise ValueError(f"cwd must be an existing folder, got {str(folder)!r}")
    if not parsed.module and not (folder / parsed.script).is_file():
        raise ValueError(f"no script {parsed.script!r} in {str(folder)!r}: write it first (e.g. with %%writefile)")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if echo:
        print(f"$ {command}")
        print(tr(f"  (chạy bằng {Path(sys.executable).name} -m torch.distributed.run, trong một thư mục tạm, "
                 f"giới hạn {timeout:g} s)",
                 f"  (run as {Path(sys.executable).name} -m torch.distributed.run, in a temporary folder, "
                 f"limit {timeout:g} s)"))
    import torch

    nccl_first = backend == "nccl" or (backend == "auto" and torch.cuda.is_available()
                                       and torch.cuda.device_count() >= parsed.nproc_per_node)
    notes: list[str] = []
    start = time.perf_counter()
    run = _launch_once(parsed, folder, backend, min(timeout, 60.0) if nccl_first else timeout, start)
    if not run.ok and nccl_first:  # NCCL fails in many ways (init error, CUDA error, hang): gloo may still work
        first = str(run.error).splitlines()[0]
        notes.append(tr(f"Lượt chạy với NCCL không thành công ({first}). Chạy lại bằng gloo (DDP_BACKEND=gloo): "
                        "vẫn là DDP, chỉ khác là all-reduce đi qua CPU thay vì giữa các GPU.",
                        f"The run with NCCL failed ({first}). Running it again with gloo (DDP_BACKEND=gloo): "
                        "still DDP, only the all-reduce goes through the CPU instead of between the GPUs."))
        if echo:
            print("⚠️ " + notes[-1])
        run = _launch_once(parsed, folder, "gloo", timeout, start)
    run.notes = notes + run.notes
    if not run.ok:
        if check:
            raise run.error
        if echo:
            print("❌ DDP: " + str(run.error), file=sys.stderr)
    return run


def _launch_once(parsed: TorchrunCommand, folder: Path, backend: str, timeout: float, start: float) -> DDPRun:
    run_dir = Path(tempfile.mkdtemp(prefix="lessons_ddp_"))
    try:
        env = _worker_env(run_dir)
        if backend != "auto":
            env[BACKEND_ENV] = backend
        cmd = _launch_argv(parsed, run_dir, folder, sys.executable)
        timed_out, returncode, output = _run_torchrun(cmd, run_dir, env, timeout)
        wall = time.perf_counter() - start
        if timed_out or returncode != 0:
            error = _diagnose(run_dir, parsed.nproc_per_node, output, timed_out, timeout, returncode)
            logs = "\n".join(rank_log(run_dir, r) for r in range(parsed.nproc_per_node))
            return DDPRun(ranks=[], reference=[], wall_s=wall, command=parsed.text, output=output + "\n" + logs,
                          ok=False, error=error)
        files = sorted(run_dir.glob("rank*.json"), key=lambda p: int(p.stem[4:]) if p.stem[4:].isdigit() else -1)
        try:
            ranks = [json.loads(p.read_text(encoding="utf-8")) for p in files]
        except (OSError, json.JSONDecodeError) as exc:
            error = DDPRunError(tr(f"torchrun xong nhưng kết quả không đọc được: {exc}",
                                   f"torchrun finished but its results are unreadable: {exc}"),
                                kind="bad_output", log_tail=_tail(output.splitlines()))
            return DDPRun(ranks=[], reference=[], wall_s=wall, command=parsed.text, output=output, ok=False, error=error)
        return DDPRun(ranks=ranks, reference=[], wall_s=wall, command=parsed.text, output=output)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)

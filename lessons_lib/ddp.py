"""Run a learner's ``torchrun`` command from a notebook with a time limit, and check what its ranks recorded.

``launch()`` leaves no process behind (a rank that dies or hangs, Ctrl-C), falls back to gloo when NCCL fails,
and returns a ``DDPRun`` (``ok=False`` and a ``DDPRunError`` naming the rank at fault when the run failed).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ._validate import check_number

_BACKEND_ENV = "DDP_BACKEND"  # read by lessons_lib.ddp_worker.choose_backend() in the ranks
_RUN_MARKER_ENV = "LESSONS_DDP_RUN"  # the run folder, inherited by every process of a run
# Errors a rank reports only because a peer died or hung (a consequence, not the cause).
_PEER_ERROR = re.compile(r"closed by peer|reset by peer|remote worker|Broken pipe|timed out|"
                         r"Connection refused|communicator was aborted", re.I)
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)?: ")
_RANK_PREFIX = re.compile(r"^\[rank\d+\]: ?")  # torch prefixes a rank's uncaught traceback with "[rankN]: "


class DDPRunError(RuntimeError):
    """A DDP run failed or hung: ``rank`` at fault (None if unknown), ``kind``, and the end of its log."""

    def __init__(self, message: str, rank: int | None = None, kind: str = "died", log_tail: str = ""):
        super().__init__(message)
        self.rank, self.kind, self.log_tail = rank, kind, log_tail  # kind: "died", "timeout" or "leftover"


def _cmdline(pid: int) -> str | None:
    """Return the command line of a live (non-zombie) process, or None if it is gone."""
    proc = Path(f"/proc/{pid}")
    if Path("/proc/self").exists():
        try:
            if (proc / "stat").read_text().rsplit(")", 1)[-1].split()[0] in ("Z", "X"):
                return None
            return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            return None
    try:  # macOS and other systems without /proc
        out = subprocess.run(["ps", "-o", "stat=,command=", "-p", str(pid)], capture_output=True, text=True)
    except OSError:
        return None
    line = out.stdout.strip()
    return None if not line or line.startswith("Z") else line.split(None, 1)[-1]


def _environ_has(pid: int, marker: bytes) -> bool:
    """Return True when the environment of process `pid` contains `marker` (Linux only)."""
    try:
        return marker in Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


def find_processes(marker: str) -> list[int]:
    """Return the pids of live processes whose command line (or, on Linux, environment) contains `marker`."""
    if Path("/proc/self").exists():
        pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    else:
        pids = [int(x) for x in subprocess.run(["ps", "-axo", "pid="], capture_output=True, text=True).stdout.split()]
    found = []
    for pid in pids:
        cmd = None if pid == os.getpid() else _cmdline(pid)
        if cmd is not None and (marker in cmd or _environ_has(pid, marker.encode())):
            found.append(pid)
    return sorted(found)


def _signal_group(pid: int, sig: int) -> None:
    """Send `sig` to the process group led by `pid` (to the process alone where groups do not exist)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if hasattr(os, "killpg"):
            os.killpg(pid, sig)
        else:  # pragma: no cover - Windows
            os.kill(pid, sig)


def _kill_tree(proc: subprocess.Popen, run_dir: Path, grace: float = 5.0) -> None:
    """Stop torchrun and every rank; return when none of them is left."""
    kill = getattr(signal, "SIGKILL", signal.SIGTERM)
    if proc.poll() is None:
        _signal_group(proc.pid, signal.SIGTERM)  # SIGTERM first: torchrun then stops its workers itself
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, kill)
            proc.wait()
    # torchrun starts the ranks in sessions of their own, so a killpg of torchrun's group does not reach
    # them: find them by the run folder in their environment and kill their groups.
    deadline = time.monotonic() + grace
    while left := find_processes(str(run_dir)):
        for pid in left:
            _signal_group(pid, kill)  # a rank that leads its own group: it and anything it started
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, kill)  # a rank that does not lead a group (older torchrun)
        if time.monotonic() > deadline:
            raise DDPRunError(f"Không dừng được các tiến trình {left} của lượt chạy DDP.", kind="leftover")
        time.sleep(0.05)


@dataclass(frozen=True)
class _Torchrun:
    """A ``torchrun ...`` command split the way torchrun itself parses it."""

    launcher_args: tuple[str, ...]
    script: str
    script_args: tuple[str, ...]
    nproc_per_node: int


def _parse_torchrun(command: str) -> _Torchrun:
    """Split ``torchrun [flags] script.py [args]`` with torchrun's own argument parser."""
    example = "ví dụ 'torchrun --standalone --nproc_per_node=2 train.py'"
    if not isinstance(command, str):
        raise TypeError(f"command phải là một chuỗi (str), {example}, không phải {type(command).__name__}")
    tokens = shlex.split(command)
    if tokens[:1] != ["torchrun"]:
        raise ValueError(f"command phải bắt đầu bằng 'torchrun' ({example}), nhận được {command!r}")
    rest = tokens[1:]
    from torch.distributed.run import determine_local_world_size, get_args_parser

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = get_args_parser().parse_args(rest)
    except SystemExit:
        raise ValueError(f"torchrun không hiểu lệnh {command!r}: {err.getvalue().strip().splitlines()[-1:]}") from None
    n_script, nproc = len(args.training_script_args) + 1, str(args.nproc_per_node)
    try:
        nproc_per_node = determine_local_world_size(nproc)  # as torchrun counts "gpu", "cpu", "auto"
    except ValueError:
        nproc_per_node = 0
    if nproc_per_node < 1:
        raise ValueError(f"--nproc_per_node phải cho ít nhất một tiến trình, nhận được {nproc!r}")
    return _Torchrun(tuple(rest[:-n_script]), rest[-n_script], tuple(rest[len(rest) - n_script + 1:]), nproc_per_node)


def _launch_argv(parsed: _Torchrun, run_dir: Path, cwd: Path, python: str) -> list[str]:
    """Return the argv that runs `parsed` with the course's additions (own log folder, no restarts)."""
    given = {a.split("=")[0].replace("_", "-") for a in parsed.launcher_args}
    # --log-dir keeps torchrun's files in the run folder: without it each run leaves a folder in /tmp.
    extra = [f"--log-dir={run_dir / 'logs'}", "--redirects=3"]
    extra += [f"--{k}={v}" for k, v in (("max-restarts", 0), ("monitor-interval", 0.2)) if f"--{k}" not in given]
    script = str((cwd / parsed.script).resolve())
    return [python, "-m", "torch.distributed.run", *parsed.launcher_args, *extra, script, *parsed.script_args]


def launch(command: str, cwd: str | os.PathLike | None = None, timeout: float = 120.0,
           echo: bool = True) -> DDPRun:
    """Run ``torchrun [flags] script.py [args]`` (script in `cwd`, `timeout` s per try) and return a ``DDPRun``."""
    parsed = _parse_torchrun(command)
    if cwd is not None and not isinstance(cwd, (str, os.PathLike)):
        raise TypeError(f"cwd phải là đường dẫn thư mục (str hoặc Path) hoặc None, không phải {type(cwd).__name__}")
    folder = Path(cwd) if cwd is not None else Path.cwd()
    if not folder.is_dir():
        raise ValueError(f"cwd phải là một thư mục có sẵn, nhận được {str(folder)!r}")
    if not (folder / parsed.script).is_file():
        raise ValueError(f"không có script {parsed.script!r} trong {str(folder)!r}: hãy ghi nó ra trước "
                         f"(ví dụ bằng %%writefile)")
    check_number("timeout", timeout, positive=True)
    if echo:
        print(f"$ {command}")
        print(f"  (chạy bằng {Path(sys.executable).name} -m torch.distributed.run, trong một thư mục tạm, "
              f"giới hạn {timeout:g} s)")
    import torch

    nccl_first = torch.cuda.is_available() and torch.cuda.device_count() >= parsed.nproc_per_node
    if echo and nccl_first:
        print(f"  (NCCL, mỗi rank một GPU; nếu NCCL lỗi hoặc treo quá {timeout:g} s, chạy lại bằng gloo)")
    notes: list[str] = []
    start = time.perf_counter()
    run = _launch_once(command, parsed, folder, "auto", timeout, start)  # the script's choose_backend() decides
    if not run.ok and nccl_first:  # NCCL fails in many ways (init error, CUDA error, hang): gloo may still work
        first = str(run.error).splitlines()[0]
        notes.append(f"Lượt chạy với NCCL không thành công ({first}). Chạy lại bằng gloo (DDP_BACKEND=gloo): "
                     "vẫn là DDP, chỉ khác là all-reduce đi qua CPU thay vì giữa các GPU.")
        if echo:
            print("⚠️ " + notes[-1])
        run = _launch_once(command, parsed, folder, "gloo", timeout, start)
    run.notes = notes + run.notes
    if not run.ok and echo:
        print("❌ DDP: " + str(run.error), file=sys.stderr)
    return run


def _launch_once(command: str, parsed: _Torchrun, folder: Path, backend: str, timeout: float,
                 start: float) -> DDPRun:
    with tempfile.TemporaryDirectory(prefix="lessons_ddp_", ignore_cleanup_errors=True) as folder_name:
        run_dir = Path(folder_name)
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")  # N processes on a few cores
        env[_RUN_MARKER_ENV] = str(run_dir)  # every rank inherits it: find_processes() finds them by it
        package_parent = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", "")) if p)
        if backend != "auto":
            env[_BACKEND_ENV] = backend
        timed_out, returncode = False, None
        with open(run_dir / "torchrun.log", "wb") as log:
            proc = subprocess.Popen(_launch_argv(parsed, run_dir, folder, sys.executable), cwd=run_dir, env=env,
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                returncode = proc.wait(max(0.1, timeout))
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_tree(proc, run_dir)  # also on KeyboardInterrupt: nothing is left behind
        output = (run_dir / "torchrun.log").read_text(encoding="utf-8", errors="replace")
        wall = time.perf_counter() - start
        if timed_out or returncode != 0:
            error = _diagnose(run_dir, parsed.nproc_per_node, output, timed_out, timeout, returncode)
            logs = "\n".join(_rank_log(run_dir, r) for r in range(parsed.nproc_per_node))
            return DDPRun(command, wall_s=wall, output=output + "\n" + logs, ok=False, error=error)
        # RankRecorder.save writes each file atomically: a file that is there is whole
        files = sorted(run_dir.glob("rank*.json"), key=lambda p: int(p.stem[4:]) if p.stem[4:].isdigit() else -1)
        ranks = [json.loads(p.read_text(encoding="utf-8")) for p in files]
        return DDPRun(command, ranks=ranks, wall_s=wall, output=output)


def _rank_log(run_dir: Path, rank: int) -> str:
    """Return what rank `rank` printed: torchrun's ``logs/<id>/attempt_<n>/<rank>/{stdout,stderr}.log``."""
    parts = [path.read_text(encoding="utf-8", errors="replace")
             for name in ("stdout.log", "stderr.log")
             for path in sorted(run_dir.glob(f"logs/*/attempt_*/{rank}/{name}"))]
    return "".join(p if p.endswith("\n") or not p else p + "\n" for p in parts)


class _RankState(NamedTuple):
    rank: int
    lines: list[str]
    error: str  # the rank's own error line ("" when it printed none)
    peer_error: bool  # its error only says that another rank went away


def _rank_state(run_dir: Path, rank: int) -> _RankState:
    lines = _rank_log(run_dir, rank).splitlines()
    plain = [_RANK_PREFIX.sub("", x) for x in lines]
    traceback = "Traceback (most recent call last):"  # the exception line of its first Python traceback
    after = plain[plain.index(traceback) + 1:] if traceback in plain else []
    error = (next((x.strip() for x in after if _EXCEPTION_LINE.match(x)), "")
             or next((x.strip() for x in reversed(lines)  # a C++ abort leaves no traceback but a message
                      if "terminate called" in x or "what():" in x or "Fatal Python error" in x), ""))
    return _RankState(rank, lines, error, bool(_PEER_ERROR.search(error)))


def _tail(lines: list[str], n: int = 12) -> str:
    return "\n".join(["    " + _RANK_PREFIX.sub("", line) for line in lines if line.strip()][-n:]) or "    (log trống)"


def _culprit(states: list[_RankState], codes: dict[int, int], output: str) -> _RankState:
    """Return the rank that failed first: torchrun's root cause among the likely ones, else the highest exit code."""
    m = re.search(r"Root Cause.*?rank\s*:\s*(\d+)", output, re.S)
    own_errors = [s for s in states if s.error and not s.peer_error]
    silent = [s for s in states if not s.error]  # died without a word (os._exit, kill -9, OOM)
    candidates = own_errors or [s for s in silent if codes.get(s.rank, 0) > 0] or silent or states
    return next((s for s in candidates if m and s.rank == int(m.group(1))),
                min(candidates, key=lambda s: (-codes.get(s.rank, 0), s.rank)))


def _diagnose(run_dir: Path, world_size: int, output: str, timed_out: bool, timeout: float,
              returncode: int | None) -> DDPRunError:
    """Return the error that says what went wrong: which rank died first and why, or that the run hung."""
    states = [_rank_state(run_dir, rank) for rank in range(world_size)]
    if timed_out:  # a hung rank prints nothing: which one hung cannot be told
        ends = "\n".join(f"  rank {s.rank}:\n" + _tail(s.lines) for s in states)
        return DDPRunError(
            f"Lượt chạy DDP không xong trong {timeout:g} s nên đã bị dừng (mọi tiến trình đã bị kill). Không rank nào "
            "báo lỗi: các rank bị treo, thường vì một rank không tới một collective (barrier, all-reduce) mà các "
            "rank khác đang đợi. Cuối log của từng rank:\n" + ends, kind="timeout", log_tail=ends)
    if not any(s.lines for s in states):
        tail = _tail(output.splitlines())
        return DDPRunError(f"torchrun dừng (mã {returncode}) trước khi rank nào chạy. Cuối output của torchrun:\n"
                           + tail, log_tail=tail)
    summary = re.finditer(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)", output)
    codes = {int(m.group(1)): int(m.group(2)) for m in summary}  # torchrun's failure summary
    culprit = _culprit(states, codes, output)
    code_txt = f" (exit code {codes[culprit.rank]})" if culprit.rank in codes else ""
    last = next((x.strip() for x in reversed(culprit.lines) if x.strip()), "")
    reason = culprit.error or f"thoát đột ngột, không có traceback, dòng log cuối: '{last}'"
    echoes = [str(s.rank) for s in states if s is not culprit and s.peer_error]
    echo_txt = f" Rank {', '.join(echoes)} cũng báo lỗi kết nối: đó chỉ là hậu quả." if echoes else ""
    excerpt = _tail(culprit.lines)
    return DDPRunError(f"Rank {culprit.rank} chết{code_txt}: {reason}. torchrun đã dừng các rank còn lại.{echo_txt} "
                       f"Cuối log của rank {culprit.rank}:\n" + excerpt, rank=culprit.rank, log_tail=excerpt)


def _max_abs(a: list[float], b: list[float]) -> float:
    return max((abs(x - y) for x, y in zip(a, b, strict=True)), default=0.0)


def _close(a: list[float], b: list[float], atol: float, rtol: float) -> bool:
    return all(abs(x - y) <= atol + rtol * abs(y) for x, y in zip(a, b, strict=True))


def _fmt(x: float) -> str:
    return "0" if x == 0 else f"{x:.1e}"


@dataclass(frozen=True)
class DDPComparison:
    """Max absolute differences between the ranks, and against one process on their joint batches."""

    world_size: int
    steps: int
    shard_sizes: tuple[int, ...]
    shards_disjoint: bool
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
        """Return True when the ranks agree bit for bit and match one process."""
        return (self.shards_disjoint and self.grad_diff_between_ranks == 0.0 and self.weight_diff_between_ranks == 0.0
                and self.init_diff_after_ddp == 0.0 and self.grads_allclose and self.weights_allclose)

    def rows(self) -> list[tuple[str, float]]:
        """Return (label, max abs difference) rows, for a plot."""
        return [
            ("trọng số đầu, giữa các rank, trước DDP", self.init_diff_before_ddp),
            ("trọng số đầu, giữa các rank, sau DDP", self.init_diff_after_ddp),
            ("gradient cục bộ, giữa các rank", self.local_grad_diff_between_ranks),
            ("gradient all-reduce, giữa các rank", self.grad_diff_between_ranks),
            ("trung bình gradient cục bộ vs all-reduce", self.mean_local_vs_allreduced),
            ("gradient all-reduce vs 1 tiến trình", self.grad_diff_vs_single),
            ("trọng số sau các bước, giữa các rank", self.weight_diff_between_ranks),
            ("trọng số sau các bước vs 1 tiến trình", self.weight_diff_vs_single),
        ]


def _compare_ranks(ranks: list[dict], reference: list[dict], atol: float = 1e-6, rtol: float = 1e-5) -> DDPComparison:
    """Compare the ranks' shards, gradients and weights with each other and with the single-process steps."""
    steps, world = len(reference), len(ranks)
    idx = [(r, k) for r in ranks for k in range(steps)]
    all_indices = [i for r in ranks for i in r["shard"]]

    def across(get) -> float:
        return max((_max_abs(get(ranks[0], k), get(r, k)) for r, k in idx if r is not ranks[0]), default=0.0)

    def step(key):
        return lambda r, k: r["steps"][k][key]

    mean_local = [[sum(v) / world for v in zip(*(r["steps"][k]["local_grad"] for r in ranks), strict=True)]
                  for k in range(steps)]
    return DDPComparison(
        world_size=world, steps=steps, shard_sizes=tuple(len(r["shard"]) for r in ranks),
        shards_disjoint=len(set(all_indices)) == len(all_indices),
        init_diff_before_ddp=across(lambda r, k: r["init_before_ddp"]),
        init_diff_after_ddp=across(lambda r, k: r["init_after_ddp"]),
        local_grad_diff_between_ranks=across(step("local_grad")),
        mean_local_vs_allreduced=max(_max_abs(mean_local[k], r["steps"][k]["grad"]) for r, k in idx),
        grad_diff_between_ranks=across(step("grad")),
        grad_diff_vs_single=max(_max_abs(r["steps"][k]["grad"], reference[k]["grad"]) for r, k in idx),
        weight_diff_between_ranks=across(step("weights")),
        weight_diff_vs_single=max(_max_abs(r["steps"][k]["weights"], reference[k]["weights"]) for r, k in idx),
        grads_allclose=all(_close(r["steps"][k]["grad"], reference[k]["grad"], atol, rtol) for r, k in idx),
        weights_allclose=all(_close(r["steps"][k]["weights"], reference[k]["weights"], atol, rtol) for r, k in idx),
        atol=atol, rtol=rtol)


def _single_process_steps(data, model, ranks: list[dict], lr: float) -> list[dict]:
    """Redo the ranks' SGD steps in this process on the union of their batches: the full-batch reference."""
    import torch
    from torch import nn

    params = list(model.parameters())
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(torch.tensor(ranks[0]["init_after_ddp"]).to(params[0].dtype), params)
    opt = torch.optim.SGD(params, lr=lr)
    steps = []
    for k in range(min(len(r["steps"]) for r in ranks)):
        batch = [i for r in ranks for i in r["steps"][k]["batch"]]
        opt.zero_grad()
        nn.functional.cross_entropy(model(data.tensors[0][batch]), data.tensors[1][batch]).backward()
        grad = torch.cat([p.grad.reshape(-1) for p in params]).tolist()
        opt.step()
        steps.append({"grad": grad, "weights": torch.cat([p.detach().reshape(-1) for p in params]).tolist()})
    return steps


@dataclass
class DDPRun:
    """What one ``launch()`` produced; a failed run has ``ok=False``, no ranks, the ``error``, and says so."""

    command: str
    ranks: list[dict] = field(default_factory=list)
    wall_s: float = 0.0
    output: str = ""
    ok: bool = True
    error: DDPRunError | None = None
    notes: list[str] = field(default_factory=list)
    comparison: DDPComparison | None = None

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def backend(self) -> str | None:
        return self.ranks[0]["backend"] if self.ranks else None

    def _no_results(self) -> str:
        why = str(self.error).splitlines()[0] if self.error else "chưa có kết quả"
        return f"(Lượt chạy DDP không thành công nên không có kết quả để xem: {why})"

    def compare_with_single_process(self, data, model, lr: float) -> DDPComparison | None:
        """Redo the ranks' SGD steps on their joint batches with a fresh `model`; keep and return the comparison."""
        if not self.ranks:
            print(self._no_results())
            return None
        from torch import nn

        if not isinstance(model, nn.Module):
            raise TypeError(f"model phải là một nn.Module mới, giống mô hình của các rank, "
                            f"không phải {type(model).__name__}")
        tensors = getattr(data, "tensors", None)
        if not isinstance(tensors, tuple) or len(tensors) != 2:
            raise TypeError(f"data phải là TensorDataset (inputs, labels) mà các rank dùng, "
                            f"không phải {type(data).__name__}")
        check_number("lr", lr, positive=True)
        if not all(r["steps"] for r in self.ranks):
            raise ValueError("các rank chưa ghi bước nào: gọi rec.step(x, local, ddp) sau mỗi opt.step()")
        n_params, n_ranks = sum(p.numel() for p in model.parameters()), len(self.ranks[0]["init_after_ddp"])
        if n_params != n_ranks:
            raise ValueError(f"model có {n_params} tham số nhưng mô hình của các rank có {n_ranks}: "
                             "hãy truyền một bản mới của đúng mô hình đó")
        reference = _single_process_steps(data, model, self.ranks, lr)
        self.comparison = _compare_ranks(self.ranks, reference)
        return self.comparison

    def rank_table(self) -> str:
        """Return one line per rank: pid, device, shard size and the first samples of its shard."""
        if not self.ranks:
            return self._no_results()
        return "\n".join(f"rank {r['rank']} (LOCAL_RANK {r['local_rank']}) · pid {r['pid']} · {r['device']} · "
                         f"{len(r['shard'])} mẫu: [{', '.join(str(i) for i in r['shard'][:8])}, …]"
                         for r in self.ranks)

    def summary(self) -> str:
        """Return a few sentences, built from the measured values, on what the run shows."""
        c = self.comparison
        if c is None:
            if not self.ranks:
                return self._no_results()
            return "(Chưa so với một tiến trình: gọi run.compare_with_single_process(data, model, lr) trước.)"
        ok = "✅ khớp" if c.grads_allclose else "❌ KHÔNG khớp"
        wok = "✅ khớp" if c.weights_allclose else "❌ KHÔNG khớp"
        shard_ok = "không trùng nhau" if c.shards_disjoint else "CÓ TRÙNG NHAU"
        return "\n".join([
            f"{c.world_size} tiến trình, backend {self.backend}, {c.steps} bước, chạy hết {self.wall_s:.1f} s.",
            f"Phần dữ liệu của các rank: {list(c.shard_sizes)} mẫu, {shard_ok}.",
            f"Trọng số đầu lệch {_fmt(c.init_diff_before_ddp)} trước DDP, {_fmt(c.init_diff_after_ddp)} sau DDP.",
            f"Gradient cục bộ lệch nhau {_fmt(c.local_grad_diff_between_ranks)}; sau all-reduce lệch "
            f"{_fmt(c.grad_diff_between_ranks)} giữa các rank và {_fmt(c.grad_diff_vs_single)} so với 1 tiến trình "
            f"full-batch → {ok} (atol={c.atol:g}, rtol={c.rtol:g}).",
            f"Trọng số sau {c.steps} bước lệch {_fmt(c.weight_diff_between_ranks)} giữa các rank và "
            f"{_fmt(c.weight_diff_vs_single)} so với 1 tiến trình → {wok}.",
        ])

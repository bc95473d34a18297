"""Run DDP with torchrun from a notebook, safely: a learner's command (``launch``) or the course's demo (``run_ddp_demo``).

Both start ``python -m torch.distributed.run`` in a new session with a wall-clock limit. Whatever happens
(success, a rank that dies, a rank that hangs, Ctrl-C in the notebook) every process they started is gone
when they return. ``launch("torchrun --standalone --nproc_per_node=2 train_ddp.py", cwd=work)`` runs the
script notebook 08 writes, falls back to gloo when NCCL fails, and returns a ``DDPRun`` (``ok=False`` and the
error when it failed). ``run_ddp_demo()`` runs the instrumented ``lessons_lib.ddp_demo`` (with failure hooks
for the tests) and raises ``DDPRunError`` naming the rank at fault. Results and checks live in
``lessons_lib.ddp_results``, the diagnosis of failures in ``lessons_lib.ddp_diagnosis``; both are re-exported here.
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
from dataclasses import dataclass
from pathlib import Path

from .ddp_diagnosis import DDPRunError, _diagnose, _tail, rank_log
from .ddp_results import (
    DDPComparison,
    DDPRun,
    compare_ranks,
    load_ddp_results,
    single_process_steps,
)
from .i18n import tr

__all__ = [
    "BACKENDS", "DDPComparison", "DDPRun", "DDPRunError", "TorchrunCommand", "compare_ranks", "find_processes",
    "free_port", "launch", "load_ddp_results", "parse_torchrun", "rank_log", "run_ddp_demo", "single_process_steps",
    "torchrun_command",
]

DEMO_MODULE = "lessons_lib.ddp_demo"
FAIL_MODES = ("raise", "exit", "hang")
BACKENDS = ("auto", "gloo", "nccl")
BACKEND_ENV = "DDP_BACKEND"  # read by lessons_lib.ddp_worker.choose_backend() in the ranks
RUN_MARKER_ENV = "LESSONS_DDP_RUN"  # the run folder, inherited by every process of a run
_PORT_TRIES = 3


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
    # torchrun's own error files go under out_dir: without --log_dir it leaves a torchelastic_* folder in /tmp per run
    cmd += ["--max_restarts=0", "--monitor_interval=0.2", f"--log_dir={Path(out_dir) / 'torchrun-logs'}",
            "-m", DEMO_MODULE, "--out", str(out_dir),
            "--steps", str(steps), "--backend", backend]
    return cmd + list(extra_args or [])


def _check_int(name: str, value, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")


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
        timeout: Wall-clock limit in seconds for one attempt (the gloo retry after NCCL gets its own).
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
    if echo and nccl_first:
        print(tr(f"  (NCCL, mỗi rank một GPU; nếu NCCL lỗi hoặc treo quá {timeout:g} s, chạy lại bằng gloo)",
                 f"  (NCCL, one GPU per rank; if NCCL fails or hangs past {timeout:g} s, it runs again with gloo)"))
    notes: list[str] = []
    start = time.perf_counter()
    run = _launch_once(parsed, folder, backend, timeout, start)
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

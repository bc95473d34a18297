"""Tell what went wrong in a failed torchrun run: which rank died or hung first, with the end of its log.

``DDPRunError`` names the rank at fault (``rank``), what happened (``kind``: "died", "timeout", "leftover",
"bad_output") and the end of that rank's log (``log_tail``). The logs come from the ranks' own files
(``rank{R}.log``, as ``lessons_lib.ddp_demo`` writes them, with numbered progress lines) or from torchrun's
per-rank files (``--log-dir ... --redirects=3``, as ``lessons_lib.ddp.launch()`` asks for).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ._validate import check_int
from .i18n import tr

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
    check_int("rank", rank, 0)
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
